import Dispatch

/// Where a job runs: something that can run work now or after a delay.
///
/// Every job is performed on a `JobQueue`, and every combinator performs its
/// children on the queue of its own controller, so the queue injected at the
/// top of a tree drives the whole tree. In production that is a
/// `DispatchQueue`; in tests it is `ImmediateQueue` (everything runs at once,
/// synchronously) or `TestQueue` (nothing runs until the test says so, and
/// delays pass in virtual time), both from `JobKitTesting`.
///
/// Conforming types must be safe to call from any thread.
public protocol JobQueue: Sendable {
    /// Schedules `work` to run as soon as possible.
    ///
    /// Implementations must not run `work` recursively without bound: a
    /// queue that runs work inline must queue work enqueued while it is
    /// already running work, so that long chains do not grow the stack.
    func enqueue(_ work: @escaping @Sendable () -> Void)

    /// Schedules `work` to run once `delay` has passed on this queue's clock.
    ///
    /// A zero or negative delay means "as soon as possible".
    func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void)
}

extension DispatchQueue: JobQueue {
    /// Schedules `work` with `async`.
    public func enqueue(_ work: @escaping @Sendable () -> Void) {
        async(execute: work)
    }

    /// Schedules `work` with `asyncAfter`, `delay` from now.
    public func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) {
        asyncAfter(deadline: .now() + delay.dispatchTimeInterval, execute: work)
    }
}

extension Duration {
    /// This duration in whole nanoseconds, clamped to `Int` (negative as 0).
    var clampedNanoseconds: Int {
        let (seconds, attoseconds) = components
        if seconds < 0 || (seconds == 0 && attoseconds <= 0) { return 0 }
        let (secondsInNanos, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        if overflow || seconds > Int64(Int.max) { return Int.max }
        let (total, overflow2) = secondsInNanos.addingReportingOverflow(attoseconds / 1_000_000_000)
        return overflow2 ? Int.max : Int(total)
    }

    var dispatchTimeInterval: DispatchTimeInterval {
        .nanoseconds(clampedNanoseconds)
    }
}
