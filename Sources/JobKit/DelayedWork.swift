/// A handle on work scheduled with ``JobQueue/enqueue(after:_:)``: it can
/// cancel the work before it runs.
///
/// Cancelling drops the work and everything it captured, at once, so a
/// timer cannot keep a finished job's state alive until its deadline:
/// ``Job/timeout(after:)`` cancels its timer when the job completes, and
/// ``Job/retry(attempts:delay:while:)`` cancels its wait when the job is
/// cancelled. On a `TestQueue` a cancelled item is no longer pending.
///
/// Cancelling work that already ran, or is running, does nothing; so does
/// cancelling twice.
///
/// A queue of your own returns a handle whose closure cancels the work:
///
/// ```swift
/// @discardableResult
/// func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork {
///     let timer = clock.schedule(after: delay, work)
///     return DelayedWork { timer.invalidate() }
/// }
/// ```
public struct DelayedWork: Sendable {
    private let cancellation: @Sendable () -> Void

    /// Creates a handle that calls `cancellation` when it is cancelled.
    ///
    /// - Parameter cancellation: Cancels the work; called from any thread,
    ///   possibly more than once, so it must be safe to call again.
    public init(cancellation: @escaping @Sendable () -> Void) {
        self.cancellation = cancellation
    }

    /// Cancels the work unless it ran already: it will not run, and the
    /// queue releases it.
    public func cancel() {
        cancellation()
    }
}
