/// The state of one performance of a sequence, as a state machine: each
/// event changes the state and returns the action to take once the lock
/// is released. ``SequenceRun`` holds it under its lock and acts.
///
/// `Child` is what the sequence holds of the running step, to cancel it: a
/// `JobState` in ``SequenceRun``, anything in the state machine's own tests.
/// The owner passes the next step's child as an autoclosure, evaluated only
/// when the state machine decides that the step starts.
struct SequenceStateMachine<Child: Sendable>: Sendable {
    /// What the owner does after unlocking.
    enum Action: Sendable {
        /// Start step `index` as `child`.
        case startStep(index: Int, child: Child)
        /// Finish the sequence: every step succeeded.
        case finish
        /// Fail the sequence with `error`.
        case fail(any Error)
        /// Cancel the running step.
        case cancelStep(Child)
        /// Nothing.
        case none
    }

    private enum State: Sendable {
        case idle
        /// Step `index` runs as `child`.
        case running(index: Int, child: Child)
        case finished
    }

    let count: Int
    private var state = State.idle

    init(count: Int) {
        self.count = count
    }

    /// The sequence starts; `child` is the first step's, if there is one.
    mutating func start(_ child: @autoclosure () -> Child) -> Action {
        switch state {
        case .idle:
            return startStep(0, child)
        case .finished:
            return .none
        case .running:
            preconditionFailure("Internal inconsistency: a sequence started twice")
        }
    }

    /// The running step succeeded; `next` is the following step's child.
    mutating func stepSucceeded(next: @autoclosure () -> Child) -> Action {
        switch state {
        case .running(let index, _):
            return startStep(index + 1, next)
        case .finished:
            return .none  // cancelled meanwhile
        case .idle:
            preconditionFailure("Internal inconsistency: a step completed before the sequence started")
        }
    }

    /// The running step failed with `error`.
    mutating func stepFailed(_ error: any Error) -> Action {
        switch state {
        case .running:
            state = .finished
            return .fail(error)
        case .finished:
            return .none  // cancelled meanwhile: the step's failure is the cancellation
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
        case .running(_, let child):
            state = .finished
            return .cancelStep(child)
        }
    }

    /// The step the owner was told to start, to run its body now: `nil`
    /// once the sequence is over.
    var currentStep: (index: Int, child: Child)? {
        guard case .running(let index, let child) = state else { return nil }
        return (index, child)
    }

    private mutating func startStep(_ index: Int, _ child: () -> Child) -> Action {
        guard index < count else {
            state = .finished
            return .finish
        }
        let child = child()
        state = .running(index: index, child: child)
        return .startStep(index: index, child: child)
    }
}
