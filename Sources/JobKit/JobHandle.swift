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

    /// The job and the children it waits on, as they are now: names,
    /// states, what each group has done. Safe from any thread while the
    /// job runs, and after it completed.
    public func snapshot() -> JobSnapshot {
        SnapshotWalk.take { state.snapshot() }
    }

    /// Where the job is stuck, if it has not completed: the path to each
    /// job it still waits on, then its tree with those jobs marked; `nil`
    /// once it completed.
    ///
    /// Ask for it when a job should have completed: in a test, once its
    /// `TestQueue` has run until idle; in an app, when a user gives up.
    ///
    /// ```swift
    /// try queue.run()
    /// if let report = handle.stallReport() { Issue.record("\(report)") }
    /// ```
    public func stallReport() -> String? {
        snapshot().stallReport
    }
}
