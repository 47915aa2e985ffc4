import Foundation
import JobKit

/// One upload of a ``DirectoryUploader``: copies the media into a temporary
/// file beside its target, a chunk per step, then renames it into place.
final class DirectoryCopy: Sendable {
    // FileHandle is not Sendable on every platform; these handles are only
    // touched inside `state.withLock` (the `Lock` below), one step at a time.
    private struct State: @unchecked Sendable {
        var reader: FileHandle?
        var writer: FileHandle?
        var bytesCopied: Int64 = 0
    }

    private let media: Media
    private let target: URL
    private let temporary: URL
    private let total: Int64
    private let chunkSize: Int
    private let state: Lock<State>

    /// Opens the media and creates the temporary file.
    init(media: Media, size: Int64, target: URL, chunkSize: Int) throws(UploadError) {
        self.media = media
        self.target = target
        self.chunkSize = chunkSize
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
            throw .transport("cannot write \(temporary.path)")
        }
        state = Lock(State(reader: reader, writer: writer))
    }

    /// Copies one chunk, reports progress, and either renames the finished
    /// file into place or schedules the next step. A cancelled job stops
    /// here and leaves nothing behind.
    func step(
        controller: Job<Void>.Controller,
        pace bytesPerSecond: Int?,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) {
        guard !controller.isCompleted else {
            discard()
            return
        }
        let copied: Int
        do {
            copied = try copyChunk()
        } catch {
            discard()
            controller.fail(with: error)
            return
        }
        guard copied > 0 else {
            do {
                try commit()
                controller.finish()
            } catch {
                discard()
                controller.fail(with: error)
            }
            return
        }
        let sent = state.withLock { $0.bytesCopied }
        progress(UploadProgress(bytesSent: min(sent, total), bytesTotal: total))
        let next: @Sendable () -> Void = { self.step(controller: controller, pace: bytesPerSecond, progress: progress) }
        if let bytesPerSecond {
            controller.queue.enqueue(after: .seconds(Double(copied) / Double(bytesPerSecond)), next)
        } else {
            controller.queue.enqueue(next)
        }
    }

    /// Copies the next chunk; returns its size, 0 at the end.
    private func copyChunk() throws(UploadError) -> Int {
        do {
            return try state.withLock { state in
                let chunk: Data
                if let reader = state.reader {
                    chunk = try reader.read(upToCount: chunkSize) ?? Data()
                } else if case .bytes(let data) = media.content {
                    let start = data.startIndex + Int(state.bytesCopied)
                    chunk = data[start..<min(start + chunkSize, data.endIndex)]
                } else {
                    chunk = Data()
                }
                if !chunk.isEmpty {
                    try state.writer?.write(contentsOf: chunk)
                    state.bytesCopied += Int64(chunk.count)
                }
                return chunk.count
            }
        } catch {
            throw .transport("cannot copy to \(target.path): \(error.localizedDescription)")
        }
    }

    private func commit() throws(UploadError) {
        closeHandles()
        guard rename(temporary.path, target.path) == 0 else {
            throw .transport("cannot move into \(target.path): \(String(cString: strerror(errno)))")
        }
    }

    /// Closes the files and removes the partial one. Safe to call more
    /// than once, and while a step runs: the step then finds no file.
    func discard() {
        closeHandles()
        try? FileManager.default.removeItem(at: temporary)
    }

    private func closeHandles() {
        state.withLock { state in
            try? state.reader?.close()
            try? state.writer?.close()
            state.reader = nil
            state.writer = nil
        }
    }
}
