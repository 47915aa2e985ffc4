import Foundation

/// What a tus upload remembers to resume in another process, beside the
/// file and destination (the creation endpoint) its ``ManifestFile``
/// names: the upload's URL, which only the answer to its creation gave.
/// Kept in the folder the ``TusUploader`` was given: written when the
/// upload is created, again, marked finished, when the server holds it
/// whole (so that an upload that checks the storage first finds it there,
/// after a kill that came before the app recorded it), and removed when
/// the upload is discarded, or a week after it finished. The offset is not
/// kept: the server's `HEAD` says it.
struct TusManifest: ResumableManifest {
    static let prefix = "tus"
    static let currentVersion = 1
    static let serverKeepsFinishedUploads = true

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

    var handle: URL { uploadURL }

    var isFinished: Bool { finished == true }

    /// Marked finished: the server keeps a finished upload.
    func onceFinished() -> TusManifest? {
        var manifest = self
        manifest.finished = true
        return manifest
    }

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

    /// Removes the manifests in `folder` of uploads that finished a week
    /// ago or more, or whose file is gone.
    static func removeStale(in folder: URL, now: Date = Date()) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        for name in names where name.hasPrefix("\(prefix)-") && name.hasSuffix(".json") {
            let location = folder.appendingPathComponent(name)
            guard let found = ManifestFile<TusManifest>.read(from: location), found.manifest.isFinished else {
                continue
            }
            let written = (try? FileManager.default.attributesOfItem(atPath: location.path)[.modificationDate]) as? Date
            let isOld = written.map { now.timeIntervalSince($0) >= finishedLifetime } ?? true
            let fileIsGone = !found.file.hasPrefix(bytesFolder) && !FileManager.default.fileExists(atPath: found.file)
            if isOld || fileIsGone {
                try? FileManager.default.removeItem(at: location)
            }
        }
    }
}
