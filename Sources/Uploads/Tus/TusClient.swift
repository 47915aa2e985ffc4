import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The requests of tus 1.0 (tus.io's resumable upload protocol), each as a
/// job of one attempt that reads its answer. Whoever makes a request
/// retries it; the client retries nothing.
///
/// Every request carries `Tus-Resumable: 1.0.0` and the uploader's
/// headers. Errors and receipts name the destination the caller gives
/// (the creation endpoint, usually) and the file.
struct TusClient: Sendable {
    /// The protocol version every request and answer names.
    static let version = "1.0.0"

    /// What a server announced in its answer to `OPTIONS`.
    struct Server: Sendable, Hashable {
        /// Its extensions: `creation`, `creation-with-upload`,
        /// `termination`, `checksum`, `expiration`…
        var extensions: Set<String> = []
        /// The checksum algorithms it takes, in lower case.
        var checksumAlgorithms: Set<String> = []
        /// Whether it answered `OPTIONS` as a tus server (with a
        /// `Tus-Version`).
        var answeredOptions = false

        /// A server that announced nothing: the core protocol only.
        static let core = Server()

        /// Whether it checks `PATCH`es against an `Upload-Checksum` of
        /// SHA-1.
        var checksSHA1: Bool { extensions.contains("checksum") && checksumAlgorithms.contains("sha1") }
    }

    /// Where an upload stands, as an answer said.
    struct UploadState: Sendable {
        /// The bytes the server holds.
        var offset: Int64
        /// The upload's length, when the answer gave it.
        var length: Int64?
        /// When the server discards the unfinished upload, when it said.
        var expires: Date?
        /// The answer.
        var receipt: UploadReceipt
    }

    /// A new upload: where it is, and how many bytes of it the creation
    /// sent (`nil` when the answer did not say).
    struct Created: Sendable {
        var uploadURL: URL
        var offset: Int64?
        var expires: Date?
        var receipt: UploadReceipt
    }

    /// Sends the requests: the uploader's own transport, or the one an
    /// upload's attempts hand it (see ``carried(by:)``).
    var http: any HTTPTransport
    /// Sent with every request: credentials, usually.
    let headers: [String: String]

    /// This client, its requests sent through the transport `attempts`
    /// hand an upload, if they hand one.
    func carried(by attempts: UploadAttempts) -> Self {
        var client = self
        client.http = attempts.httpTransport(else: http)
        return client
    }

    // MARK: - Requests

    /// `OPTIONS`: what the server at `url` announces. A server that does
    /// not answer it (some answer `405` where creation is done) is taken
    /// to speak the core protocol alone; one that answers `2xx` without a
    /// `Tus-Version` naming 1.0.0 does not speak tus.
    func options(_ url: URL, destination: URL, filename: String?) -> Job<Server> {
        send("OPTIONS", to: url, destination: destination, filename: filename, checksTus: false).map { answer in
            let receipt = answer.receipt
            let versions = Self.list(receipt.header("Tus-Version"))
            guard versions.contains(Self.version) else {
                throw UploadError.invalidDestination(
                    destination,
                    reason: versions.isEmpty
                        ? "it does not speak tus: its answer to OPTIONS has no Tus-Version header"
                        : "its server speaks tus \(versions.joined(separator: ", ")), not \(Self.version)")
            }
            return Server(
                extensions: Set(Self.list(receipt.header("Tus-Extension"))),
                checksumAlgorithms: Set(Self.list(receipt.header("Tus-Checksum-Algorithm")).map { $0.lowercased() }),
                answeredOptions: true)
        }.recover { error in
            guard case .httpStatus(let receipt) = error as? UploadError, !UploadError.httpStatus(receipt).isTransient
            else { return .failed(error) }
            return .succeeded(.core)
        }.named("OPTIONS")
    }

    /// `POST` to `endpoint`: creates an upload of `length` bytes with
    /// `metadata`, sending `body` in the same request when given (the
    /// creation-with-upload extension), with its `checksum`.
    func create(
        at endpoint: URL,
        length: Int64,
        metadata: [(key: String, value: String)],
        body: HTTPBody?,
        checksum: String?,
        destination: URL,
        filename: String?,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<Created> {
        var headers = ["Upload-Length": String(length)]
        if !metadata.isEmpty {
            headers["Upload-Metadata"] = Self.encode(metadata)
        }
        if body != nil {
            headers["Content-Type"] = "application/offset+octet-stream"
        }
        if let checksum {
            headers["Upload-Checksum"] = "sha1 \(checksum)"
        }
        return send(
            "POST", to: endpoint, headers: headers, body: body ?? .empty, destination: destination,
            filename: filename, task: "create upload", progress: progress
        ).map { answer in
            guard let location = answer.receipt.location else {
                throw UploadError.invalidAnswer(destination, reason: "its answer to creating an upload has no Location")
            }
            return Created(
                uploadURL: location, offset: answer.receipt.header("Upload-Offset").flatMap { Int64($0) },
                expires: Self.expires(in: answer.receipt), receipt: answer.receipt)
        }.named("create upload")
    }

    /// `HEAD`: how many bytes of the upload at `uploadURL` the server holds.
    func head(_ uploadURL: URL, destination: URL, filename: String?) -> Job<UploadState> {
        // Not from a cache: the offset changes with every PATCH.
        send(
            "HEAD", to: uploadURL, headers: ["Cache-Control": "no-store"], destination: destination, filename: filename,
            task: "HEAD"
        )
        .map { answer in
            guard let offset = answer.receipt.header("Upload-Offset").flatMap({ Int64($0) }), offset >= 0 else {
                throw UploadError.invalidAnswer(destination, reason: "its answer to HEAD has no Upload-Offset")
            }
            return UploadState(
                offset: offset, length: answer.receipt.header("Upload-Length").flatMap { Int64($0) },
                expires: Self.expires(in: answer.receipt), receipt: answer.receipt)
        }.named("HEAD")
    }

    /// `PATCH`: sends `body` to the upload at `uploadURL` from `offset`,
    /// with its SHA-1 `checksum` when given; finishes with the offset the
    /// server then holds.
    func patch(
        _ uploadURL: URL,
        offset: Int64,
        body: HTTPBody,
        checksum: String?,
        destination: URL,
        filename: String?,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadState> {
        var headers = ["Upload-Offset": String(offset), "Content-Type": "application/offset+octet-stream"]
        if let checksum {
            headers["Upload-Checksum"] = "sha1 \(checksum)"
        }
        return send(
            "PATCH", to: uploadURL, headers: headers, body: body, destination: destination, filename: filename,
            task: "PATCH at \(offset)", progress: progress
        ).map { answer in
            guard let new = answer.receipt.header("Upload-Offset").flatMap({ Int64($0) }),
                new > offset, new <= offset + body.count
            else {
                throw UploadError.invalidAnswer(
                    destination,
                    reason: "its answer to a PATCH of \(body.count) bytes at \(offset) has the offset "
                        + (answer.receipt.header("Upload-Offset") ?? "none"))
            }
            return UploadState(offset: new, expires: Self.expires(in: answer.receipt), receipt: answer.receipt)
        }.named("PATCH at \(offset)")
    }

    /// `DELETE` (the termination extension): discards the upload at
    /// `uploadURL`.
    func terminate(_ uploadURL: URL, destination: URL, filename: String?) -> Job<Void> {
        send("DELETE", to: uploadURL, destination: destination, filename: filename).map { _ in }
            .named("terminate upload")
    }

    // MARK: - Sending

    /// Sends `method` to `url` with the tus headers, `headers` and the
    /// uploader's. A `2xx` answer without `Tus-Resumable` fails with
    /// ``UploadError/invalidDestination(_:reason:)``: the server took the
    /// request without speaking tus (`checksTus`: every request but
    /// `OPTIONS`, whose answer need not carry it). Other answers fail as
    /// ``UploadError/httpStatus(_:)``, with or without it: some tus
    /// servers leave it out of their errors. `task` names the request
    /// within its upload (``HTTPRequest/task``).
    private func send(
        _ method: String,
        to url: URL,
        headers: [String: String] = [:],
        body: HTTPBody = .empty,
        destination: URL,
        filename: String?,
        checksTus: Bool = true,
        task: String? = nil,
        progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }
    ) -> Job<HTTPAnswer> {
        // A POST or PATCH that the transport sent again by itself, once
        // some of its body went out, could create an upload twice, or send
        // bytes at an offset the server no longer holds: it fails instead,
        // and its owner decides (see URLSessionUploadDelegate.register).
        let resendable = method != "POST" && method != "PATCH"
        var request = URLRequest(url: url)
        request.httpMethod = method
        for (name, value) in self.headers {
            request.setValue(value, forHTTPHeaderField: name)
        }
        request.setValue(Self.version, forHTTPHeaderField: "Tus-Resumable")
        for (name, value) in headers {
            request.setValue(value, forHTTPHeaderField: name)
        }
        return http.send(
            request, body: body, destination: destination, resendable: resendable, task: task, progress: progress
        ).map { answer in
            var answer = answer
            answer.receipt.filename = filename
            if checksTus, answer.receipt.header("Tus-Resumable") == nil {
                throw Self.notTus(destination, method: method, status: answer.receipt.status)
            }
            return answer
        }.mapError { error in
            guard case .httpStatus(var receipt) = error as? UploadError else { return error }
            receipt.filename = filename
            return UploadError.httpStatus(receipt)
        }
    }

    /// `error`, said as the error of a URL that does not speak tus when it
    /// is the refusal of `method` without `Tus-Resumable`, which no retry
    /// can help, from a `server` that did not answer `OPTIONS` as a tus
    /// server either: a `404` or `501` from a server of another kind.
    static func explaining(_ error: any Error, of method: String, from server: Server) -> any Error {
        guard !server.answeredOptions, case .httpStatus(let receipt) = error as? UploadError,
            !UploadError.httpStatus(receipt).isTransient, receipt.header("Tus-Resumable") == nil
        else { return error }
        return UploadError.invalidDestination(
            receipt.destination,
            reason: "it does not speak tus: it answered \(method) with \(receipt.status), without Tus-Resumable, "
                + "and OPTIONS without Tus-Version")
    }

    /// The error of a server that answered `method` without
    /// `Tus-Resumable`.
    private static func notTus(_ destination: URL, method: String, status: Int) -> UploadError {
        .invalidDestination(
            destination,
            reason: "it does not speak tus: its answer to \(method) (\(status)) has no Tus-Resumable header")
    }

    // MARK: - Headers

    /// The items of a comma-separated header, trimmed.
    static func list(_ header: String?) -> [String] {
        (header ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    }

    /// `Upload-Metadata`: each key, a space and its value in base64,
    /// separated by commas.
    static func encode(_ metadata: [(key: String, value: String)]) -> String {
        metadata.map { "\($0.key) \(Data($0.value.utf8).base64EncodedString())" }.joined(separator: ",")
    }

    /// The answer's `Upload-Expires`.
    static func expires(in receipt: UploadReceipt) -> Date? {
        receipt.header("Upload-Expires").flatMap(HTTPDate.parse)
    }

    /// The status of `error` when it is an ``UploadError/httpStatus(_:)``.
    static func status(of error: any Error) -> Int? {
        guard case .httpStatus(let receipt) = error as? UploadError else { return nil }
        return receipt.status
    }

    /// Whether `error` says the server no longer has the upload: `404`,
    /// `410`, or `403` (which some servers answer for an upload they
    /// discarded).
    static func isGone(_ error: any Error) -> Bool {
        guard let status = status(of: error) else { return false }
        return status == 404 || status == 410 || status == 403
    }
}
