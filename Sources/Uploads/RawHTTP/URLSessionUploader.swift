import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An uploader that sends each upload to an HTTP server with `URLSession`.
///
/// Each upload is one request to the media's destination URL: `PUT` by
/// default, `POST` if you choose, with your headers (an auth token, say) and
/// a `Content-Type` from the media unless your headers set one. Bytes in
/// memory are sent as they are; a file is streamed from disk as it is sent,
/// so a large video is never read into memory whole.
///
/// ```swift
/// let uploader = URLSessionUploader(headers: ["Authorization": "Bearer \(token)"])
/// let receipt = try await Job.uploading(video, using: uploader).value
/// ```
///
/// The job finishes with the server's ``UploadReceipt`` when it answers
/// with a status in 200...299, the whole answer in it (up to
/// ``answerLimit``). It fails with:
/// - ``UploadError/httpStatus(_:)`` for any other status, with the
///   receipt of the answer (its headers, the start of its body);
/// - ``UploadError/invalidAnswer(_:reason:)`` for a successful answer
///   longer than ``answerLimit``;
/// - ``UploadError/fileNotFound(_:)``, ``UploadError/unreadableFile(_:reason:)``
///   or ``UploadError/invalidDestination(_:reason:)`` before any request, for
///   bad input;
/// - ``UploadError/network(_:_:)`` with the session's `URLError` when the
///   connection fails.
///
/// Each upload carries an `Idempotency-Key` header (the IETF HTTP APIs
/// working group's draft of that name), the same on every attempt of the
/// same upload: a `POST` retried after its answer was lost can be stored
/// twice, and a server that honours the key stores it once. The key is
/// the media's ``Media/idempotencyKey`` when it has one, so that it stays
/// the same across launches of the app.
///
/// Progress comes from the session's delegate, on the session's delegate
/// queue. Cancelling the job cancels the `URLSessionTask`; a job cancelled
/// before its request started never sends it.
public final class URLSessionUploader: Uploader, Sendable {
    /// The HTTP method of each upload.
    public enum Method: String, Sendable {
        /// `PUT`: the destination URL names the uploaded resource.
        case put = "PUT"
        /// `POST`: the destination URL receives the upload.
        case post = "POST"
    }

    /// The HTTP method of each upload.
    public let method: Method
    /// Headers sent with each upload.
    public let headers: [String: String]
    /// The most bytes of an answer's body a receipt keeps: a successful
    /// answer longer than this fails its upload.
    public let answerLimit: Int
    /// What sends its requests, unless the attempts of an upload hand it
    /// another (an ``Outbox``'s).
    private let transport: any HTTPTransport

    /// Creates an uploader with its own `URLSession`.
    /// - Parameters:
    ///   - method: `PUT` (the default) or `POST`.
    ///   - headers: Headers sent with each upload, such as
    ///     `Authorization`. A `Content-Type` here wins over the media's.
    ///   - answerLimit: The most bytes of an answer's body a receipt
    ///     keeps; 1 MiB (``UploadReceipt/defaultAnswerLimit``) by default.
    ///     A successful answer longer than this fails the upload with
    ///     ``UploadError/invalidAnswer(_:reason:)``.
    ///   - configuration: The session's configuration; ephemeral (no
    ///     cache, no cookies kept) by default.
    public init(
        method: Method = .put,
        headers: [String: String] = [:],
        answerLimit: Int = UploadReceipt.defaultAnswerLimit,
        configuration: URLSessionConfiguration = .ephemeral
    ) {
        self.method = method
        self.headers = headers
        self.answerLimit = answerLimit
        transport = InProcessTransport(configuration: configuration)
    }

    /// Checks that `destination` is an `http` or `https` URL with a host.
    public func validate(destination: URL) throws(UploadError) {
        try destination.validateAsHTTPDestination()
    }

    /// A job that sends `media` to its destination in one HTTP request and
    /// finishes with the server's receipt.
    ///
    /// Every performance of the returned job sends the same
    /// `Idempotency-Key` header, the media's ``Media/idempotencyKey`` or
    /// else a new UUID per call of this method, so a server that honours
    /// it stores a retried upload once even when the answer to an earlier
    /// attempt was lost.
    public func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
        send(media, through: transport, progress: progress)
    }

    /// A job that sends `media` as ``upload(_:progress:)`` does, each
    /// performance of that retried as `attempts` says.
    public func upload(
        _ media: Media,
        attempts: UploadAttempts,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        let transport = attempts.httpTransport(else: transport)
        return attempts.retrying(
            .metered(media, progress: progress) { send(media, through: transport, progress: $0) }, for: media)
    }

    /// A job that sends `media` in one request through `transport`.
    private func send(
        _ media: Media,
        through transport: any HTTPTransport,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        transport.upload(
            media, checkedBy: self, method: method.rawValue, headers: headers, headersNameContentType: true,
            answerLimit: answerLimit,
            encode: { size in
                switch media.content {
                case .bytes(let data): (media.contentType, .data(data))
                case .file(let file): (media.contentType, .file(file, offset: 0, length: size))
                }
            },
            progress: progress)
    }
}
