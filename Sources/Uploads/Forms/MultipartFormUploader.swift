import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An uploader that sends each medium as a multipart/form-data form: the
/// way Mastodon and the servers that speak its API, Discord, Telegram's
/// Bot API, Cloudinary, Imgur and WordPress take media. It also sends
/// forms of several files and fields (``FormData``), with
/// `Job.uploading(_:to:using:progress:)`.
///
/// Each upload is one request to the medium's destination, `POST` unless
/// the uploader's ``method`` says `PUT` or `PATCH`. Its form holds
/// this uploader's ``fields``, then the medium's own
/// (``Media/formFields``), each in its order and repeated names allowed,
/// then the file's part under ``fileField``, with the medium's
/// ``Media/filename`` (by default its file's name) and content type.
///
/// ```swift
/// let uploader = try MultipartFormUploader(headers: ["Authorization": "Bearer \(token)"])
/// var photo = Photo(file: beach, destination: URL(string: "https://social.example/api/v2/media")!)
/// photo.media.formFields = [FormField(name: "description", value: "Dawn over the bay")]
/// let receipt = try await Job.uploading(photo, using: uploader).value
/// ```
///
/// A file is streamed from disk as it is sent, between the bytes of the
/// fields and of the form's end, with an exact `Content-Length` computed
/// before the first byte: no temporary copy, never chunked. Each attempt
/// builds its form afresh, with a boundary of 128 random bits. Names and
/// file names are escaped as browsers escape them (`"`, CR and LF as `%22`,
/// `%0D` and `%0A`; nothing else, so a name that holds `%22` itself reaches
/// the server as `"`).
///
/// Progress counts every byte of the form. Errors, receipts, retries and
/// the `Idempotency-Key` header (unless the uploader is made not to send
/// it) are those of ``URLSessionUploader``: the
/// job fails with ``UploadError/httpStatus(_:)`` for a status outside
/// 200...299, with the receipt of the answer (its headers, the start of
/// its body); as every medium goes to the same endpoint, the receipt names
/// the file (``UploadReceipt/filename``), and so does the error, which
/// quotes the server's JSON `error`: `beach.jpg → api/v2/media: the
/// server answered 413 Payload Too Large ("File is too large")`. A
/// successful answer longer than ``answerLimit`` fails it with
/// ``UploadError/invalidAnswer(_:reason:)``. It fails
/// with ``UploadError/fileNotFound(_:)``,
/// ``UploadError/unreadableFile(_:reason:)`` or
/// ``UploadError/invalidDestination(_:reason:)`` before any request, and
/// with ``UploadError/network(_:_:)`` when the connection fails.
public final class MultipartFormUploader: Uploader, Sendable {
    /// The HTTP method of each upload.
    public enum Method: String, Sendable {
        /// `POST`: the destination URL receives the form.
        case post = "POST"
        /// `PUT`: the form replaces what the destination URL names.
        case put = "PUT"
        /// `PATCH`: the form changes what the destination URL names.
        case patch = "PATCH"
    }

    /// The HTTP method of each upload; `POST` by default.
    public let method: Method
    /// Whether each upload carries an `Idempotency-Key` header; `true` by
    /// default.
    public let sendsIdempotencyKey: Bool
    /// The most bytes of an answer's body a receipt keeps: a successful
    /// answer longer than this fails its upload.
    public let answerLimit: Int
    /// The name of the file's part; `file` by default.
    public let fileField: String
    /// Fields sent in every form, before the medium's own.
    public let fields: [FormField]
    /// Headers sent with each upload, such as `Authorization`. The
    /// form's own `Content-Type` replaces any given here.
    public let headers: [String: String]
    /// How to wait, after each upload, until the server has made the
    /// medium ready to use; `nil` when an upload's answer means ready.
    public let processing: MediaProcessing?
    /// What sends its requests, unless the attempts of an upload hand it
    /// another (an ``Outbox``'s).
    private let transport: any HTTPTransport

    /// Creates an uploader with its own `URLSession`.
    /// - Parameters:
    ///   - method: `POST` (the default), `PUT` or `PATCH`.
    ///   - fileField: The name of the file's part; `file` by default.
    ///   - fields: Fields sent in every form, before each medium's own;
    ///     none by default.
    ///   - headers: Headers sent with each upload, such as
    ///     `Authorization`, and with each question of `processing`.
    ///   - sendsIdempotencyKey: Whether each upload carries an
    ///     `Idempotency-Key` header, the same on every attempt; `true` by
    ///     default. `false` leaves it out, for a server that refuses
    ///     headers it does not know.
    ///   - answerLimit: The most bytes of an answer's body a receipt
    ///     keeps; 1 MiB (``UploadReceipt/defaultAnswerLimit``) by default.
    ///     A successful answer longer than this fails the upload with
    ///     ``UploadError/invalidAnswer(_:reason:)``.
    ///   - processing: How to wait until the server has made each medium
    ///     ready (``MediaProcessing/mastodon``, say); none by default.
    ///   - configuration: The session's configuration; ephemeral (no
    ///     cache, no cookies kept) by default.
    /// - Throws: ``InvalidOptionError`` when `processing`'s waits are
    ///   negative or its time limit is not above zero.
    public init(
        method: Method = .post,
        fileField: String = "file",
        fields: [FormField] = [],
        headers: [String: String] = [:],
        sendsIdempotencyKey: Bool = true,
        answerLimit: Int = UploadReceipt.defaultAnswerLimit,
        processing: MediaProcessing? = nil,
        configuration: URLSessionConfiguration = .ephemeral
    ) throws(InvalidOptionError) {
        if let processing {
            try InvalidOptionError.within("processing") { () throws(InvalidOptionError) in try processing.validate() }
        }
        self.method = method
        self.sendsIdempotencyKey = sendsIdempotencyKey
        self.answerLimit = answerLimit
        self.fileField = fileField
        self.fields = fields
        self.headers = headers
        self.processing = processing
        transport = InProcessTransport(configuration: configuration)
    }

