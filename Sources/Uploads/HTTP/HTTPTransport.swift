import Foundation
import JobKit
import Synchronization

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What sends the HTTP requests of every HTTP uploader (raw, forms, S3,
/// tus): the seam between an upload's requests and the session that
/// carries them.
///
/// Each uploader has its own, in process (``InProcessTransport``). An
/// ``Outbox`` given one of its own hands it to each upload it starts
/// (``UploadAttempts/transport``), and every request of that upload goes
/// through it instead: what the outbox decides (its machine, its pacer,
/// the receipts it keeps, its journal) is the same code whatever carries
/// the bytes.
protocol HTTPTransport: UploadTransport {
    /// A job that sends `request` and finishes with the answer when its
    /// status is in 200...299.
    ///
    /// - Returns: A job that fails with ``UploadError/httpStatus(_:)`` for
    ///   any other status and ``UploadError/network(_:_:)`` when the
    ///   connection fails, naming the request's
    ///   ``HTTPRequest/destination``.
    func send(_ request: HTTPRequest) -> Job<HTTPAnswer>
}

extension HTTPTransport {
    /// A job that sends `request` with `body`.
    ///
    /// - Parameters:
    ///   - request: The method, URL and headers.
    ///   - body: What to send.
    ///   - destination: What errors and the receipt name.
    ///   - resendable: Whether the transport may send the request again by
    ///     itself; `true` by default.
    ///   - answerLimit: The most bytes of the answer's body kept (a
    ///     successful answer longer than this fails); 1 MiB by default.
    ///   - task: What the request is within its upload ("upload",
    ///     "part 3", "PATCH at 0"); `nil` for none.
    ///   - progress: Called as the body goes out.
    func send(
        _ request: URLRequest,
        body: HTTPBody,
        destination: URL,
        resendable: Bool = true,
        answerLimit: Int = UploadReceipt.defaultAnswerLimit,
        task: String? = nil,
        progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }
    ) -> Job<HTTPAnswer> {
        send(
            HTTPRequest(
                urlRequest: request, body: body, destination: destination, resendable: resendable,
                answerLimit: answerLimit, task: task, progress: progress))
    }
}

/// One request as a transport takes it: what to send, and what to keep
/// of the answer.
struct HTTPRequest: Sendable {
    /// The method, URL and headers.
    var urlRequest: URLRequest
    /// What to send.
    var body: HTTPBody
    /// What errors and the receipt name (never the request's URL, whose
    /// query may hold a signature).
    var destination: URL
    /// Whether the transport may send the request again by itself when the
    /// connection it reused dies before an answer; `false` for a request
    /// that is not idempotent (a tus `PATCH`). Any request answered `417
    /// Expectation Failed`, which the server acted on none of, is sent
    /// again without its `Expect` header all the same.
    var resendable: Bool
    /// The most bytes of the answer's body kept: a successful answer
    /// longer than this fails with ``UploadError/invalidAnswer(_:reason:)``.
    var answerLimit: Int
    /// What the request is within its upload ("upload", "part 3",
    /// "PATCH at 0"), the same in every launch; `nil` for none.
    var task: String?
    /// The upload the request is part of, named the same in every launch
    /// (an outbox's post and medium); `nil` for none. See
    /// ``UploadAttempts/uploadName``.
    var upload: String?
    /// Called as the body goes out.
    var progress: @Sendable (UploadProgress) -> Void
    /// The description of the background session's task that carries it,
    /// which its part file is named after; `nil` until a
    /// ``BackgroundTransport`` gives it one.
    var taskDescription: String?

    /// The request's name in every launch: its upload's, then what it is
    /// within it; `nil` when either is not named.
    var name: String? {
        guard let upload, let task else { return nil }
        return "\(upload): \(task)"
    }
}

extension UploadAttempts {
    /// What carries the requests of the upload: the transport these
    /// attempts hand it, or else the uploader's `own`.
    ///
    /// An uploader that wraps one of this module's HTTP uploaders hands it
    /// the transport only through ``Uploader/upload(_:attempts:progress:)``:
    /// one that calls `upload(_:progress:)` sends through the uploader's
    /// own session.
    ///
    /// With a gate (an ``Outbox``'s), a request with a body asks the
    /// server first when the gate says so (``RequestGate/asksFirst(toward:)``).
    func httpTransport(else own: any HTTPTransport) -> any HTTPTransport {
        var chosen = own
        if let transport {
            guard let transport = transport as? any HTTPTransport else {
                // Only an outbox sets it, and only to an HTTPTransport.
                preconditionFailure("an upload's transport is an HTTPTransport, not \(type(of: transport))")
            }
            chosen = uploadName.map { NamingTransport(transport: transport, upload: $0) } ?? transport
        }
        guard let gate else { return chosen }
        return AskingFirstTransport(transport: chosen, gate: gate)
    }
}

/// A transport whose requests with a body ask the server first
/// (`Expect: 100-continue`) when their gate says so: a server that turns
/// one away before the body goes costs it its headers alone.
///
/// A server that refuses the expectation (`417 Expectation Failed`) is
/// sent the request again without it, once: so is a `417` that a request
/// joined after a relaunch (a background session's task of an earlier
/// launch, which asked) was answered.
private struct AskingFirstTransport: HTTPTransport {
    let transport: any HTTPTransport
    let gate: any RequestGate

