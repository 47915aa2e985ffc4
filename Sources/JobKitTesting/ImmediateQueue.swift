import JobKit

/// A queue that runs work at once, on the calling thread: the *immediate*
/// double of a `DispatchQueue`.
///
/// With it, a job tree completes before `perform` returns, so a test can
/// assert right after performing:
///
/// ```swift
/// let outcome = LockedValue<Job<Int>.Outcome?>(nil)
/// job.perform(on: ImmediateQueue()) { outcome.setValue($0) }
/// #expect(try outcome.value?.get() == 42)
/// ```
///
/// Delayed work runs at once too: time collapses to now, so work that
/// schedules itself again after a delay until something happens (a poll, a
/// try after a wait) runs again at once until it does. Use ``TestQueue``
/// to control time instead.
///
/// Work enqueued while the queue is already running work on the same
/// thread is queued, in order, and run right after the current work
/// returns; the outermost call returns only when all of it has run. So a
/// chain of a million steps that complete synchronously runs in a loop,
/// with a flat stack, instead of a million nested calls. It runs work
/// through JobKit's `Trampoline.run(_:)`, which a queue of your own that
/// runs work inline can use too.
public struct ImmediateQueue: JobQueue {
    /// Creates an immediate queue. All immediate queues share, per thread,
    /// the list of work waiting behind the work that is running.
    public init() {}

    /// Runs `work` now, or right after the work running on this thread.
    public func enqueue(_ work: @escaping @Sendable () -> Void) {
        // JobKit's per-thread line: work on this queue and the jobs' own
        // enqueues keep one first-in, first-out order.
        Trampoline.run(work)
    }

    /// Runs `work` now, ignoring `delay`, or right after the work running
    /// on this thread.
    ///
    /// - Returns: A handle that cancels `work` if it is still waiting
    ///   behind the work running on this thread.
    @discardableResult
    public func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork {
        let waiting = LockedValue<(@Sendable () -> Void)?>(work)
        Trampoline.run { waiting.withValue { $0.take() }?() }
        return DelayedWork { _ = waiting.withValue { $0.take() } }
    }
}
