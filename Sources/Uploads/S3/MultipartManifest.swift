import Foundation

/// What a multipart upload in progress remembers to resume in another
/// process, beside the file and destination its ``ManifestFile`` names:
/// its upload ID and part size, and the parts finished so far with their
/// ETags. Kept in the folder the ``S3Uploader`` was given: written when
/// the upload is created and as each part is stored, and removed once the
/// object is complete, or the upload discarded.
struct MultipartManifest: ResumableManifest {
    static let prefix = "multipart"
    static let currentVersion = 1

    var uploadID: String
    var partSize: Int64
    /// Finished parts: each part number's ETag.
    var parts: [Int: String] = [:]

    var handle: String { uploadID }

    /// Whether its part size is one S3 takes and covers a file of `size`
    /// bytes: another is not a manifest this uploader wrote.
    func isUsable(forFileOf size: Int64) -> Bool {
        partSize >= S3Client.minimumPartSize && size <= partSize * Int64(S3Client.maximumPartCount)
    }
}

extension FileIdentity {
    /// `error`, or ``UploadError/fileChanged(_:reason:)`` when `error` is
    /// the storage refusing bytes that do not match their `Content-MD5`
    /// (S3's `BadDigest`) and `file` changed since this identity was taken:
    /// the bytes changed on disk, not on the way.
    func explaining(_ error: any Error, of file: URL) -> any Error {
        guard case .httpStatus(let receipt) = error as? UploadError, receipt.status == 400,
            receipt.serverError?.code == "BadDigest"
        else { return error }
        return change(of: file) ?? error
    }
}
