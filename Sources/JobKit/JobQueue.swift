import Dispatch

/// Where a job runs: something that can run work now or after a delay.
///
/// Every job is performed on a `JobQueue`, and every combinator performs its
/// children on the queue of its own controller, so the queue injected at the
/// top of a tree drives the whole tree. In production that is a
/// `DispatchQueue` (write `.main` or `.global(qos: .utility)` where a queue
/// is expected); in tests it is `ImmediateQueue` (everything runs at once,
/// synchronously) or `TestQueue` (nothing runs until the test says so, and
/// delays pass in virtual time), both from `JobKitTesting`. The same code
/// paths run on all of them.
///
/// Conforming types must be safe to call from any thread.
public protocol JobQueue: Sendable {
    /// Schedules `work` to run as soon as possible.
    ///
    /// A queue may run `work` before this returns (`ImmediateQueue` does);
    /// it should then queue work enqueued while it is already running work
    /// rather than run it nested, so that long chains do not grow the
    /// stack. (JobKit's combinators stay stack-safe either way.)
    func enqueue(_ work: @escaping @Sendable () -> Void)

    /// Schedules `work` to run once `delay` has passed on this queue's clock.
    ///
    /// A zero or negative delay means "as soon as possible".
    ///
    /// - Returns: A handle that cancels the work: it then never runs, and
    ///   the queue releases it and everything it captured.
    @discardableResult
    func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork
}

// MARK: - DispatchQueue

extension DispatchQueue: JobQueue {
    /// Schedules `work` with `async`.
    public func enqueue(_ work: @escaping @Sendable () -> Void) {
        async(execute: work)
    }

    /// Schedules `work` on a one-shot dispatch timer, `delay` from now.
    ///
    /// Cancelling the returned handle cancels the timer, which releases
    /// `work` at once; `asyncAfter` would keep it until the deadline.
    @discardableResult
    public func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork {
        let timer = DispatchTimer(DispatchSource.makeTimerSource(queue: self))
        timer.source.schedule(deadline: .now() + delay.dispatchTimeInterval)
        timer.source.setEventHandler {
            // One shot: cancelling releases this handler (which holds the
            // timer: the cycle ends here) and the timer.
            timer.source.cancel()
            work()
        }
        timer.source.activate()
        return DelayedWork { timer.source.cancel() }
    }
}

/// A dispatch timer source, to be cancelled from any thread.
///
/// Unchecked: `DispatchSourceTimer` is not declared `Sendable`, but a
/// dispatch source is synchronized by libdispatch itself, and from other
/// threads only `cancel()` is called on it, which libdispatch documents as
/// safe from any thread (and idempotent).
private struct DispatchTimer: @unchecked Sendable {
    let source: any DispatchSourceTimer

    init(_ source: any DispatchSourceTimer) {
        self.source = source
    }
}

// MARK: - Writing queues where a JobQueue is expected

extension JobQueue where Self == DispatchQueue {
    /// The main dispatch queue: `job.perform(on: .main) { ... }`.
    public static var main: DispatchQueue { DispatchQueue.main }

    /// A global concurrent dispatch queue:
    /// `job.perform(on: .global(qos: .utility)) { ... }`.
    ///
    /// - Parameter qos: The quality of service of the queue. Default by
    ///   default.
    public static func global(qos: DispatchQoS.QoSClass = .default) -> DispatchQueue {
        DispatchQueue.global(qos: qos)
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
