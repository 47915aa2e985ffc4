import Foundation

/// What a tus upload in progress must remember to resume in another
/// process: which file, where to, and the upload's URL, which only the
/// answer to its creation gave. Kept as ``ManifestFile`` says, in the
/// folder the ``TusUploader`` was given; written once, when the upload is
/// created, and removed when it ends. The offset is not kept: the server's
/// `HEAD` says it.
struct TusManifest: Codable, Sendable, Hashable {
    /// The format of this file; a manifest of another version is ignored.
    static let currentVersion = 1

    var version = Self.currentVersion
    /// The file's path.
    var file: String
    /// The media's destination: the creation endpoint.
    var destination: String
    /// The file's size when the upload began.
    var fileSize: Int64
    /// The file's modification date when the upload began, in seconds since
    /// 1970.
    var fileModified: Double
    /// Where the upload is.
    var uploadURL: URL
    /// When the server said it discards the unfinished upload, in seconds
    /// since 1970.
    var expires: Double?

    /// Where the manifest of `file` going to `destination` lives in
    /// `folder`.
    static func location(in folder: URL, file: URL, destination: URL) -> URL {
        ManifestFile.location(in: folder, prefix: "tus", file: file, destination: destination)
    }

    /// The manifest at `location` if it is one of this version for `file`
    /// and `destination`; `nil` otherwise (none, unreadable, or another's).
    static func load(from location: URL, file: URL, destination: URL) -> TusManifest? {
        guard let manifest = ManifestFile.load(TusManifest.self, from: location),
            manifest.version == currentVersion,
            manifest.file == file.standardizedFileURL.path,
            manifest.destination == destination.absoluteString
        else { return nil }
        return manifest
    }

    /// Writes the manifest to `location` atomically, creating its folder.
    func save(to location: URL) throws(UploadError) {
        try ManifestFile.save(self, to: location)
    }

    /// Removes the manifest at `location` if it names `uploadURL` (another
    /// performance may have replaced it with a newer upload's).
    static func remove(at location: URL, ifItNames uploadURL: URL) {
        guard ManifestFile.load(TusManifest.self, from: location)?.uploadURL == uploadURL else { return }
        try? FileManager.default.removeItem(at: location)
    }
}
