import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// An outbox's folder on disk:
///
/// - `posts/`: one record per post, named by the post's idempotency key
///   (`<key>.json`, so a post removed and added again never shares a
///   file with its former self), each replaced atomically: written whole
///   and synced under a temporary name (`.<name>.<uuid>.tmp`), renamed
///   over the old one, the folder synced. A kill at any instant leaves the
///   old record or the new one; a temporary file left by a kill is removed
///   at the next opening.
/// - `media/`: the outbox's copies of photos and videos given as bytes in
///   memory, until their post is published.
/// - `corrupt/`: files of `posts/` that were not records, moved aside.
/// - `hosts.json`: the streak of pushbacks of each host that is turning
///   the outbox away, replaced as a record is; a file older than a day is
///   a backlog long over, and is not read.
/// - `lock`: locked while an outbox has the folder open.
final class OutboxJournal: Sendable {
    let folder: URL
    let records: URL
    let copies: URL
    let corrupt: URL
    /// The hosts' streaks of pushbacks.
    let streaks: URL
    private let lock: FolderLock
    private let writer: DurableFileWriter

    /// Opens `folder`, creating it if needed, and locks it.
    /// - Throws: ``OutboxError/folderNotWritable(_:reason:)``,
    ///   ``OutboxError/alreadyOpen(_:)``.
    init(folder: URL, writer: DurableFileWriter) throws(OutboxError) {
        self.folder = folder
        records = folder.appendingPathComponent("posts", isDirectory: true)
        copies = folder.appendingPathComponent("media", isDirectory: true)
        corrupt = folder.appendingPathComponent("corrupt", isDirectory: true)
        streaks = folder.appendingPathComponent("hosts.json")
        self.writer = writer
        let lock: FolderLock?
        do {
            try FileManager.default.createDirectory(at: records, withIntermediateDirectories: true)
            try FileManager.default.createDirectory(at: copies, withIntermediateDirectories: true)
            lock = try DurableFiles.lock(folder.appendingPathComponent("lock"))
        } catch {
            throw .folderNotWritable(folder, reason: Self.reason(error))
        }
        guard let lock else { throw .alreadyOpen(folder) }
        self.lock = lock
        // A record that could not be written later is caught here, before
        // the app hands the outbox a post.
        let probe = records.appendingPathComponent(".probe.\(UUID().uuidString).tmp")
        defer { try? FileManager.default.removeItem(at: probe) }
        do {
            try writer.writeNewFile(Data(), probe)
        } catch {
            lock.release()
            throw .folderNotWritable(folder, reason: Self.reason(error))
        }
    }

    /// Releases the folder for another outbox.
    func close() {
        lock.release()
    }

