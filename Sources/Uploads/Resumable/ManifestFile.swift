import Foundation
import JobKit

/// What one protocol's resumable upload remembers to resume in another
/// process, beyond what every manifest holds (``ManifestFile``): an S3
/// multipart upload's ID and parts, a tus upload's URL.
protocol ResumableManifest: Codable, Sendable, Hashable {
    /// What names the upload on the server: an upload ID, an upload URL.
    associatedtype Handle: Sendable, Hashable

    /// The start of its manifests' file names.
    static var prefix: String { get }
    /// The format of its manifests; a manifest of another version is
    /// ignored.
    static var currentVersion: Int { get }

    /// Whether the server keeps an upload once it holds the whole file
    /// (tus), rather than making it into its object (S3). A cancel that
    /// comes with the last answer then wins over settling: the upload is
    /// discarded, or, with attempts that keep what is stored, left as it
    /// was, its manifest not marked finished.
    static var serverKeepsFinishedUploads: Bool { get }

    /// The upload it is the manifest of.
    var handle: Handle { get }
    /// Whether the server held the whole file when it was written: the
    /// upload is then the server's copy of it, never discarded.
    var isFinished: Bool { get }
    /// What the manifest becomes once the server holds the whole file:
    /// `nil` when it is removed (nothing is left to resume), the manifest
    /// marked finished when it is kept.
    func onceFinished() -> Self?
    /// Whether it is one its uploader could have written for a file of
    /// `size` bytes.
    func isUsable(forFileOf size: Int64) -> Bool
}

extension ResumableManifest {
    static var serverKeepsFinishedUploads: Bool { false }
    var isFinished: Bool { false }
    func onceFinished() -> Self? { nil }
    func isUsable(forFileOf size: Int64) -> Bool { true }
}

/// A resumable upload's manifest as it is on disk: the file and
/// destination it is the upload of, the file's size and modification date
/// when it began, the format's version, and what the protocol remembers
/// (`Manifest`), all in one small JSON object.
///
/// One file per file and destination, in the folder its uploader was
/// given, replaced atomically (written beside it, then renamed over it),
/// so that a process killed at any moment leaves the previous manifest or
/// the next one, never half of one.
struct ManifestFile<Manifest: ResumableManifest>: Codable, Sendable, Hashable {
    var version = Manifest.currentVersion
    /// The file's path.
    var file: String
    /// The media's destination.
    var destination: String
    /// The file's size when the upload began.
    var fileSize: Int64
    /// The file's modification date when the upload began, in seconds since
    /// 1970.
    var fileModified: Double
    /// What the protocol remembers, in the same JSON object.
    var manifest: Manifest

    /// The manifest of an upload of `file`, as it is at `identity`, to
    /// `destination`.
    init(file: URL, destination: URL, identity: FileIdentity, manifest: Manifest) {
        self.file = file.standardizedFileURL.path
        self.destination = destination.absoluteString
        fileSize = identity.size
        fileModified = identity.modified
        self.manifest = manifest
    }

    /// The size and modification date of the file when its upload began.
    var identity: FileIdentity {
        FileIdentity(size: fileSize, modified: fileModified)
    }

    private enum CodingKeys: String, CodingKey {
        case version, file, destination, fileSize, fileModified
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        version = try container.decode(Int.self, forKey: .version)
        file = try container.decode(String.self, forKey: .file)
        destination = try container.decode(String.self, forKey: .destination)
        fileSize = try container.decode(Int64.self, forKey: .fileSize)
        fileModified = try container.decode(Double.self, forKey: .fileModified)
        manifest = try Manifest(from: decoder)
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(version, forKey: .version)
        try container.encode(file, forKey: .file)
        try container.encode(destination, forKey: .destination)
        try container.encode(fileSize, forKey: .fileSize)
        try container.encode(fileModified, forKey: .fileModified)
        // The protocol's keys, beside these in the same object.
        try manifest.encode(to: encoder)
    }

    // MARK: - On disk

    /// Where the manifest of `file` going to `destination` lives in
    /// `folder`: the protocol's prefix, then a hash of both, so that each
    /// upload has its own.
    static func location(in folder: URL, file: URL, destination: URL) -> URL {
        // FNV-1a, 64 bits: stable across processes and platforms, unlike
        // `Hasher`, which is seeded per process.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in (file.standardizedFileURL.path + "\n" + destination.absoluteString).utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        let name = String(hash, radix: 16)
        return folder.appendingPathComponent(
            "\(Manifest.prefix)-\(String(repeating: "0", count: 16 - name.count))\(name).json")
    }

    /// The manifest at `location`, if one can be read there, whatever it is
    /// the upload of.
    static func read(from location: URL) -> ManifestFile? {
        guard let data = try? Data(contentsOf: location) else { return nil }
        return try? JSONDecoder().decode(ManifestFile.self, from: data)
    }

    /// The manifest at `location` if it is one of this version for `file`
    /// and `destination`; `nil` otherwise (none, unreadable, or another's).
    static func load(from location: URL, file: URL, destination: URL) -> ManifestFile? {
        guard let manifest = read(from: location),
            manifest.version == Manifest.currentVersion,
            manifest.file == file.standardizedFileURL.path,
            manifest.destination == destination.absoluteString,
            manifest.manifest.isUsable(forFileOf: manifest.fileSize)
        else { return nil }
        return manifest
    }

    /// Writes the manifest to `location` atomically, creating its folder.
    func save(to location: URL) throws(UploadError) {
        do {
            try FileManager.default.createDirectory(
                at: location.deletingLastPathComponent(), withIntermediateDirectories: true)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            try encoder.encode(self).write(to: location, options: .atomic)
        } catch {
            throw .writeFailed(location, reason: error.localizedDescription)
        }
    }

    /// Writes the manifest to `location` if the one there names the same
    /// upload (another performance may have replaced it with a newer
    /// upload's, or discarded it).
    func replace(at location: URL) {
        guard Self.read(from: location)?.manifest.handle == manifest.handle else { return }
        // A manifest that cannot be written costs nothing but this note:
        // on resuming, the server's own account of the upload is what
        // counts.
        try? save(to: location)
    }

    /// Removes the manifest at `location` if it names `handle` (another
    /// performance may have replaced it with a newer upload's).
    static func remove(at location: URL, ifItNames handle: Manifest.Handle) {
        guard read(from: location)?.manifest.handle == handle else { return }
        try? FileManager.default.removeItem(at: location)
    }

    /// A job that removes the manifest of `file` going to `destination` in
    /// `folder`, if there is one, then runs `request` with it (a request
    /// that discards the upload on the server, whose answer does not
    /// matter), unless the upload finished: it is then the server's copy of
    /// the file, and kept.
    static func discard(
        in folder: URL,
        file: URL,
        destination: URL,
        with request: @escaping @Sendable (ManifestFile) -> Job<Void>
    ) -> Job<Void> {
        let location = location(in: folder, file: file, destination: destination)
        return Job { controller in
            guard let found = load(from: location, file: file, destination: destination) else {
                controller.finish()
                return
            }
            remove(at: location, ifItNames: found.manifest.handle)
            guard !found.manifest.isFinished else {
                controller.finish()
                return
            }
            controller.perform(request(found).recover { _ in }) { controller.complete(with: $0) }
        }
    }
}
