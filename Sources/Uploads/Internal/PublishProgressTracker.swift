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

    init(destinations: [URL], sizes: [Int64], report: @escaping @Sendable (PublishProgress) -> Void) {
        let uploads = zip(destinations, sizes).map {
            PublishProgress.Upload(destination: $0, bytesSent: 0, bytesTotal: $1, isFinished: false)
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