    func send(_ request: HTTPRequest) -> Job<HTTPAnswer> {
        // One that asks for an expectation of its own is left alone.
        guard request.urlRequest.value(forHTTPHeaderField: "Expect") == nil else { return transport.send(request) }
        var asking = request
        // The destination, not the request's URL: the pacer knows the host
        // of the media (a tus `PATCH` may go to another).
        if request.body.count > 0, gate.asksFirst(toward: request.destination) {
            asking.urlRequest.setValue("100-continue", forHTTPHeaderField: "Expect")
            // Its first body bytes go once the server said `100 Continue`
            // (or, from libcurl, after a second without an answer).
            let told = Atomic(false)
            let progress = request.progress
            asking.progress = { [gate, destination = request.destination] sent in
                if sent.bytesSent > 0, !told.exchange(true, ordering: .relaxed) {
                    gate.continued(toward: destination)
                }
                progress(sent)
            }
        }
        return transport.send(asking).recover(with: { [transport] error in
            guard case UploadError.httpStatus(let receipt) = error, receipt.status == 417 else { return .failed(error) }
            return transport.send(request)
        })
    }
}

/// A transport that names each request it hands on after the upload it is
/// part of.
private struct NamingTransport: HTTPTransport {
    let transport: any HTTPTransport
    let upload: String

    func send(_ request: HTTPRequest) -> Job<HTTPAnswer> {
        var request = request
        request.upload = upload
        return transport.send(request)
    }
}

/// The body of one HTTP request.
enum HTTPBody: Sendable, Hashable {
    /// No body.
    case empty
    /// Bytes in memory.
    case data(Data)
    /// `length` bytes of `file` from `offset`, streamed from disk as they
    /// are sent.
    case file(URL, offset: Int64, length: Int64)
    /// Bytes in memory and ranges of files, one after another (a form's
    /// parts and the bytes around them), each file streamed from disk as
    /// it is sent.
    case segments([BodySegment])

    /// How many bytes the body holds.
    var count: Int64 {
        switch self {
        case .empty: 0
        case .data(let data): Int64(data.count)
        case .file(_, _, let length): length
        case .segments(let segments): segments.reduce(0) { $0 + $1.count }
        }
    }

    /// A body of `segments`: bytes in memory when they are bytes alone, a
    /// file when they are one range of one.
    init(segments: [BodySegment]) {
        if segments.count == 1, case .file(let file, let offset, let length) = segments[0] {
            self = .file(file, offset: offset, length: length)
            return
        }
        let bytes = segments.compactMap { segment -> Data? in
            guard case .bytes(let bytes) = segment else { return nil }
            return bytes
        }
        self = bytes.count == segments.count ? .data(bytes.reduce(Data(), +)) : .segments(segments)
    }

    /// The body as segments: what a stream of it sends.
    var segments: [BodySegment] {
        switch self {
        case .empty: []
        case .data(let data): [.bytes(data)]
        case .file(let file, let offset, let length): [.file(file, offset: offset, length: length)]
        case .segments(let segments): segments
        }
    }

    /// The file whose first `length` bytes the body is, with nothing
    /// around them; `nil` for any other body. The whole file when it still
    /// holds `length` bytes, which is for the caller to check.
    var fileFromItsStart: (file: URL, length: Int64)? {
        guard case .file(let file, 0, let length) = self else { return nil }
        return (file, length)
    }
}

/// One piece of a body sent in pieces.
enum BodySegment: Sendable, Hashable {
    /// Bytes in memory.
    case bytes(Data)
    /// `length` bytes of `file` from `offset`.
    case file(URL, offset: Int64, length: Int64)

    /// How many bytes the segment holds.
    var count: Int64 {
        switch self {
        case .bytes(let bytes): Int64(bytes.count)
        case .file(_, _, let length): length
        }
    }
}

/// What a server answered one request.
struct HTTPAnswer: Sendable {
    /// The URL the request went to.
    var url: URL
    /// The status, the headers and the body.
    var receipt: UploadReceipt
    /// The body, up to the limit the request was sent with.
    var body: Data
}

extension UploadReceipt {
    /// The receipt of `response`, whose body began with `body`, when its
    /// status is in 200...299; ``UploadError/httpStatus(_:)`` with it (an
    /// object storage's `<Error>` read into it) for any other, and
    /// ``UploadError/network(_:_:)`` when there is no HTTP response.
    static func reading(_ response: URLResponse?, body: Data, destination: URL) -> Result<Self, UploadError> {
        guard let response = response as? HTTPURLResponse else {
            return .failure(.network(destination, URLError(.badServerResponse)))
        }
        var headers: [String: String] = [:]
        for case (let name as String, let value as String) in response.allHeaderFields {
            headers[name] = value
        }
        let receipt = UploadReceipt(
            destination: destination, status: response.statusCode, headers: headers, body: body)
        guard (200...299).contains(response.statusCode) else {
            return .failure(.httpStatus(XMLErrorDocument.reading(receipt)))
        }
        return .success(receipt)
    }
}
