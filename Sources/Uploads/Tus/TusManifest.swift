import Foundation

/// What a tus upload must remember to resume in another process: which
/// file, where to, and the upload's URL, which only the answer to its
/// creation gave. Kept as ``ManifestFile`` says, in the folder the
/// ``TusUploader`` was given: written when the upload is created, again,
/// marked finished, when the server holds it whole (so that an upload
/// that checks the storage first finds it there, after a kill that came
/// before the app recorded it), and removed when the upload is discarded,
/// or a week after it finished. The offset is not kept: the server's
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
    /// The SHA-1 of bytes in memory, in hex: what tells two documents of
    /// one size apart.
    var bytesSHA1: String?
    /// The server holds the whole file: kept only to be found by an
    /// upload that checks the storage first.
    var finished: Bool?

    /// How long a finished upload's manifest is kept.
    static let finishedLifetime: TimeInterval = 7 * 24 * 3600

    /// The folder of the paths ``source(of:)`` makes for bytes.
    private static let bytesFolder = "/jobkit-bytes-with-key/"

    /// What a manifest names as the source of `media`: its file, or for
    /// bytes in memory sent with an `Idempotency-Key` (an outbox's post
    /// document, whose key lasts across launches) a path made of the key,
    /// which names no file; `nil` for other bytes, which keep no manifest.
    static func source(of media: Media) -> URL? {
        switch media.content {
        case .file(let file): file
        case .bytes:
            media.idempotencyKey.map { URL(fileURLWithPath: bytesFolder + $0.replacingOccurrences(of: "/", with: "_")) }
        }
    }

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

    /// Removes the manifests in `folder` of uploads that finished a week
    /// ago or more, or whose file is gone.
    static func removeStale(in folder: URL, now: Date = Date()) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        for name in names where name.hasPrefix("tus-") && name.hasSuffix(".json") {
            let location = folder.appendingPathComponent(name)
            guard let manifest = ManifestFile.load(TusManifest.self, from: location), manifest.finished == true
            else { continue }
            let written = (try? FileManager.default.attributesOfItem(atPath: location.path)[.modificationDate]) as? Date
            let isOld = written.map { now.timeIntervalSince($0) >= finishedLifetime } ?? true
            let fileIsGone =
                !manifest.file.hasPrefix(bytesFolder) && !FileManager.default.fileExists(atPath: manifest.file)
            if isOld || fileIsGone {
                try? FileManager.default.removeItem(at: location)
            }
        }
    }

    /// Removes the manifest at `location` if it names `uploadURL` (another
    /// performance may have replaced it with a newer upload's).
    static func remove(at location: URL, ifItNames uploadURL: URL) {
        guard ManifestFile.load(TusManifest.self, from: location)?.uploadURL == uploadURL else { return }
        try? FileManager.default.removeItem(at: location)
    }
}
