import Foundation

/// Where a resumable upload keeps what it needs to resume in another
/// process (a multipart upload's ID, a tus upload URL), and how it writes
/// it: one small JSON file per file and destination, replaced atomically
/// (written beside it, then renamed over it), so that a process killed at
/// any moment leaves the previous manifest or the next one, never half of
/// one.
enum ManifestFile {
    /// Where the manifest of `file` going to `destination` lives in
    /// `folder`: `prefix`, then a hash of both, so that each upload has its
    /// own.
    static func location(in folder: URL, prefix: String, file: URL, destination: URL) -> URL {
        // FNV-1a, 64 bits: stable across processes and platforms, unlike
        // `Hasher`, which is seeded per process.
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in (file.standardizedFileURL.path + "\n" + destination.absoluteString).utf8 {
            hash = (hash ^ UInt64(byte)) &* 0x100_0000_01b3
        }
        let name = String(hash, radix: 16)
        return folder.appendingPathComponent("\(prefix)-\(String(repeating: "0", count: 16 - name.count))\(name).json")
    }

    /// Writes `manifest` to `location` atomically, creating its folder.
    static func save(_ manifest: some Encodable, to location: URL) throws(UploadError) {
        do {
            try FileManager.default.createDirectory(
                at: location.deletingLastPathComponent(), withIntermediateDirectories: true)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys]
            try encoder.encode(manifest).write(to: location, options: .atomic)
        } catch {
            throw .writeFailed(location, reason: error.localizedDescription)
        }
    }

    /// The manifest of type `Manifest` at `location`, if one can be read
    /// there.
    static func load<Manifest: Decodable>(_: Manifest.Type, from location: URL) -> Manifest? {
        guard let data = try? Data(contentsOf: location) else { return nil }
        return try? JSONDecoder().decode(Manifest.self, from: data)
    }
}
