/// The state of one performance of a sequence, as a state machine: each
/// event changes the state and returns the action to take once the lock
/// is released. ``SequenceRun`` holds it under its lock and acts.
///
/// `Child` is what the sequence holds of the running step, to cancel it: a
/// `JobState` in ``SequenceRun``, anything in the state machine's own tests.
/// The owner passes the next step's child as an autoclosure, evaluated only
/// when the state machine decides that the step starts.
///
/// A step that succeeds before its body returned (synchronously, or from
/// another thread that beat the body's return) does not start the next step
/// itself: the state machine notes it, and the thread running the body
/// starts the next step when the body returns (``bodyReturned(next:)``), so
/// that a run of synchronous steps loops on one thread instead of paying a
/// queue hop per step. A step that succeeds after its body returned starts
/// the next one from its own thread, through the queue.
struct SequenceStateMachine<Child: Sendable>: Sendable {
    /// What the owner does after unlocking.
    enum Action: Sendable {
        /// Start step `index` as `child`: run its body on the queue.
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
        /// Step `index` runs as `child`. `inBody`: its body has not
        /// returned yet; `succeeded`: it succeeded meanwhile, and the
        /// thread running the body starts the next step.
        case running(index: Int, child: Child, inBody: Bool, succeeded: Bool)
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
        case .running(let index, let child, inBody: true, _):
            state = .running(index: index, child: child, inBody: true, succeeded: true)
            return .none  // the thread running the body goes on
        case .running(let index, _, inBody: false, _):
            return startStep(index + 1, next)
        case .finished:
            return .none  // cancelled meanwhile
        case .idle:
            preconditionFailure("Internal inconsistency: a step completed before the sequence started")
        }
    }

    /// The running step's body returned; `next` is the following step's
    /// child, made if the step already succeeded.
    mutating func bodyReturned(next: @autoclosure () -> Child) -> Action {
        switch state {
        case .running(let index, _, inBody: true, succeeded: true):
            return startStep(index + 1, next)
        case .running(let index, let child, inBody: true, succeeded: false):
            state = .running(index: index, child: child, inBody: false, succeeded: false)
            return .none
        case .finished:
            return .none  // failed or cancelled meanwhile
        case .idle, .running(_, _, inBody: false, _):
            preconditionFailure("Internal inconsistency: a step's body returned twice")
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
        case .running(_, let child, _, _):
            state = .finished
            return .cancelStep(child)
        }
    }

    /// The step the owner was told to start, to run its body now: `nil`
    /// once the sequence is over.
    var currentStep: (index: Int, child: Child)? {
        guard case .running(let index, let child, _, _) = state else { return nil }
        return (index, child)
    }

    private mutating func startStep(_ index: Int, _ child: () -> Child) -> Action {
        guard index < count else {
            state = .finished
            return .finish
        }
        let child = child()
        // The body is about to run (now or once the queue gets to it):
        // nothing but the body can make the step succeed before that.
        state = .running(index: index, child: child, inBody: true, succeeded: false)
        return .startStep(index: index, child: child)
    }
}
