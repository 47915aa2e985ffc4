import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension HTTPTransport {
    /// A job that uploads `media` in one request to its destination and
    /// finishes with the server's receipt: the upload of
    /// ``URLSessionUploader``.
    ///
    /// Each performance checks the media first, as `uploader` does (a
    /// missing file or a refused destination fails it, and nothing is
    /// sent), then builds its body afresh with `encode`, given the media's
    /// size, and sends it as ``upload(to:method:headers:headersNameContentType:idempotencyKey:filename:answerLimit:prepare:progress:)``
    /// does, with the media's `Idempotency-Key` (a new one per call of this
    /// method when it has none).
    func upload(
        _ media: Media,
        checkedBy uploader: some Uploader,
        method: String,
        headers: [String: String],
        headersNameContentType: Bool,
        answerLimit: Int,
        encode: @escaping @Sendable (_ size: Int64) -> (contentType: String, body: HTTPBody),
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        upload(
            to: media.destination, method: method, headers: headers, headersNameContentType: headersNameContentType,
            idempotencyKey: media.idempotencyKey ?? UUID().uuidString, filename: nil, answerLimit: answerLimit,
            prepare: { encode(try uploader.checkedSize(of: media)) }, progress: progress)
    }

    /// A job that sends one request to `destination` and finishes with the
    /// server's receipt.
    ///
    /// Each performance builds its body afresh with `prepare`, whose error
    /// fails it before anything is sent, and sends it with `method`,
    /// `headers` and the body's content type (which a `Content-Type` in
    /// `headers` replaces when `headersNameContentType`), and with
    /// `idempotencyKey` as its `Idempotency-Key` unless `headers` name one.
    /// The receipt, and that of an ``UploadError/httpStatus(_:)``, names
    /// `filename` when given, and keeps the answer up to `answerLimit`
    /// bytes: a longer success fails.
    func upload(
        to destination: URL,
        method: String,
        headers: [String: String],
        headersNameContentType: Bool,
        idempotencyKey: String?,
        filename: String?,
        answerLimit: Int,
        prepare: @escaping @Sendable () throws -> (contentType: String, body: HTTPBody),
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        Job { [self] controller in
            let contentType: String
            let body: HTTPBody
            do {
                (contentType, body) = try prepare()
            } catch {
                controller.fail(with: error)
                return
            }
            var request = URLRequest(url: destination)
            request.httpMethod = method
            request.setValue(contentType, forHTTPHeaderField: "Content-Type")
            if let idempotencyKey {
                request.setValue(idempotencyKey, forHTTPHeaderField: "Idempotency-Key")
            }
            for (name, value) in headers where headersNameContentType || name.lowercased() != "content-type" {
                request.setValue(value, forHTTPHeaderField: name)
            }
            controller.perform(
                send(
                    request, body: body, destination: destination, answerLimit: answerLimit, task: "upload",
                    progress: progress)
            ) {
                controller.complete(with: Self.naming(filename, in: $0.map(\.receipt)))
            }
        }
    }

    /// `outcome`, its receipt (or its error's) naming `filename`.
    private static func naming(
        _ filename: String?, in outcome: Result<UploadReceipt, any Error>
    ) -> Result<UploadReceipt, any Error> {
        guard let filename else { return outcome }
        switch outcome {
        case .success(var receipt):
            receipt.filename = filename
            return .success(receipt)
        case .failure(UploadError.httpStatus(var receipt)):
            receipt.filename = filename
            return .failure(UploadError.httpStatus(receipt))
        case .failure:
            return outcome
        }
    }
}
