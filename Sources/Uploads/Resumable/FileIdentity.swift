import Foundation

/// The size and modification date of a file, which tell whether it changed
/// since a resumable upload of it began.
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

    /// The identity of `media`'s file now, or for bytes in memory their
    /// size, with no date.
    static func of(_ media: Media) throws(UploadError) -> FileIdentity {
        switch media.content {
        case .file(let file): try of(file)
        case .bytes(let data): FileIdentity(size: Int64(data.count), modified: 0)
        }
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
}