    /// Checks that `destination` is an `http` or `https` URL with a host.
    public func validate(destination: URL) throws(UploadError) {
        try destination.validateAsHTTPDestination()
    }

    /// A job that sends `media` as a form to its destination and
    /// finishes with the server's receipt, once the medium is ready when
    /// this uploader waits for ``processing``.
    ///
    /// Every performance of the returned job sends the same
    /// `Idempotency-Key` header (unless ``sendsIdempotencyKey`` is
    /// `false`), the media's ``Media/idempotencyKey`` or else a new UUID
    /// per call of this method.
    public func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
        waitingUntilReady(send(media, through: transport, progress: progress), through: transport)
    }

    /// A job that sends `form` to `destination`, after this uploader's
    /// ``fields``, and finishes with the server's receipt, once the
    /// server has made it ready when this uploader waits for
    /// ``processing``: what `Job.uploading(_:to:using:progress:)`
    /// performs.
    func upload(
        _ form: FormData, to destination: URL, progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        waitingUntilReady(send(form, to: destination, through: transport, progress: progress), through: transport)
    }

    /// A job that sends `media` as a form, retried as `attempts` says,
    /// then, when this uploader waits for ``processing``, waits until the
    /// medium is ready: the wait is not part of an attempt, so an
    /// attempt's time limit does not cut it, and no failure of it sends
    /// the medium again.
    public func upload(
        _ media: Media,
        attempts: UploadAttempts,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        let transport = attempts.httpTransport(else: transport)
        return waitingUntilReady(
            attempts.retrying(
                .metered(media, progress: progress) { send(media, through: transport, progress: $0) }, for: media),
            through: transport)
    }

    /// `upload`, followed by the wait for ``processing`` when there is one,
    /// its questions sent through `transport`.
    private func waitingUntilReady(
        _ upload: Job<UploadReceipt>, through transport: any HTTPTransport
    ) -> Job<UploadReceipt> {
        guard let processing else { return upload }
        return upload.then { [self] receipt in
            processing.waitUntilReady(receipt, filename: receipt.filename) { [headers, answerLimit] url in
                var request = URLRequest(url: url)
                for (name, value) in headers where name.lowercased() != "content-type" {
                    request.setValue(value, forHTTPHeaderField: name)
                }
                return transport.send(request, body: .empty, destination: url, answerLimit: answerLimit).map(\.receipt)
            }
        }
    }

    /// A job that sends `media` as a form through `transport`, once: the
    /// medium's fields, then its file's part, after this uploader's
    /// ``fields``, with the medium's `Idempotency-Key` if it has one.
    private func send(
        _ media: Media,
        through transport: any HTTPTransport,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        let content: FormData.Part.Content =
            switch media.content {
            case .bytes(let data): .bytes(data)
            case .file(let file): .file(file)
            }
        let file = FormData.Part(
            name: fileField, content: content, filename: media.filename ?? media.defaultFilename,
            contentType: media.contentType)
        let form = FormData(parts: media.formFields.map(Self.part) + [file])
        return send(
            form, to: media.destination, idempotencyKey: media.idempotencyKey, through: transport, progress: progress)
    }

    /// A job that sends `form` to `destination` through `transport`, once,
    /// after this uploader's ``fields``.
    ///
    /// Each performance checks the destination, the parts' headers and
    /// the files (a missing one fails it before any byte is sent), and
    /// builds the body afresh. Every performance sends the same
    /// `Idempotency-Key`: `idempotencyKey`, or a new one per call of this
    /// method. The receipt, and an error's, names the form's files.
    private func send(
        _ form: FormData,
        to destination: URL,
        idempotencyKey: String? = nil,
        through transport: any HTTPTransport,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        let parts = fields.map(Self.part) + form.parts
        let filenames = parts.compactMap { part -> String? in
            if case .text = part.content { return nil }
            return part.filename
        }
        return transport.upload(
            to: destination, method: method.rawValue, headers: headers, headersNameContentType: false,
            idempotencyKey: sendsIdempotencyKey ? idempotencyKey ?? UUID().uuidString : nil,
            filename: filenames.isEmpty ? nil : filenames.joined(separator: ", "), answerLimit: answerLimit,
            prepare: { [self] () throws(UploadError) in
                try validate(destination: destination)
                try MultipartForm.validate(parts, to: destination)
                var fileSizes: [Int: Int64] = [:]
                for (index, part) in parts.enumerated() {
                    if case .file(let file) = part.content {
                        fileSizes[index] = try Media.sizeOfReadableFile(at: file)
                    }
                }
                let framing = MultipartForm()
                return (framing.contentType, HTTPBody(segments: framing.body(of: parts, fileSizes: fileSizes)))
            },
            progress: progress)
    }

    /// `field` as a form's text part.
    private static func part(_ field: FormField) -> FormData.Part {
        FormData.Part(name: field.name, content: .text(field.value))
    }
}
