import Foundation
import JobKit
import Uploads

/// An uploader that keeps every upload in memory: for tests and previews.
///
/// It records each finished upload in completion order, counts the
/// uploads running at any moment, and can be told to wait (on the job's
/// queue, so a `TestQueue` drives the wait in virtual time) and to fail.
///
/// ```swift
/// let uploader = InMemoryUploader(latency: .seconds(1))
/// uploader.fail(beach.media.destination, with: URLError(.timedOut), times: 1)
/// Job.publishing(post, using: uploader, options: PublishOptions(retry: RetryPolicy(attempts: 2)))
///     .perform(on: queue) { outcome in print(outcome) }
/// try queue.advance(by: .seconds(5))
/// #expect(uploader.uploads.map(\.destination).last == post.destination)
/// ```
///
/// Each attempt reports half of its bytes as sent when it starts, and all
/// of them when it finishes.
public final class InMemoryUploader: Uploader, Sendable {
    /// One finished upload.
    public struct Upload: Sendable, Hashable {
        /// Where it went.
        public var destination: URL
        /// The content type it was sent with.
        public var contentType: String
        /// The bytes received.
        public var bytes: Data
    }

    private struct Fault: Sendable {
        let destination: URL
        let error: any Error
        var remaining: Int
    }

    private struct State: Sendable {
        var uploads: [Upload] = []
        var started: [URL] = []
        var cancelled: [URL] = []
        var running = 0
        var mostRunning = 0
        var faults: [Fault] = []
    }

    /// How long each upload takes, in the job's queue's time.
    public let latency: Duration
    private let state = Lock(State())
    private let receipt: @Sendable (Media, Data) -> UploadReceipt

    /// Creates an uploader whose uploads each take `latency`.
    /// - Parameters:
    ///   - latency: The time per upload; none by default, so uploads finish
    ///     as soon as they start.
    ///   - receipt: What a finished upload answers, from the media and the
    ///     bytes received; by default 201 with an `ETag` of the bytes'
    ///     count and checksum.
    public init(
        latency: Duration = .zero,
        receipt: @escaping @Sendable (Media, Data) -> UploadReceipt = InMemoryUploader.created
    ) {
        self.latency = latency
        self.receipt = receipt
    }

    /// The default receipt: 201 Created, with an `ETag` made of the bytes'
    /// count and a checksum of them.
    public static func created(_ media: Media, _ bytes: Data) -> UploadReceipt {
        let checksum = bytes.reduce(UInt32(0)) { ($0 &* 31) &+ UInt32($1) }
        let etag = "\"\(String(bytes.count, radix: 16))-\(String(checksum, radix: 16))\""
        return UploadReceipt(destination: media.destination, status: 201, headers: ["ETag": etag])
    }

    /// The uploads that finished, in completion order.
    public var uploads: [Upload] { state.withLock { $0.uploads } }

    /// The destination of every attempt that started, in start order,
    /// failed and cancelled ones included.
    public var startedDestinations: [URL] { state.withLock { $0.started } }

    /// The destinations of the attempts that were cancelled while running.
    public var cancelledDestinations: [URL] { state.withLock { $0.cancelled } }

    /// How many uploads are running now.
    public var runningCount: Int { state.withLock { $0.running } }

    /// The most uploads that ran at the same moment.
    public var maxRunningCount: Int { state.withLock { $0.mostRunning } }

    /// Makes the next `times` attempts to upload to `destination` fail
    /// with `error`, after the latency.
    /// - Parameters:
    ///   - destination: The destination to fail.
    ///   - error: The error the attempts fail with.
    ///   - times: How many attempts fail; every one by default.
    public func fail(_ destination: URL, with error: any Error, times: Int = .max) {
        state.withLock { $0.faults.append(Fault(destination: destination, error: error, remaining: times)) }
    }

    /// A job that stores `media` in memory after the latency.
    public func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
        Job { [self] controller in
            let bytes: Data
            do {
                bytes = try Self.read(media)
            } catch {
                controller.fail(with: error)
                return
            }
            let fault = start(media.destination)
            let attempt = Attempt()
            controller.onCancel { [self] in
                if attempt.end() { cancelled(media.destination) }
            }
            let total = Int64(bytes.count)
            progress(UploadProgress(bytesSent: total / 2, bytesTotal: total))
            let finish: @Sendable () -> Void = { [self] in
                guard attempt.end() else { return }
                if let fault {
                    stop()
                    controller.fail(with: fault)
                } else {
                    let upload = Upload(destination: media.destination, contentType: media.contentType, bytes: bytes)
                    stop(recording: upload)
                    progress(UploadProgress(bytesSent: total, bytesTotal: total))
                    controller.finish(with: receipt(media, bytes))
                }
            }
            if latency > .zero {
                let timer = controller.queue.enqueue(after: latency, finish)
                controller.onCancel { timer.cancel() }
            } else {
                finish()
            }
        }
    }

    // MARK: - Bookkeeping

    private static func read(_ media: Media) throws(UploadError) -> Data {
        switch media.content {
        case .bytes(let data):
            return data
        case .file(let url):
            _ = try media.byteCount()
            do {
                return try Data(contentsOf: url)
            } catch {
                throw .unreadableFile(url, reason: error.localizedDescription)
            }
        }
    }

    /// Records a started attempt; returns the error it must fail with, if
    /// any.
    private func start(_ destination: URL) -> (any Error)? {
        state.withLock { state in
            state.started.append(destination)
            state.running += 1
            state.mostRunning = max(state.mostRunning, state.running)
            guard let index = state.faults.firstIndex(where: { $0.destination == destination && $0.remaining > 0 })
            else { return nil }
            state.faults[index].remaining -= 1
            return state.faults[index].error
        }
    }

    private func stop(recording upload: Upload? = nil) {
        state.withLock { state in
            state.running -= 1
            if let upload { state.uploads.append(upload) }
        }
    }

    private func cancelled(_ destination: URL) {
        state.withLock { state in
            state.running -= 1
            state.cancelled.append(destination)
        }
    }
}

/// Whether one attempt has ended, by finishing or by being cancelled:
/// whichever comes first does the bookkeeping.
private final class Attempt: Sendable {
    private let isOver = Lock(false)

    /// Marks the attempt over; `true` for the first caller only.
    func end() -> Bool {
        isOver.withLock { isOver in
            defer { isOver = true }
            return !isOver
        }
    }
}
