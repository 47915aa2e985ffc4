/// The state of one performance of a sequence, as a state machine: each
/// event changes the state and returns the action to take once the lock
/// is released. ``SequenceRun`` holds it under its lock and acts.
///
/// Besides the running step's ``ChildToken`` (its outcome latch and what
/// it attached), the sequence is the only place the step's state lives:
/// which step runs.
struct SequenceStateMachine: Sendable {
    /// What the owner does after unlocking.
    enum Action: Sendable {
        /// Start step `index`.
        case startStep(index: Int)
        /// Finish the sequence: every step succeeded.
        case finish
        /// Fail the sequence with `error`.
        case fail(any Error)
        /// Cancel what the running step attached: the sequence was
        /// cancelled.
        case cancelStep
        /// Nothing.
        case none
        /// Nothing, and the step's outcome is dropped: the sequence was
        /// over already, so the step had been cancelled.
        case lost
    }

    private enum State: Sendable {
        case idle
        /// Step `index` runs.
        case running(index: Int)
        case finished
    }

    /// The most steps a sequence holds: a step's token keeps its index in
    /// 32 bits.
    static var maxCount: Int { Int(UInt32.max) }

    let count: Int
    private var state = State.idle

    init(count: Int) {
        self.count = count
    }

    /// Whether the sequence is over: finished, failed or cancelled.
    var isOver: Bool {
        if case .finished = state { true } else { false }
    }

    /// The sequence starts.
    mutating func start() -> Action {
        switch state {
        case .idle:
            guard count <= Self.maxCount else {
                state = .finished
                return .fail(JobError.invalidArgument("a sequence holds at most \(Self.maxCount) jobs, got \(count)"))
            }
            return startStep(0)
        case .finished:
            return .none
        case .running:
            preconditionFailure("Internal inconsistency: a sequence started twice")
        }
    }

    /// Step `index`, the running one, completed with `outcome`.
    mutating func stepCompleted(index: Int, outcome: Result<Void, any Error>) -> Action {
        switch state {
        case .running(let running):
            precondition(running == index, "Internal inconsistency: step \(index) completed while \(running) ran")
            switch outcome {
            case .success:
                return startStep(index + 1)
            case .failure(let error):
                state = .finished
                return .fail(error)
            }
        case .finished:
            return .lost  // cancelled meanwhile
        case .idle:
            preconditionFailure("Internal inconsistency: a step completed before the sequence started")
        }
    }

    /// The sequence is cancelled.
    mutating func cancel() -> Action {
        switch state {
        case .idle, .finished:
            state = .finished
            return .none
        case .running:
            state = .finished
            return .cancelStep
        }
    }

    /// The step to run now: `nil` once the sequence is over.
    var currentStep: Int? {
        guard case .running(let index) = state else { return nil }
        return index
    }

    private mutating func startStep(_ index: Int) -> Action {
        guard index < count else {
            state = .finished
            return .finish
        }
        state = .running(index: index)
        return .startStep(index: index)
    }
}
