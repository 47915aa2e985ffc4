import Synchronization

// MARK: - always

extension Job {
    /// A job that performs this job and then runs `cleanup` with its
    /// outcome, whatever the outcome: `defer` for jobs.
    ///
    /// `cleanup` runs exactly once for every performance whose body
    /// started: after a success, a failure, a timeout, or a cancel while it
    /// ran (then with `CancellationError`, as the cancel happens). It runs
    /// before the returned job reports, and does not change the outcome. A
    /// performance cancelled before this job's body had its turn on the
    /// queue started nothing, and runs no cleanup.
    ///
    /// ```swift
    /// let upload = uploading(file).always { _ in try? FileManager.default.removeItem(at: file) }
    /// ```
    ///
    /// A trailing closure that returns a job picks ``always(then:)``, which
    /// performs that job and waits for it.
    ///
    /// - Parameter cleanup: Called once with the outcome, on the thread
    ///   that completes this job (or cancels it).
    public func always(_ cleanup: @escaping @Sendable (Outcome) -> Void) -> Job<Success> {
        Job { controller in
            let gate = StartGate()
            // A child's handler is called once, with its outcome or, when
            // this job is cancelled, with the cancellation.
            controller.token.performChild(gate.guarding(self)) { outcome in
                if gate.started { cleanup(outcome) }
                controller.complete(with: outcome)
            }
        }
    }

    /// A job that performs this job, then the cleanup job `cleanup` builds
    /// from its outcome, whatever the outcome, and reports this job's
    /// outcome once the cleanup job completed.
    ///
    /// For cleanup that takes time: close a session on the server, delete
    /// an upload the server keeps:
    ///
    /// ```swift
    /// let publish = uploadingMedia(post).always(then: { _ in server.closing(session) })
    /// ```
    ///
    /// The cleanup job is performed exactly once for every performance
    /// whose body started, as ``always(_:)``'s closure runs. Its own
    /// outcome does not change the job's: a cleanup that must not fail
    /// silently says so itself (a `recover`, a log). The job shows it in
    /// its snapshots while it runs.
    ///
    /// Cancelling the job completes it at once with `CancellationError`,
    /// as every job does; its cleanup job is still performed to its end,
    /// not cancelled by that cancel.
    ///
    /// A trailing closure that returns a job picks this form:
    /// `job.always { _ in server.closing(session) }` waits for the closing;
    /// one that returns nothing picks ``always(_:)``. The cleanup job may
    /// have a value of any type (`Job<Void>` usually): it is dropped.
    ///
    /// - Parameter cleanup: Builds the cleanup job from the outcome; called
    ///   once, on the thread that completes this job (or cancels it).
    public func always<CleanupValue>(
        then cleanup: @escaping @Sendable (Outcome) -> Job<CleanupValue>
    ) -> Job<Success> {
        Job { controller in
            let gate = StartGate()
            controller.token.performChild(gate.guarding(self)) { outcome in
                guard gate.started else {
                    controller.complete(with: outcome)
                    return
                }
                let cleaning = JobState<CleanupValue>(queue: controller.queue, hopsToQueue: false) { _ in
                    controller.complete(with: outcome)
                }
                // Shown in snapshots, not cancelled with this job.
                controller.token.attach(CleanupNode(cleaning))
                cleaning.start(cleanup(outcome).body)
            }
        }
    }
}

/// Whether the body of the job that `always` cleans up after started:
/// that body and the job's completion (a cancel, before the body's turn
/// on the queue) race for it, and one of them wins.
private final class StartGate: Sendable {
    private enum Phase: UInt8, AtomicRepresentable {
        case waiting, started, closed
    }

    private let phase = Atomic<Phase>(.waiting)

    /// `job`, whose body runs only if the gate opens for it first.
    func guarding<Value>(_ job: Job<Value>) -> Job<Value> {
        Job<Value> { controller in
            let opened = self.phase.compareExchange(
                expected: .waiting, desired: .started, ordering: .acquiringAndReleasing
            ).exchanged
            guard opened else { return }
            job.body(controller)
        }
    }

    /// Whether the body started; once asked, a body that had not started
    /// never does. Ask it once, when the job completed.
    var started: Bool {
        let (closed, original) = phase.compareExchange(
            expected: .waiting, desired: .closed, ordering: .acquiringAndReleasing)
        return !closed && original == .started
    }
}

/// A cleanup job of ``Job/always(then:)``: its job waits for it and shows
/// it in its snapshots, but a cancel of the job does not cancel it.
private final class CleanupNode<Value: Sendable>: JobNode {
    let cleaning: JobState<Value>

    init(_ cleaning: JobState<Value>) {
        self.cleaning = cleaning
    }

    func cancelWithOwner() {}

    func describe(into owner: inout JobSnapshot) {
        cleaning.describe(into: &owner)
    }
}
