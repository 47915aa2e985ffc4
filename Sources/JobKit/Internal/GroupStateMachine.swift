/// The state of one performance of a group, as a state machine: each event
/// changes the state and returns the action to take once the lock is
/// released. It runs nothing itself; ``GroupRun`` holds it under its lock
/// and acts.
///
/// A group starts children through *tickets*: permissions to start the next
/// child in input order, which the owner's work items on the group's queue
/// use (``ticketRan(makeChild:)``). ``start()`` says how many tickets there
/// are at first (up to `maxConcurrent`); each completion that frees room
/// calls for one more. The
/// counting is `DispatchGroup`'s: a ticket enters, a completion leaves, and
/// the group finishes when every child left.
///
/// `Child` is what the group holds of a running child, to cancel it: a
/// `JobState` in ``GroupRun``, anything in the state machine's own tests.
struct GroupStateMachine<Element: Sendable, Child: Sendable>: Sendable {
    /// What the owner does after unlocking, when the group starts.
    enum StartAction: Sendable {
        /// Start this many children (enqueue work that uses the tickets).
        case enqueueTickets(Int)
        /// Report `result`: the group is over before any child started
        /// (no children, a bad argument, or cancelled already).
        case finish(Result<[Element], any Error>)
        /// Nothing: the group was cancelled before it started.
        case none
    }

    /// What the owner does after unlocking, when a child completed.
    enum CompletionAction: Sendable {
        /// Nothing.
        case none
        /// Enqueue one more ticket.
        case enqueueTicket
        /// Report `result` and cancel `cancelling`: the group is over.
        case finish(Result<[Element], any Error>, cancelling: [Child])
    }

    /// The bookkeeping of a running group. It sits beside ``State`` rather
    /// than in a `running` case's payload: taking a payload out to change
    /// it copies its arrays (a retain and a release each, twice per child).
    private struct Running: Sendable {
        /// The input index of the child the next ticket starts.
        var nextIndex = 0
        /// Tickets handed out so far.
        var ticketCount = 0
        /// Tickets handed out whose child has not completed yet.
        var activeCount = 0
        var completedCount = 0
        /// The first error, under ``FailurePolicy/waitForAll``.
        var firstError: (any Error)?
        /// Each child's value, in input order, when the group collects them.
        var values: [Element?] = []
        /// The running children with their input index, each in the slot
        /// the child was told when it started.
        var children = Slots<(index: Int, child: Child)>()
    }

    private enum State: Sendable {
        case idle
        /// Children run; `running` holds the bookkeeping.
        case running
        /// Done: reported, or cancelled. `running` is empty.
        case finished
    }

    let count: Int
    let maxConcurrent: Int
    let failurePolicy: FailurePolicy
    let collectsValues: Bool
    private var state = State.idle
    private var running = Running()

    init(count: Int, maxConcurrent: Int, failurePolicy: FailurePolicy, collectsValues: Bool) {
        self.count = count
        self.maxConcurrent = maxConcurrent
        self.failurePolicy = failurePolicy
        self.collectsValues = collectsValues
    }

    /// The group starts.
    mutating func start() -> StartAction {
        switch state {
        case .idle:
            guard maxConcurrent >= 1 else {
                state = .finished
                return .finish(
                    .failure(JobError.invalidArgument("maxConcurrent must be at least 1, got \(maxConcurrent)"))
                )
            }
            guard count > 0 else {
                state = .finished
                return .finish(.success([]))
            }
            let tickets = Swift.min(maxConcurrent, count)
            state = .running
            running.ticketCount = tickets
            running.activeCount = tickets
            if collectsValues { running.values = Array(repeating: nil, count: count) }
            return .enqueueTickets(tickets)
        case .finished:
            return .none
        case .running:
            preconditionFailure("Internal inconsistency: a group started twice")
        }
    }

    /// A ticket runs: the input index of the child to start and the child
    /// `makeChild` made for the slot it is given, or `nil` if the group is
    /// over or every ticket handed out has started its child.
    mutating func ticketRan(makeChild: (_ slot: Int) -> Child) -> (index: Int, child: Child)? {
        switch state {
        case .running:
            let index = running.nextIndex
            guard index < running.ticketCount else { return nil }
            precondition(index < count, "Internal inconsistency: more tickets than children")
            running.nextIndex += 1
            let child = makeChild(running.children.nextSlot)
            _ = running.children.insert((index, child))
            return (index, child)
        case .finished:
            return nil
        case .idle:
            preconditionFailure("Internal inconsistency: a ticket ran before the group started")
        }
    }

    /// The child in `slot` completed with `outcome`.
    mutating func childCompleted(slot: Int, outcome: Result<Element, any Error>) -> CompletionAction {
        switch state {
        case .running:
            guard let (index, _) = running.children.remove(at: slot) else {
                preconditionFailure("Internal inconsistency: a running child had no slot")
            }
            running.activeCount -= 1
            running.completedCount += 1
            switch outcome {
            case .success(let value):
                if collectsValues { running.values[index] = value }
            case .failure(let error):
                if failurePolicy == .failFast {
                    var done = finish()
                    return .finish(.failure(error), cancelling: done.children.removeAll().map(\.child))
                }
                if running.firstError == nil { running.firstError = error }
            }
            if running.completedCount == count {
                let done = finish()
                if let error = done.firstError { return .finish(.failure(error), cancelling: []) }
                return .finish(.success(collectsValues ? done.values.map { $0! } : []), cancelling: [])
            }
            if running.ticketCount < count && running.activeCount < maxConcurrent {
                running.ticketCount += 1
                running.activeCount += 1
                return .enqueueTicket
            }
            return .none
        case .finished:
            // A child that completed after the group failed fast or was
            // cancelled: nothing is left to do.
            return .none
        case .idle:
            preconditionFailure("Internal inconsistency: a child completed before the group started")
        }
    }

    /// The group is cancelled: the children to cancel. Children not
    /// started never start.
    mutating func cancel() -> [Child] {
        switch state {
        case .idle:
            state = .finished
            return []
        case .running:
            var done = finish()
            return done.children.removeAll().map(\.child)
        case .finished:
            return []
        }
    }

    /// How far a running group is, and its running children with their
    /// input index, in no order; `nil` before it started and once it is
    /// over.
    var progress: (done: Int, running: [(index: Int, child: Child)])? {
        guard case .running = state else { return nil }
        return (running.completedCount, running.children.all)
    }

    /// Moves to `finished` and hands over the bookkeeping, leaving none.
    private mutating func finish() -> Running {
        state = .finished
        defer { running = Running() }
        return running
    }
}
