import Foundation
import JobKit

/// An uploader that writes each upload to a file below a root folder: the
/// Playground's default, and a stand-in for a server in previews.
///
/// The destination URL's path names the file below the root:
/// `https://example.com/posts/42/beach.jpg` becomes `root/posts/42/beach.jpg`.
/// Folders are created as needed. Each file is written atomically: to a
/// temporary file next to it, renamed into place only when complete, so a
/// reader never sees half a photo and a cancelled or failed upload leaves
/// nothing behind.
///
/// A destination that would land outside the root is refused with
/// ``UploadError/invalidDestination(_:reason:)``: a `..` in its path, or a
/// symbolic link below the root that points out of it.
///
/// Bytes are copied in chunks, one chunk per step on the job's queue, so
/// progress is reported as the file grows and cancellation stops the copy
/// between two chunks. With `bytesPerSecond`, the steps are spaced out to
/// look like a network of that speed (in the queue's time, so a `TestQueue`
/// runs it in virtual time).
public struct DirectoryUploader: Uploader {
    /// The folder uploads are written below.
    public let root: URL
    /// The simulated speed, in bytes per second; as fast as the disk when
    /// `nil`.
    public let bytesPerSecond: Int?
    /// The bytes copied per step.
    public let chunkSize: Int64

    /// Creates an uploader into `root`, which is created if needed.
    /// - Parameters:
    ///   - root: The folder to write into.
    ///   - bytesPerSecond: A simulated speed, at least 1; none by default.
    ///   - chunkSize: The bytes copied per step, at least 1; 256 KiB by
    ///     default.
    /// - Throws: ``InvalidOptionError`` when `bytesPerSecond` or
    ///   `chunkSize` is below 1.
    public init(root: URL, bytesPerSecond: Int? = nil, chunkSize: Int64 = 256 * 1024) throws(InvalidOptionError) {
        if let bytesPerSecond {
            try InvalidOptionError.check(
                bytesPerSecond >= 1, "bytesPerSecond", "must be at least 1, got \(bytesPerSecond)")
        }
        try InvalidOptionError.check(chunkSize >= 1, "chunkSize", "must be at least 1, got \(chunkSize)")
        self.root = root
        self.bytesPerSecond = bytesPerSecond
        self.chunkSize = chunkSize
    }

    /// The file an upload to `destination` is written to.
    /// - Throws: ``UploadError/invalidDestination(_:reason:)`` when it
    ///   would land outside the root.
    public func fileURL(for destination: URL) throws(UploadError) -> URL {
        try resolve(destination, creatingFolders: false)
    }

    /// Checks that `destination` lands below the root, without creating
    /// anything.
    public func validate(destination: URL) throws(UploadError) {
        _ = try resolve(destination, creatingFolders: false)
    }

    /// A job that writes `media` to its file below the root and finishes
    /// with a receipt: status 201 and an `ETag` of the file's size and
    /// modification time.
    public func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
        Job { controller in
            do {
                // The media first: a missing file creates no folder.
                let size = try media.byteCount()
                let copy = try DirectoryCopy(
                    media: media,
                    size: size,
                    target: try resolve(media.destination, creatingFolders: true),
                    chunkSize: chunkSize
                )
                // Cancelling removes the partial file at once, before the
                // cancelled job reports, not at the copy's next step.
                controller.onCancel { copy.cancel() }
                copy.step(controller: controller, pace: bytesPerSecond, progress: progress)
            } catch {
                controller.fail(with: error)
            }
        }
    }

    // MARK: - Paths

    private func resolve(_ destination: URL, creatingFolders: Bool) throws(UploadError) -> URL {
        func refuse(_ reason: String) -> UploadError {
            .invalidDestination(destination, reason: reason)
        }
        let names = destination.path.split(separator: "/").map(String.init).filter { $0 != "." }
        guard let fileName = names.last, !destination.hasDirectoryPath else { throw refuse("it names no file") }
        guard !names.contains("..") else { throw refuse("'..' would leave the root folder") }

        let fileManager = FileManager.default
        if creatingFolders {
            do {
                try fileManager.createDirectory(at: root, withIntermediateDirectories: true)
            } catch {
                throw .writeFailed(root, reason: error.localizedDescription)
            }
        }
        let top = root.resolvingSymlinksInPath()
        var folder = top
        for (position, name) in names.dropLast().enumerated() {
            var next = folder.appendingPathComponent(name)
            var isDirectory: ObjCBool = false
            if let link = try? fileManager.destinationOfSymbolicLink(atPath: next.path),
                !fileManager.fileExists(atPath: next.path)
            {
                // A link to nothing (yet): where it points is what counts,
                // and writing through it would create a folder there.
                let target = URL(fileURLWithPath: link, relativeTo: folder).standardizedFileURL
                    .resolvingSymlinksInPath()
                guard isInside(target, top) else { throw refuse("\(name) links outside the root folder") }
                throw refuse("\(name) is a link to a folder that does not exist")
            }
            if !fileManager.fileExists(atPath: next.path, isDirectory: &isDirectory) {
                guard creatingFolders else {
                    // Nothing below a folder that does not exist yet can
                    // lead out: the rest will be created inside.
                    return names[position...].reduce(folder) { $0.appendingPathComponent($1) }
                }
                do {
                    try fileManager.createDirectory(at: next, withIntermediateDirectories: false)
                } catch  where fileManager.fileExists(atPath: next.path) {
                    // Created meanwhile by a concurrent upload.
                } catch {
                    throw .writeFailed(next, reason: error.localizedDescription)
                }
            }
            next = next.resolvingSymlinksInPath()
            guard isInside(next, top) else { throw refuse("\(name) links outside the root folder") }
            guard fileManager.fileExists(atPath: next.path, isDirectory: &isDirectory), isDirectory.boolValue
            else { throw refuse("\(name) is not a folder") }
            folder = next
        }
        let file = folder.appendingPathComponent(fileName)
        var isDirectory: ObjCBool = false
        if fileManager.fileExists(atPath: file.path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw refuse("\(fileName) is a folder")
        }
        return file
    }

    private func isInside(_ url: URL, _ folder: URL) -> Bool {
        let path = url.standardizedFileURL.path
        let base = folder.standardizedFileURL.path
        return path == base || path.hasPrefix(base.hasSuffix("/") ? base : base + "/")
    }
}
