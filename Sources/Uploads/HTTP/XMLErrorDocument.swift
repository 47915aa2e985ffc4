import Foundation

/// The XML error document of object storages, which every HTTP uploader
/// may meet (a presigned URL is one `PUT` away):
/// `<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`,
/// as S3 and the storages that speak its API answer (Cloudflare R2,
/// MinIO, Backblaze B2, Google Cloud Storage's XML API).
///
/// The HTTP client reads it into each answer's receipt
/// (``UploadReceipt/serverError``), so that errors quote its code and
/// message, and its codes that ask for another attempt are transient
/// whatever the status they come with: S3 can answer `200 OK` with an
/// `InternalError`, and `400 Bad Request` with a `RequestTimeout`.
enum XMLErrorDocument {
    /// The codes that ask for another attempt.
    static let transientCodes: Set<String> = ["InternalError", "SlowDown", "ServiceUnavailable", "RequestTimeout"]

    /// The error `body` names, when it is an `<Error>` document with a
    /// `<Code>`; `nil` otherwise.
    static func read(_ body: Data) -> UploadReceipt.ServerError? {
        guard body.firstRange(of: Data("<Error".utf8)) != nil, let root = XMLTree.parse(body), root.name == "Error",
            let code = root["Code"]?.text
        else { return nil }
        return UploadReceipt.ServerError(
            code: code, message: root["Message"]?.text ?? "",
            failure: transientCodes.contains(code) ? .transient : nil)
    }

    /// `receipt`, with the error its body names as its
    /// ``UploadReceipt/serverError``.
    static func reading(_ receipt: UploadReceipt) -> UploadReceipt {
        var read = receipt
        read.serverError = read.serverError ?? self.read(receipt.body)
        return read
    }
}
