import Foundation
import JobKit

/// One upload of a ``DirectoryUploader``: copies the media into a temporary
/// file beside its target, a chunk per step, then renames it into place.
///
/// The copy is a small state machine under a lock, and no file I/O happens
/// under it: a step takes the open files out of the lock, reads and writes
/// one chunk, and hands them back. A cancel never waits for a step: between
/// steps it closes the files itself; during one it marks the copy cancelled
/// and removes the partial file, and the step, when it hands the files back,
/// closes them and stops. So a cancelled copy never renames, and the end of
/// the file is only ever a read that returned no bytes.
final class DirectoryCopy: Sendable {
    private struct Files: Sendable {
        /// `nil` when the media's bytes are in memory.
        let reader: FileHandle?
        let writer: FileHandle

        func close() {
            try? reader?.close()
            try? writer.close()
        }
    }

    private enum State: Sendable {
        /// Between two steps: the files, and the bytes copied so far.
        case ready(Files, copied: Int64)
        /// A step has the files.
        case copying(copied: Int64)
        /// Cancelled while a step had the files: the step closes them.
        case cancelledWhileCopying
        /// Renamed into place, failed or cancelled: nothing left to do.
        case finished
    }

    /// What a step does once it handed the files back.
    private enum StepEnd: Sendable {
        /// Report progress and schedule the next step.
        case next(copied: Int64)
        /// Close the files and rename the finished file into place.
        case commit(Files)
        /// Close the files and remove the partial one: the copy failed with
        /// `error`, or was cancelled (`nil`).
        case discard(Files, UploadError?)
    }

    private let media: Media
    private let target: URL
    private let temporary: URL
    private let total: Int64
    private let chunkSize: Int
    private let state: Lock<State>
    /// Called by each step after it copied its chunk, before it hands the
    /// files back: lets a test cancel in between.
    private let afterChunk: (@Sendable () -> Void)?

    /// Opens the media and creates the temporary file.
    init(
        media: Media,
        size: Int64,
        target: URL,
        chunkSize: Int64,
        afterChunk: (@Sendable () -> Void)? = nil
    ) throws(UploadError) {
        self.media = media
        self.target = target
        // A chunk is read into memory: at most what an `Int` counts.
        self.chunkSize = Int(clamping: chunkSize)
        self.afterChunk = afterChunk
        total = size
        temporary = target.deletingLastPathComponent()
            .appendingPathComponent(".\(target.lastPathComponent).upload-\(UUID().uuidString)")

        var reader: FileHandle?
        if case .file(let url) = media.content {
            do {
                reader = try FileHandle(forReadingFrom: url)
            } catch {
                throw .unreadableFile(url, reason: error.localizedDescription)
            }
        }
        guard FileManager.default.createFile(atPath: temporary.path, contents: nil),
            let writer = FileHandle(forWritingAtPath: temporary.path)
        else {
            try? reader?.close()
            throw .writeFailed(temporary, reason: "cannot create the temporary file")
        }
        state = Lock(.ready(Files(reader: reader, writer: writer), copied: 0))
    }

    /// Copies one chunk, reports progress, and either renames the finished
    /// file into place or schedules the next step. A cancelled copy stops
    /// here and leaves nothing behind.
    func step(
        controller: Job<UploadReceipt>.Controller,
        pace bytesPerSecond: Int?,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) {
        let taken = state.withLock { state -> (Files, Int64)? in
            guard case .ready(let files, let copied) = state else { return nil }
            state = .copying(copied: copied)
            return (files, copied)
        }
        guard let (files, copiedBefore) = taken else { return }  // cancelled

        let chunk = Result { () throws(UploadError) in try copyChunk(files, from: copiedBefore) }
        afterChunk?()

        let end = state.withLock { state -> StepEnd in
            switch state {
            case .copying(let copied):
                switch chunk {
                case .failure(let error):
                    state = .finished
                    return .discard(files, error)
                case .success(0):
                    state = .finished
                    return .commit(files)
                case .success(let count):
                    state = .ready(files, copied: copied + Int64(count))
                    return .next(copied: copied + Int64(count))
                }
            case .cancelledWhileCopying:
                state = .finished
                return .discard(files, nil)
            case .ready, .finished:
                preconditionFailure("Internal inconsistency: a copy step ended that had not started")
            }
        }

        switch end {
        case .discard(let files, let error):
            files.close()
            removeTemporaryFile()
            if let error { controller.fail(with: error) }
        case .commit(let files):
            files.close()
            do {
                try commit()
                controller.finish(with: receipt())
            } catch {
                removeTemporaryFile()
                controller.fail(with: error)
            }
        case .next(let copied):
            progress(UploadProgress(bytesSent: min(copied, total), bytesTotal: total))
            let next: @Sendable () -> Void = {
                self.step(controller: controller, pace: bytesPerSecond, progress: progress)
            }
            if let bytesPerSecond {
                let delay = Duration.seconds(Double(copied - copiedBefore) / Double(bytesPerSecond))
                let timer = controller.queue.enqueue(after: delay, next)
                controller.onCancel { timer.cancel() }
            } else {
                controller.queue.enqueue(next)
            }
        }
    }

    /// Copies the chunk after the first `offset` bytes; returns its size,
    /// 0 only when a read returned no bytes (or the bytes in memory ran out).
    private func copyChunk(_ files: Files, from offset: Int64) throws(UploadError) -> Int {
        do {
            let chunk: Data
            if let reader = files.reader {
                chunk = try reader.read(upToCount: chunkSize) ?? Data()
            } else if case .bytes(let data) = media.content {
                let start = data.startIndex + Int(offset)
                chunk = data[start..<min(start + chunkSize, data.endIndex)]
            } else {
                preconditionFailure("Internal inconsistency: media from a file without a reader")
            }
            if !chunk.isEmpty { try files.writer.write(contentsOf: chunk) }
            return chunk.count
        } catch {
            throw .writeFailed(target, reason: error.localizedDescription)
        }
    }

    private func commit() throws(UploadError) {
        guard rename(temporary.path, target.path) == 0 else {
            throw .writeFailed(target, reason: "cannot rename into place: \(String(cString: strerror(errno)))")
        }
    }

    /// What a server would answer: 201 Created, with an `ETag` made of the
    /// file's size and modification time, as web servers make theirs.
    private func receipt() -> UploadReceipt {
        var headers: [String: String] = [:]
        if let attributes = try? FileManager.default.attributesOfItem(atPath: target.path),
            let modified = attributes[.modificationDate] as? Date
        {
            let microseconds = UInt64(max(modified.timeIntervalSince1970 * 1_000_000, 0))
            headers["ETag"] = "\"\(String(microseconds, radix: 16))-\(String(total, radix: 16))\""
        }
        return UploadReceipt(destination: media.destination, status: 201, headers: headers)
    }

    /// Cancels the copy: it never renames, and the partial file is removed
    /// at once. Between steps the files are closed here; during a step the
    /// step closes them when it ends. Never waits for a step.
    func cancel() {
        let files = state.withLock { state -> Files? in
            switch state {
            case .ready(let files, _):
                state = .finished
                return files
            case .copying:
                state = .cancelledWhileCopying
                return nil
            case .cancelledWhileCopying, .finished:
                return nil
            }
        }
        files?.close()
        removeTemporaryFile()
    }

    private func removeTemporaryFile() {
        try? FileManager.default.removeItem(at: temporary)
    }
}
