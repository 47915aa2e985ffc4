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
    ///   its own queue; those that start before the run completes join it.
    ///   Each gets the run's outcome on its own queue.
    /// - Cancelling a performance cancels that performance only. The run is
    ///   cancelled once every performance that joined it was, and the next
    ///   performance starts a new run.
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
    /// its child.
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
    /// first run's outcome, as a promise does. A run that every
    /// performance left (cancelled) is not kept.
    case outcome
}

/// The state of a ``Job/shared(keeping:)`` job: the run going on, with the
/// performances waiting for it, and the outcome kept.
final class Share<Success: Sendable>: Sendable {
    typealias Outcome = Result<Success, any Error>
    typealias Controller = Job<Success>.Controller

    /// One performance of the shared job, and who waits for it.
    struct Run: Sendable {
        let number: Int
        let state: JobState<Success>
        var waiters = Waiters<Success>()
    }

    private struct State: Sendable {
        var run: Run?
        var kept: Outcome?
        var runs = 0
    }

    private let job: Job<Success>
    private let keeping: KeptOutcome
    private let state = Lock(State())

    init(_ job: Job<Success>, keeping: KeptOutcome) {
        self.job = job
        self.keeping = keeping
    }

    /// A performance of the shared job: it completes now with the outcome
    /// kept, or waits for the run going on, or starts one on its queue.
    func join(_ controller: Controller) {
        let joined = state.withLock { state -> Joined<Success> in
            if let kept = state.kept { return .kept(kept) }
            var starts = false
            if state.run == nil {
                state.runs += 1
                let number = state.runs
                // Made here and started outside the lock; made inline, so
                // that its outcome comes on the thread that completes it
                // and goes on from there, once, to each waiter's queue.
                let run = JobState<Success>(queue: controller.queue, hopsToQueue: false) { outcome in
                    self.end(number, with: outcome)
                }
                state.run = Run(number: number, state: run)
                starts = true
            }
            let id = state.run!.waiters.add(controller)
            return .waiting(run: state.run!.state, number: state.run!.number, id: id, starts: starts)
        }
        switch joined {
        case .kept(let outcome):
            controller.complete(with: outcome)
        case .waiting(let run, let number, let id, let starts):
            // Attached before the run starts: a run that completes at once
            // finds the performance waiting, and a performance cancelled
            // meanwhile leaves, which cancels the run before it starts.
            controller.token.attach(ShareWait(share: self, run: run, number: number, id: id))
            if starts { run.start(job.body, controlledBy: StateToken<Success>(run)) }
        }
    }

    /// Run number `number` completed with `outcome`: every performance
    /// waiting for it gets it, each on its queue, and the outcome is kept
    /// if the share keeps it. A run that every performance left has been
    /// cancelled, and nothing waits for it.
    private func end(_ number: Int, with outcome: Outcome) {
        let waiting = state.withLock { state -> [Controller] in
            guard state.run?.number == number else { return [] }
            defer { state.run = nil }
            switch (keeping, outcome) {
            case (.value, .success), (.outcome, _): state.kept = outcome
            case (.nothing, _), (.value, .failure): break
            }
            return state.run!.waiters.takeAll()
        }
        for controller in waiting { controller.complete(onQueueWith: outcome) }
    }

    /// The performance numbered `id` that waits for run number `number`
    /// was cancelled: it leaves, and if it was the last, the run is
    /// cancelled.
    func leave(_ id: Int, from number: Int) {
        let abandoned = state.withLock { state -> JobState<Success>? in
            guard state.run?.number == number else { return nil }
            state.run!.waiters.remove(id)
            guard state.run!.waiters.count == 0 else { return nil }
            defer { state.run = nil }
            return state.run!.state
        }
        abandoned?.cancel()
    }

    /// How many performances wait for run number `number`.
    func consumers(of number: Int) -> Int {
        state.withLock { $0.run?.number == number ? $0.run!.waiters.count : 0 }
    }
}

/// What a performance of a shared job found as it joined.
private enum Joined<Success: Sendable> {
    /// The outcome a run left: the performance completes with it.
    case kept(Result<Success, any Error>)
    /// Run number `number`, which the performance waits for, numbered
    /// `id`; it starts it if `starts`.
    case waiting(run: JobState<Success>, number: Int, id: Int, starts: Bool)
}

/// A performance waiting for a shared job's run: a cancel makes it leave,
/// and its snapshots show how many share the run, and the run.
private final class ShareWait<Success: Sendable>: JobNode {
    let share: Share<Success>
    let run: JobState<Success>
    let number: Int
    let id: Int

    init(share: Share<Success>, run: JobState<Success>, number: Int, id: Int) {
        self.share = share
        self.run = run
        self.number = number
        self.id = id
    }

    func cancelWithOwner() {
        share.leave(id, from: number)
    }

    func describe(into owner: inout JobSnapshot) {
        // At least this one: the run may have ended, and its outcome be on
        // its way to this performance's queue.
        owner.kind = .shared(consumers: max(share.consumers(of: number), 1))
        run.describe(into: &owner)
    }
}
