extension Job {
    /// A job whose performances share one performance of this job, the run,
    /// while it runs: the request de-duplication a screen and its
    /// prefetcher need.
    ///
    /// Jobs are lazy: each performance of a job runs it again. A job that
    /// two parts of an app perform at once is two requests; shared, it is
    /// one:
    ///
    /// ```swift
    /// let profile = loadingProfile(id).shared()
    /// profile.perform(on: .main) { outcome in header.show(outcome) }
    /// // The same request, not a second one:
    /// profile.perform(on: .main) { outcome in badge.show(outcome) }
    /// ```
    ///
    /// - A performance that starts while no run is going on starts one, on
    ///   its own queue; those that start before the run completes join it,
    ///   and complete with its outcome on the thread that completes it.
    ///   Each one's handler is called on its own queue.
    /// - Cancelling a performance cancels that performance only. The run is
    ///   cancelled once every performance that joined it was, and the next
    ///   performance starts a new run.
    /// - The run runs on the queue of the performance that started it,
    ///   with its children and its timers, even once that performance has
    ///   left.
    /// - `keeping` says what a run leaves for the performances that start
    ///   after it completed: by default nothing, and each starts a run of
    ///   its own; with ``KeptOutcome/value``, a value, so that the job runs
    ///   until it first succeeds and then finishes at once with that value,
    ///   as a cache; with ``KeptOutcome/outcome``, a failure too, as a
    ///   promise keeps its result:
    ///
    /// ```swift
    /// let configuration = fetchConfiguration().shared(keeping: .value)
    /// ```
    ///
    /// Each call to `shared` makes a job with runs of its own: share the
    /// job it returns, not the job it was called on.
    ///
    /// A performance shows in snapshots as "shared by 2", with the run as
    /// its child. A snapshot shows a run once: another job that shares it
    /// says so in its detail.
    ///
    /// - Parameter kept: What a run's outcome leaves for later
    ///   performances.
    /// - Returns: A job whose concurrent performances share one run.
    public func shared(keeping kept: KeptOutcome = .nothing) -> Job {
        let share = Share(self, keeping: kept)
        return Job { controller in share.join(controller) }
    }
}

/// What a ``Job/shared(keeping:)`` job keeps of a run's outcome for the
/// performances that start after the run completed.
public enum KeptOutcome: Sendable, Equatable {
    /// Nothing: each performance that starts with no run going on starts
    /// one.
    case nothing
    /// A value: once a run finished, every later performance finishes with
    /// its value at once; after a failure the next performance runs again.
    case value
    /// A value or an error: every later performance completes with the
    /// outcome of the first run that completed, as a promise does. A run
    /// that every performance left (cancelled) is not kept.
    case outcome
}

/// The state of a ``Job/shared(keeping:)`` job: the run going on, with the
/// performances waiting for it, and the outcome kept.
final class Share<Success: Sendable>: Waited {
    typealias Outcome = Result<Success, any Error>
    typealias Controller = Job<Success>.Controller

    private let job: Job<Success>
    private let keeping: KeptOutcome
    private let state = Lock(ShareLockState())
    /// Written once, under `state`'s lock, as `isKept` is set; read under
    /// that lock once it is.
    private nonisolated(unsafe) var kept: Outcome?  // guarded by `state`'s lock

    init(_ job: Job<Success>, keeping: KeptOutcome) {
        self.job = job
        self.keeping = keeping
    }

    /// A performance of the shared job: it completes now with the outcome
    /// kept, or waits for the run going on, or starts one, here, on its
    /// queue.
    func join(_ controller: Controller) {
        var started: JobState<Success>?
        let joined = state.withLock { state -> (number: Int, id: Int)? in
            if state.isKept { return nil }
            if state.run == nil {
                state.runs += 1
                let number = state.runs
                // Made here and started outside the lock. Its outcome comes
                // on the thread that completes it, and goes on from there
                // to each waiter.
                let run = JobState<Success>(queue: controller.queue, hopsToQueue: false) { outcome in
                    self.end(number, with: outcome)
                }
                state.run = ShareRun(number: number, state: run)
                started = run
            }
            return (state.run!.number, state.run!.waiters.add(controller.shared))
        }
        guard let joined else {
            // Kept: written, and no longer changes.
            controller.complete(with: state.withLock { _ in kept! })
            return
        }
        // Attached before the run starts: a run that completes at once
        // finds the performance waiting, and a performance cancelled
        // meanwhile leaves, which cancels the run before it starts.
        controller.token.attach(WaitNode(self, number: joined.number, id: joined.id))
        // This body runs on its queue, which is the run's.
        if let started { started.startHere(job.body, controlledBy: StateToken(started)) }
    }

    /// Run number `number` completed with `outcome`: every performance
    /// waiting for it gets it, here, and the outcome is kept if the share
    /// keeps it. A run that every performance left has been cancelled, and
    /// nothing waits for it.
    private func end(_ number: Int, with outcome: Outcome) {
        let keeps =
            switch (keeping, outcome) {
            case (.value, .success), (.outcome, _): true
            case (.nothing, _), (.value, .failure): false
            }
        // The run goes with the lock released: this may be its last
        // reference.
        let (waiting, run) = state.withLock { state -> ([ControllerToken], ShareRun?) in
            guard state.run?.number == number, var run = state.run.take() else { return ([], nil) }
            if keeps {
                state.isKept = true
                kept = outcome
            }
            return (run.waiters.takeAll(), run)
        }
        _ = run
        for token in waiting { Controller(token).complete(with: outcome) }
    }

    /// The performance numbered `id` that waits for run number `number`
    /// was cancelled: it leaves, and if it was the last, the run is
    /// cancelled.
    func leave(_ id: Int, from number: Int) {
        // What the lock let go of goes with the lock released: the
        // waiter's token, and the run it cancels.
        let (left, cancelling) = state.withLock { state -> (ControllerToken?, (any JobCancelling)?) in
            guard state.run?.number == number else { return (nil, nil) }
            let left = state.run!.waiters.remove(id)
            guard state.run!.waiters.count == 0 else { return (left, nil) }
            return (left, state.run.take()!.state)
        }
        _ = left
        cancelling?.cancel()
    }

    /// How many performances share run number `number`, and the run.
    func describe(_ number: Int, into owner: inout JobSnapshot) {
        let run = state.withLock { state -> (count: Int, state: any JobCancelling)? in
            guard let run = state.run, run.number == number else { return nil }
            return (run.waiters.count, run.state)
        }
        // The run ended: its outcome is on its way to this performance.
        guard let run else {
            owner.kind = .shared(consumers: 1)
            return
        }
        owner.kind = .shared(consumers: run.count)
        if SnapshotWalk.isFirstVisit(to: run.state) {
            owner.children.append(SnapshotWalk.child { run.state.snapshot() })
        } else if owner.detail == nil {
            owner.detail = "its run is shown under another job that shares it"
        }
    }
}

/// One performance of a shared job, and who waits for it. Not generic,
/// as ``Waiters`` is not: the run's state is typed again where it starts.
private struct ShareRun: Sendable {
    let number: Int
    let state: any JobCancelling
    var waiters = Waiters()
}

/// What a shared job's lock protects. Not nested in ``Share``, where it
/// would be generic, and its type looked up on every call.
private struct ShareLockState: Sendable {
    var run: ShareRun?
    var isKept = false
    var runs = 0
}
