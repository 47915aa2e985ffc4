import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What the events of one session task make of its request: progress as
/// the body goes out, the server's answer up to a limit, and the outcome,
/// with the same errors whichever session carried it (in process or in
/// the background).
struct TaskAnswer: Sendable {
    /// What errors and the receipt name.
    let destination: URL
    /// The body's size.
    let size: Int64
    /// The most bytes of the answer's body kept.
    let limit: Int
    let progress: @Sendable (UploadProgress) -> Void
    let complete: @Sendable (Result<(receipt: UploadReceipt, body: Data), UploadError>) -> Void
    /// The server's answer, up to ``limit`` bytes.
    private(set) var body = Data()
    /// The bound the answer went past, when it did: ``limit``, or the
    /// smaller one of the bytes kept before the request joined its task.
    private(set) var overflowed: Int?

    init(
        _ request: HTTPRequest,
        size: Int64,
        complete: @escaping @Sendable (Result<(receipt: UploadReceipt, body: Data), UploadError>) -> Void
    ) {
        destination = request.destination
        self.size = size
        limit = max(request.answerLimit, 0)
        progress = request.progress
        self.complete = complete
    }

    /// Tells the request that `sent` bytes of its body went out: never
    /// more than its size.
    func sent(_ sent: Int64) {
        progress(UploadProgress(bytesSent: min(sent, size), bytesTotal: size))
    }

    /// Keeps `data`, the answer's next bytes, up to ``limit``; `cutAt`
    /// says that bytes came after `data` that were not kept past that
    /// many (an orphan task's, which ran while no request was there).
    /// Once the answer went past a bound, nothing more is kept: the body
    /// stays the answer's start.
    mutating func received(_ data: Data, cutAt: Int? = nil) {
        guard overflowed == nil else { return }
        let room = max(limit - body.count, 0)
        body.append(data.prefix(room))
        if data.count > room {
            overflowed = limit
        } else if let cutAt {
            overflowed = min(cutAt, limit)
        }
    }

    /// Completes the request with the outcome of a task that ended with
    /// `response` or `error`: a failure of the body's file (`fileFailure`:
    /// missing, shrunk) is said of the file rather than of the connection.
    func ended(response: URLResponse?, error: (any Error)?, fileFailure: UploadError?) {
        if let error {
            let urlError = Self.urlError(error, answered: response != nil)
            complete(.failure(fileFailure ?? .network(destination, urlError)))
            return
        }
        switch UploadReceipt.reading(response, body: body, destination: destination) {
        case .success(let receipt):
            sent(size)
            // A success's answer is kept whole, or it fails: a cut one
            // would read as an answer it is not.
            guard let overflowed else { return complete(.success((receipt, body))) }
            let reason =
                "it accepted the upload, but its answer is longer than \(Self.size(overflowed)), the most kept of an answer"
            complete(.failure(.invalidAnswer(destination, reason: reason)))
        case .failure(let error):
            complete(.failure(error))
        }
    }

    /// `bytes` in the largest binary unit that counts them whole: "1 MiB",
    /// "64 KiB", "1000 bytes".
    static func size(_ bytes: Int) -> String {
        if bytes > 0, bytes % (1 << 20) == 0 { return "\(bytes >> 20) MiB" }
        if bytes > 0, bytes % (1 << 10) == 0 { return "\(bytes >> 10) KiB" }
        return bytes == 1 ? "1 byte" : "\(bytes) bytes"
    }

    /// The session's error, with a connection that closed before any
    /// answer named as lost: FoundationNetworking reports a server that hung
    /// up as `badServerResponse` (libcurl's "got nothing") and a broken pipe
    /// as `unknown`, where Apple's URLSession says `networkConnectionLost`,
    /// which can pass and is retried.
    ///
    /// Only the code is kept: the session's error carries the request's
    /// URL, whose query may hold a presigned URL's signature.
    static func urlError(_ error: any Error, answered: Bool) -> URLError {
        guard let error = error as? URLError else { return URLError(.networkConnectionLost) }
        if !answered, error.code == .badServerResponse || error.code == .unknown {
            return URLError(.networkConnectionLost)
        }
        return URLError(error.code)
    }
}