    /// Every record, and the `.json` files that were not records, which
    /// are moved to `corrupt/`. Temporary files that a kill left are
    /// removed, and so are copies of media that no record names (a kill
    /// between a post's copies and its record); other files are left
    /// alone.
    func load() -> (records: [OutboxRecord], corrupt: [Outbox.CorruptRecord]) {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: records.path)) ?? []
        var loaded: [OutboxRecord] = []
        var setAside: [Outbox.CorruptRecord] = []
        for name in names.sorted() {
            let file = records.appendingPathComponent(name)
            if name.hasSuffix(".tmp") {
                try? FileManager.default.removeItem(at: file)
                continue
            }
            guard name.hasSuffix(".json"), !name.hasPrefix(".") else { continue }
            do {
                let record = try JSONDecoder().decode(OutboxRecord.self, from: Data(contentsOf: file))
                guard record.version == OutboxRecord.currentVersion else {
                    throw Unreadable(
                        reason: "its format is version \(record.version), not \(OutboxRecord.currentVersion)")
                }
                loaded.append(record.inFolder(copies))
            } catch {
                setAside.append(moveAside(file, reason: Self.reason(error)))
            }
        }
        // A copy is named by its post's key and its index; so is a record
        // (`<key>.json`), in `posts/` or set aside in `corrupt/`, whose
        // copies stay with it.
        let named = Set(loaded.flatMap { $0.media.filter(\.isCopy).map(\.file.lastPathComponent) })
        let inCorrupt = (try? FileManager.default.contentsOfDirectory(atPath: corrupt.path)) ?? []
        for name in (try? FileManager.default.contentsOfDirectory(atPath: copies.path)) ?? []
        where !named.contains(name) {
            let key = name.split(separator: "-").dropLast().joined(separator: "-")
            guard !inCorrupt.contains(where: { $0.hasPrefix(key + ".") || $0.hasPrefix(key + "-") }) else { continue }
            try? FileManager.default.removeItem(at: copies.appendingPathComponent(name))
        }
        return (loaded, setAside)
    }

    /// The hosts' streaks of pushbacks, by host; none when the file is
    /// missing, unreadable, or older than a day (a hold then starts its
    /// streak over). A temporary file that a kill left is removed.
    func loadStreaks() -> [String: OutboxPacer.Streak] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: folder.path)) ?? []
        for name in names where name.hasPrefix(".\(streaks.lastPathComponent).") && name.hasSuffix(".tmp") {
            try? FileManager.default.removeItem(at: folder.appendingPathComponent(name))
        }
        let written = (try? FileManager.default.attributesOfItem(atPath: streaks.path))?[.modificationDate] as? Date
        guard let written, Date().timeIntervalSince(written) < 24 * 3600, let data = try? Data(contentsOf: streaks)
        else { return [:] }
        return (try? JSONDecoder().decode([String: OutboxPacer.Streak].self, from: data)) ?? [:]
    }

    /// Replaces the hosts' streaks of pushbacks, atomically and durably;
    /// removes the file when there are none.
    func save(_ streaks: [String: OutboxPacer.Streak]) throws {
        guard !streaks.isEmpty else {
            if FileManager.default.fileExists(atPath: self.streaks.path) {
                try FileManager.default.removeItem(at: self.streaks)
                try writer.syncFolder(folder)
            }
            return
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        try replace(self.streaks, with: try encoder.encode(streaks))
    }

    /// Where `record` lives.
    func location(of record: OutboxRecord) -> URL {
        records.appendingPathComponent("\(record.idempotencyKey).json")
    }

    /// Replaces the record of `record`'s post, atomically and durably.
    /// - Throws: ``OutboxError/writeFailed(_:reason:)``, with the record
    ///   as it was before left whole.
    func save(_ record: OutboxRecord) throws(OutboxError) {
        let target = location(of: record)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            try replace(target, with: try encoder.encode(record))
        } catch {
            throw .writeFailed(target, reason: Self.reason(error))
        }
    }

    /// Removes `record` and the outbox's copies of its media.
    func remove(_ record: OutboxRecord) {
        try? FileManager.default.removeItem(at: location(of: record))
        try? writer.syncFolder(records)
        removeCopies(of: record)
    }

    /// Keeps `bytes` in a file of the outbox's own for medium `index` of
    /// the post whose key is `key`, written atomically and durably.
    func copy(_ bytes: Data, medium index: Int, key: String) throws(OutboxError) -> URL {
        let target = copies.appendingPathComponent("\(key)-\(index)")
        do {
            try replace(target, with: bytes)
        } catch {
            throw .writeFailed(target, reason: Self.reason(error))
        }
        return target
    }

    /// Removes the outbox's copies among `record`'s media.
    func removeCopies(of record: OutboxRecord) {
        for medium in record.media where medium.isCopy {
            try? FileManager.default.removeItem(at: medium.file)
        }
    }

    /// Writes `data` beside `target`, syncs it, renames it over `target`
    /// and syncs the folder; on failure, removes what it wrote.
    private func replace(_ target: URL, with data: Data) throws {
        let folder = target.deletingLastPathComponent()
        let temporary = folder.appendingPathComponent(".\(target.lastPathComponent).\(UUID().uuidString).tmp")
        do {
            try writer.writeNewFile(data, temporary)
            try DurableFiles.rename(temporary, over: target)
        } catch {
            try? FileManager.default.removeItem(at: temporary)
            throw error
        }
        try writer.syncFolder(folder)
    }

    /// Moves `file` to `corrupt/`, under a name no earlier file there has.
    private func moveAside(_ file: URL, reason: String) -> Outbox.CorruptRecord {
        try? FileManager.default.createDirectory(at: corrupt, withIntermediateDirectories: true)
        var target = corrupt.appendingPathComponent(file.lastPathComponent)
        var copy = 1
        while FileManager.default.fileExists(atPath: target.path) {
            copy += 1
            target = corrupt.appendingPathComponent("\(file.deletingPathExtension().lastPathComponent)-\(copy).json")
        }
        do {
            try FileManager.default.moveItem(at: file, to: target)
        } catch {
            return Outbox.CorruptRecord(file: file, reason: "\(reason); it could not be moved aside")
        }
        return Outbox.CorruptRecord(file: target, reason: reason)
    }

    private struct Unreadable: Error, CustomStringConvertible {
        var reason: String
        var description: String { reason }
    }

    /// What went wrong, in a few words.
    private static func reason(_ error: any Error) -> String {
        switch error {
        case let error as DecodingError:
            switch error {
            case .dataCorrupted(let context) where context.codingPath.isEmpty:
                return "it is not JSON"
            case .keyNotFound(let key, let context):
                return "it has no \(path(context.codingPath + [key]))"
            case .typeMismatch(_, let context), .valueNotFound(_, let context), .dataCorrupted(let context):
                return "its \(path(context.codingPath)) is not valid"
            @unknown default:
                return "it is not a record"
            }
        case let failure as DurableFiles.Failure:
            return failure.description
        case let unreadable as Unreadable:
            return unreadable.reason
        default:
            // Foundation's file errors read "The operation could not be
            // completed" on Linux; the system's reason is underneath.
            let error = error as NSError
            if let underlying = (error.userInfo[NSUnderlyingErrorKey] as? any Error).map({ $0 as NSError }),
                underlying.domain == NSPOSIXErrorDomain
            {
                return String(cString: strerror(Int32(underlying.code)))
            }
            return error.localizedDescription
        }
    }

    /// `"media[2].receipt"`.
    private static func path(_ keys: [any CodingKey]) -> String {
        let path = keys.map { key in key.intValue.map { "[\($0)]" } ?? ".\(key.stringValue)" }.joined()
        return "\"" + path.drop(while: { $0 == "." }) + "\""
    }
}
