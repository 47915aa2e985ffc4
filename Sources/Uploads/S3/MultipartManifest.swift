import Foundation

/// What a multipart upload in progress must remember to resume in another
/// process: which file, where to, its upload ID and part size, and the
/// parts finished so far with their ETags.
///
/// One small JSON file per file and destination, in the folder the
/// ``S3Uploader`` was given, replaced atomically on each change (written
/// beside it, then renamed over it), so a process killed at any moment
/// leaves the previous manifest or the next one, never half of one.
struct MultipartManifest: Codable, Sendable, Hashable {
    /// The format of this file; a manifest of another version is ignored.
    static let currentVersion = 1

    var version = Self.currentVersion
    /// The file's path.
    var file: String
    /// The media's destination.
    var destination: String
    /// The file's size when the upload began.
    var fileSize: Int64
    /// The file's modification date when the upload began, in seconds since
    /// 1970.
    var fileModified: Double
    var uploadID: String
    var partSize: Int64
    /// Finished parts: each part number's ETag.
    var parts: [Int: String] = [:]

    /// Where the manifest of `file` going to `destination` lives in
    /// `folder`: a name derived from both, so that each upload has its own.
    static func location(in folder: URL, file: URL, destination: URL) -> URL {
        ManifestFile.location(in: folder, prefix: "multipart", file: file, destination: destination)
    }

    /// The manifest at `location` if it is one of this version for `file`
    /// and `destination`; `nil` otherwise (none, unreadable, or another's).
    static func load(from location: URL, file: URL, destination: URL) -> MultipartManifest? {
        guard let data = try? Data(contentsOf: location),
            let manifest = try? JSONDecoder().decode(MultipartManifest.self, from: data),
            manifest.version == currentVersion,
            manifest.file == file.standardizedFileURL.path,
            manifest.destination == destination.absoluteString,
            // A part size S3 would refuse, or one that cannot cover the
            // file: not a manifest this uploader wrote.
            manifest.partSize >= S3Client.minimumPartSize,
            manifest.fileSize <= manifest.partSize * Int64(S3Client.maximumPartCount)
        else { return nil }
        return manifest
    }

    /// Writes the manifest to `location` atomically, creating its folder.
    func save(to location: URL) throws(UploadError) {
        try ManifestFile.save(self, to: location)
    }

    /// Removes the manifest at `location` if it is the one of `uploadID`
    /// (another performance may have replaced it with a newer upload's).
    static func remove(at location: URL, ifItNames uploadID: String) {
        guard let data = try? Data(contentsOf: location),
            let manifest = try? JSONDecoder().decode(MultipartManifest.self, from: data),
            manifest.uploadID == uploadID
        else { return }
        try? FileManager.default.removeItem(at: location)
    }
}

/// The size and modification date of a file, which tell whether it changed
/// since a multipart upload of it began.
struct FileIdentity: Sendable, Hashable {
    var size: Int64
    var modified: Double

    /// The identity of `file` now.
    static func of(_ file: URL) throws(UploadError) -> FileIdentity {
        let size = try Media.sizeOfReadableFile(at: file)
        let attributes = try? FileManager.default.attributesOfItem(atPath: file.path)
        let modified = (attributes?[.modificationDate] as? Date)?.timeIntervalSince1970 ?? 0
        return FileIdentity(size: size, modified: modified)
    }

    /// ``UploadError/fileChanged(_:reason:)`` when `now`, the identity of
    /// `file` now, is not this one, which it had when its upload began.
    func change(to now: FileIdentity, of file: URL) -> UploadError? {
        guard now != self else { return nil }
        return .fileChanged(
            file,
            reason: now.size == size
                ? "it was modified since its upload began"
                : "it was \(size) bytes when its upload began, and is \(now.size) now")
    }

    /// ``UploadError/fileChanged(_:reason:)`` when `file` no longer has
    /// this identity, or cannot be read.
    func change(of file: URL) -> UploadError? {
        guard let now = try? FileIdentity.of(file) else {
            return .fileChanged(file, reason: "it can no longer be read")
        }
        return change(to: now, of: file)
    }

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
