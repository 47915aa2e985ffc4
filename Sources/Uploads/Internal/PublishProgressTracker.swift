import Foundation
import JobKit

/// Adds up the progress of a post's uploads and reports it, serially and
/// never backwards, to the caller's closure.
///
/// Uploads report from any thread. Each report updates the state under the
/// lock; the closure is then called outside the lock by one reporter at a
/// time, which delivers the newest state until nothing newer is waiting. So
/// two threads never call the closure at once, and a slow closure only
/// skips intermediate states.
final class PublishProgressTracker: Sendable {
    private struct State: Sendable {
        var progress: PublishProgress
        var undelivered = false
        var isDelivering = false
    }

    private let state: Lock<State>
    private let report: @Sendable (PublishProgress) -> Void

    /// A tracker of uploads to `destinations`, the first ones of the given
    /// `sizes`; the size of any after them is set later, with `setSize`.
    init(destinations: [URL], sizes: [Int64], report: @escaping @Sendable (PublishProgress) -> Void) {
        let uploads = destinations.enumerated().map { index, destination in
            PublishProgress.Upload(
                destination: destination,
                bytesSent: 0,
                bytesTotal: sizes.indices.contains(index) ? sizes[index] : 0,
                isFinished: false
            )
        }
        state = Lock(State(progress: PublishProgress(uploads: uploads)))
        self.report = report
    }

    /// Upload `index` has sent `bytesSent` bytes in its current attempt.
    func update(_ index: Int, bytesSent: Int64) {
        changeAndDeliver { progress in
            var upload = progress.uploads[index]
            guard !upload.isFinished else { return false }
            // The most any attempt sent, short of the total until success.
            let sent = min(max(upload.bytesSent, bytesSent), max(upload.bytesTotal - 1, 0))
            guard sent > upload.bytesSent else { return false }
            upload.bytesSent = sent
            progress.uploads[index] = upload
            return true
        }
    }

    /// Upload `index`, whose size was not known at first, is `size` bytes.
    func setSize(_ index: Int, to size: Int64) {
        changeAndDeliver { progress in
            guard progress.uploads[index].bytesTotal != size else { return false }
            progress.uploads[index].bytesTotal = size
            return true
        }
    }

    /// Upload `index` succeeded.
    func finish(_ index: Int) {
        changeAndDeliver { progress in
            guard !progress.uploads[index].isFinished else { return false }
            progress.uploads[index].bytesSent = progress.uploads[index].bytesTotal
            progress.uploads[index].isFinished = true
            return true
        }
    }

    private func changeAndDeliver(_ change: (inout PublishProgress) -> Bool) {
        let delivers = state.withLock { state -> Bool in
            guard change(&state.progress) else { return false }
            state.progress.fractionCompleted = max(state.progress.fractionCompleted, Self.share(of: state.progress))
            state.undelivered = true
            guard !state.isDelivering else { return false }
            state.isDelivering = true
            return true
        }
        guard delivers else { return }
        while let next = takeUndelivered() {
            report(next)
        }
    }

    /// The bytes sent over the bytes to send, held one byte short of the
    /// whole until every upload succeeded, so a document whose size is not
    /// known yet cannot make it 100%.
    private static func share(of progress: PublishProgress) -> Double {
        if progress.isFinished { return 1 }
        let total = progress.bytesTotal
        guard total > 1 else { return 0 }
        return Double(min(progress.bytesSent, total - 1)) / Double(total)
    }

    private func takeUndelivered() -> PublishProgress? {
        state.withLock { state in
            guard state.undelivered else {
                state.isDelivering = false
                return nil
            }
            state.undelivered = false
            return state.progress
        }
    }
}
