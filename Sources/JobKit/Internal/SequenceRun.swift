/// One performance of a sequence: the storage of its state machine.
///
/// Each event (start, a step succeeded or failed, cancel) is decided by
/// ``SequenceStateMachine`` under the lock and acted on after unlocking.
///
/// There is one code path whatever the queue. A step's completion starts
/// the next step by enqueueing its body, like a hand-written chain where
/// each step `async`s the next, through ``Trampoline``, so a million steps
/// that complete synchronously never recurse, even on a queue that runs
/// work inline.
final class SequenceRun: Sendable {
    private let jobs: [Job<Void>]
    private let controller: Job<Void>.Controller
    private let lock: Lock<SequenceStateMachine<JobState<Void>>>

    init(jobs: [Job<Void>], controller: Job<Void>.Controller) {
        self.jobs = jobs
        self.controller = controller
        self.lock = Lock(SequenceStateMachine(count: jobs.count))
    }

    func start() {
        let action = lock.withLock { $0.start(makeStep()) }
        if case .startStep = action {
            controller.onCancel { [self] in cancel() }
        }
        perform(action)
    }

    /// A step's state, made when the state machine decides to start the
    /// step. (A sequence's events do not contend for the lock: one step runs
    /// at a time.)
    private func makeStep() -> JobState<Void> {
        // Captures the run alone: no allocation for the closure.
        JobState<Void>(queue: controller.queue, hopsToQueue: false) { [self] outcome in
            stepCompleted(outcome)
        }
    }

    private func stepCompleted(_ outcome: Result<Void, any Error>) {
        switch outcome {
        case .success:
            perform(lock.withLock { $0.stepSucceeded(next: makeStep()) })
        case .failure(let error):
            perform(lock.withLock { $0.stepFailed(error) })
        }
    }

    private func cancel() {
        perform(lock.withLock { $0.cancel() })
    }

    private func perform(_ action: SequenceStateMachine<JobState<Void>>.Action) {
        switch action {
        case .startStep(let index, let child):
            child.start(jobs[index].body)
        case .finish:
            controller.finish()
        case .fail(let error):
            controller.fail(with: error)
        case .cancelStep(let child):
            child.cancel()
        case .none:
            break
        }
    }
}
