/// One performance of a sequence: the storage of its state machine.
///
/// Each event (start, a step succeeded or failed, cancel) is decided by
/// ``SequenceStateMachine`` under the lock and acted on after unlocking.
///
/// There is one code path whatever the queue. A step runs on the queue,
/// through ``Trampoline``, like a hand-written chain where each step
/// `async`s the next; but a step that completed by the time its body
/// returned is followed at once, on the same thread, by the next step,
/// without a hop: a run of synchronous steps loops, with a flat stack. So
/// that the sequence does not hold its queue (the main queue, say) for as
/// long as its steps keep completing synchronously, it hops through the
/// queue after ``inlineBudget`` steps in a row, letting other work run.
final class SequenceRun: JobNode {
    /// The most steps run one after another on one thread before the
    /// sequence yields its queue.
    static let inlineBudget = 64

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
            controller.token.attach(self)
        }
        perform(action)
    }

    /// A step's state, made when the state machine decides to start the
    /// step. (A sequence's events do not contend for the lock: one step runs
    /// at a time.)
    private func makeStep() -> JobState<Void> {
        // Captures the run alone: no allocation for the closure.
        JobState<Void>(queue: controller.queue, hopsToQueue: false, runsInLoop: true) { [self] outcome in
            stepCompleted(outcome)
        }
    }

    /// Runs the current step's body here, on the queue, and the steps after
    /// it for as long as each completes before its body returns, at most
    /// ``inlineBudget`` of them; then hops.
    ///
    /// A step that completed before its body returned hands its outcome
    /// back (``JobState/runHoldingOutcome(_:)``) instead of calling the
    /// sequence, so the loop goes on here.
    private func runSteps() {
        guard var (index, child) = lock.withLock({ $0.currentStep }) else { return }
        for _ in 0..<Self.inlineBudget {
            // `nil`: the step completes later, through its handler.
            guard let outcome = child.runHoldingOutcome(jobs[index].body) else { return }
            let action = lock.withLock { machine in
                switch outcome {
                case .success: machine.stepSucceeded(next: makeStep())
                case .failure(let error): machine.stepFailed(error)
                }
            }
            guard case .startStep(let nextIndex, let nextChild) = action else {
                perform(action)
                return
            }
            (index, child) = (nextIndex, nextChild)
        }
        enqueueSteps()
    }

    /// Runs the current step, and those after it, once the queue gets to it.
    private func enqueueSteps() {
        // Captures the run alone: no allocation for the closure.
        Trampoline.enqueue({ [self] in runSteps() }, on: controller.queue)
    }

    private func stepCompleted(_ outcome: Result<Void, any Error>) {
        switch outcome {
        case .success:
            perform(lock.withLock { $0.stepSucceeded(next: makeStep()) })
        case .failure(let error):
            perform(lock.withLock { $0.stepFailed(error) })
        }
    }

    func cancelWithOwner() {
        perform(lock.withLock { $0.cancel() })
    }

    /// Says the job is a sequence, which step it runs, and adds that step.
    func describe(into owner: inout JobSnapshot) {
        guard let (index, child) = lock.withLock({ $0.currentStep }) else { return }
        owner.kind = .sequence(step: index + 1, count: jobs.count)
        child.describe(into: &owner)
    }

    private func perform(_ action: SequenceStateMachine<JobState<Void>>.Action) {
        switch action {
        case .startStep:
            enqueueSteps()
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
