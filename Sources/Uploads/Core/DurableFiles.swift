import Foundation
import JobKit

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// How an outbox's journal puts bytes on disk: a new file written whole and
/// synced to the disk before it is renamed into place. Tests inject one
/// that fails (a full disk) or stops half-way.
package struct DurableFileWriter: Sendable {
    /// Writes `data` to a new file at the URL and syncs it, or throws.
    var writeNewFile: @Sendable (_ data: Data, _ file: URL) throws -> Void
    /// Syncs a folder's entries to the disk, or throws.
    var syncFolder: @Sendable (_ folder: URL) throws -> Void = DurableFiles.syncFolder

    /// The writer of the real file system.
    package static let system = DurableFileWriter { data, file in try DurableFiles.writeNewFile(data, to: file) }

    /// The real file system without its syncs, for tests whose subject is
    /// not the disk: a kill of the process still leaves whole files, only
    /// a power cut could not.
    package static let unsynced = DurableFileWriter(
        writeNewFile: { data, file in try DurableFiles.writeNewFile(data, to: file, syncing: false) },
        syncFolder: { _ in })
}

/// The POSIX calls an atomic, durable replacement of a file needs, which
/// Foundation's `.atomic` write does not make: `fsync` of the file before
/// its rename, and of its folder after.
enum DurableFiles {
    /// A failed system call: what it was doing, and the system's message.
    struct Failure: Error, CustomStringConvertible {
        var description: String

        init(_ doing: String, errno code: Int32 = errno) {
            description = "\(doing): \(String(cString: strerror(code)))"
        }
    }

    /// Creates `file` (which must not exist), writes `data` to it and syncs
    /// it to the disk.
    static func writeNewFile(_ data: Data, to file: URL, syncing: Bool = true) throws {
        let descriptor = open(file.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw Failure("cannot create it") }
        defer { close(descriptor) }
        try data.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw Failure("cannot write it")
                }
                offset += written
            }
        }
        guard !syncing || fsync(descriptor) == 0 else { throw Failure("cannot sync it to the disk") }
    }

    /// Renames `source` over `target`, in one step.
    static func rename(_ source: URL, over target: URL) throws {
        guard Foundation.rename(source.path, target.path) == 0 else { throw Failure("cannot rename it into place") }
    }

    /// Syncs `folder`'s entries to the disk, so that a rename in it
    /// survives a power cut.
    static func syncFolder(_ folder: URL) throws {
        let descriptor = open(folder.path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw Failure("cannot open its folder") }
        defer { close(descriptor) }
        guard fsync(descriptor) == 0 else { throw Failure("cannot sync its folder to the disk") }
    }

    /// An exclusive lock on `file`, created if needed, held until
    /// ``FolderLock/release()`` or the end of the process; `nil` when
    /// another holds it, in this process or in another.
    ///
    /// Between processes it is a POSIX record lock (`fcntl(F_SETLK)`),
    /// which belongs to the process: a child process forked meanwhile (to
    /// run a tool, say) does not inherit it, as it would inherit a `flock`
    /// and keep it until it runs its program. Such locks do not exclude two
    /// holders in one process, so within the process a set of held files
    /// does, and a second holder never opens the file (closing any
    /// descriptor of a file drops the process's record locks on it).
    static func lock(_ file: URL) throws -> FolderLock? {
        let key = file.deletingLastPathComponent().resolvingSymlinksInPath().appendingPathComponent(
            file.lastPathComponent
        ).standardizedFileURL.path
        guard FolderLock.held.withLock({ $0.insert(key).inserted }) else { return nil }
        let descriptor = open(file.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else {
            let failure = Failure("cannot create \(file.lastPathComponent)")
            FolderLock.forget(key)
            throw failure
        }
        var region = flock()
        region.l_type = Int16(F_WRLCK)
        region.l_whence = Int16(SEEK_SET)
        guard fcntl(descriptor, F_SETLK, &region) == 0 else {
            let code = errno
            close(descriptor)
            FolderLock.forget(key)
            if code == EACCES || code == EAGAIN { return nil }
            throw Failure("cannot lock \(file.lastPathComponent)", errno: code)
        }
        return FolderLock(descriptor: descriptor, key: key)
    }
}

/// An open, locked lock file, released when the process ends, killed or
/// not.
final class FolderLock: Sendable {
    /// The lock files this process holds.
    static let held = Lock<Set<String>>([])

    private let descriptor: Int32
    private let key: String
    private let isHeld = Lock(true)

    init(descriptor: Int32, key: String) {
        self.descriptor = descriptor
        self.key = key
    }

    static func forget(_ key: String) {
        _ = held.withLock { $0.remove(key) }
    }

    /// Releases the lock; later calls do nothing.
    func release() {
        let wasHeld = isHeld.withLock { isHeld in
            defer { isHeld = false }
            return isHeld
        }
        guard wasHeld else { return }
        // Closing the file releases its lock.
        close(descriptor)
        Self.forget(key)
    }

    deinit {
        release()
    }
}
