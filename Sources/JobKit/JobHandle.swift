/// A handle on one performance of a job, returned by
/// ``Job/perform(on:then:)``: it can cancel the job.
///
/// Dropping the handle does not cancel the job.
public struct JobHandle: Sendable {
    let state: any JobCancelling

    init(_ state: any JobCancelling) {
        self.state = state
    }

    /// Cancels the job.
    ///
    /// The job completes at once with `CancellationError` (its handler is
    /// called on its queue), its ``Job/Controller/onCancel(_:)`` blocks run
    /// once, here, its children are cancelled, and anything it reports later
    /// is dropped. If the job had not started, it never starts. Cancelling
    /// a completed job does nothing.
    public func cancel() {
        state.cancel()
    }

    /// Whether the job has completed: finished, failed or cancelled.
    public var isCompleted: Bool {
        state.isCompleted
    }
}
