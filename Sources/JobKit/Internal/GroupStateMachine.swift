/// The state of one performance of a group, as a state machine: each event
/// changes the state and returns the action to take once the lock is
/// released. It runs nothing itself; ``GroupRun`` holds it under its lock
/// and acts.
///
/// A group starts children through *tickets*: work items enqueued on the
/// group's queue, each of which starts the next child in input order when it
/// runs. ``start()`` says how many tickets to enqueue first (up to
/// `maxConcurrent`); each completion that frees room calls for one more. The
/// counting is `DispatchGroup`'s: a ticket enters, a completion leaves, and
/// the group finishes when every child left.
///
/// Tickets are enqueued by one *launcher* loop at a time. A completion that
/// frees room while a launcher runs only counts one more ticket for it
/// (``ticketsEnqueued()`` hands them over), so on a queue that runs work
/// inline, even without queueing what is enqueued meanwhile, children that
/// complete synchronously never make the launcher recurse.
///
/// `Child` is what the group holds of a running child, to cancel it: a
/// `JobState` in ``GroupRun``, anything in the state machine's own tests.
struct GroupStateMachine<Element: Sendable, Child: Sendable>: Sendable {
    /// What the owner does after unlocking, when the group starts.
    enum StartAction: Sendable {
        /// Become the launcher: enqueue this many tickets, then those
        /// ``ticketsEnqueued()`` hands over.
        case launchTickets(Int)
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
        /// Become the launcher: enqueue one ticket, then those
        /// ``ticketsEnqueued()`` hands over.
        case launchTicket
        /// Report `result` and cancel `cancelling`: the group is over.
        case finish(Result<[Element], any Error>, cancelling: [Child])
    }

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
        var values: [Element?]
        /// The running children with their input index, each in the slot
        /// the child was told when it started.
        var children = Slots<(index: Int, child: Child)>()
        /// Whether a launcher loop is enqueueing tickets.
        var isLaunching = true
        /// Tickets counted for the running launcher to enqueue next.
        var pendingTickets = 0
    }

    private enum State: Sendable {
        case idle
        case running(Running)
        case finished
        /// Only while an event changes `running` in place (so its arrays
        /// are not copied); never seen outside an event.
        case modifying
    }

    let count: Int
    let maxConcurrent: Int
    let failurePolicy: FailurePolicy
    let collectsValues: Bool
    private var state = State.idle

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
            state = .running(
                Running(
                    ticketCount: tickets,
                    activeCount: tickets,
                    values: collectsValues ? Array(repeating: nil, count: count) : []
                )
            )
            return .launchTickets(tickets)
        case .finished:
            return .none
        case .running, .modifying:
            preconditionFailure("Internal inconsistency: a group started twice")
        }
    }

    /// A ticket runs: the input index of the child to start and the child
    /// `makeChild` made for the slot it is given, or `nil` if the group is
    /// over.
    mutating func ticketRan(makeChild: (_ slot: Int) -> Child) -> (index: Int, child: Child)? {
        switch state {
        case .running(var running):
            state = .modifying
            let index = running.nextIndex
            precondition(index < count, "Internal inconsistency: more tickets than children")
            running.nextIndex += 1
            let child = makeChild(running.children.nextSlot)
            _ = running.children.insert((index, child))
            state = .running(running)
            return (index, child)
        case .finished:
            return nil
        case .idle, .modifying:
            preconditionFailure("Internal inconsistency: a ticket ran before the group started")
        }
    }

    /// The child in `slot` completed with `outcome`.
    mutating func childCompleted(slot: Int, outcome: Result<Element, any Error>) -> CompletionAction {
        switch state {
        case .running(var running):
            state = .modifying
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
                    state = .finished
                    return .finish(.failure(error), cancelling: running.children.removeAll().map(\.child))
                }
                if running.firstError == nil { running.firstError = error }
            }
            if running.completedCount == count {
                state = .finished
                if let error = running.firstError { return .finish(.failure(error), cancelling: []) }
                return .finish(.success(collectsValues ? running.values.map { $0! } : []), cancelling: [])
            }
            var action = CompletionAction.none
            if running.ticketCount < count && running.activeCount < maxConcurrent {
                running.ticketCount += 1
                running.activeCount += 1
                if running.isLaunching {
                    running.pendingTickets += 1
                } else {
                    running.isLaunching = true
                    action = .launchTicket
                }
            }
            state = .running(running)
            return action
        case .finished:
            // A child that completed after the group failed fast or was
            // cancelled: nothing is left to do.
            return .none
        case .idle, .modifying:
            preconditionFailure("Internal inconsistency: a child completed before the group started")
        }
    }

    /// The launcher enqueued the tickets it was given: the number to
    /// enqueue next. At zero the launcher stops, and the next completion
    /// that frees room starts another.
    mutating func ticketsEnqueued() -> Int {
        switch state {
        case .running(var running):
            state = .modifying
            let tickets = running.pendingTickets
            running.pendingTickets = 0
            if tickets == 0 { running.isLaunching = false }
            state = .running(running)
            return tickets
        case .finished:
            return 0
        case .idle, .modifying:
            preconditionFailure("Internal inconsistency: a launcher ran before the group started")
        }
    }

    /// The group is cancelled: the children to cancel. Children not
    /// started never start.
    mutating func cancel() -> [Child] {
        switch state {
        case .idle:
            state = .finished
            return []
        case .running(var running):
            state = .finished
            return running.children.removeAll().map(\.child)
        case .finished:
            return []
        case .modifying:
            preconditionFailure("Internal inconsistency: a group was cancelled in the middle of an event")
        }
    }
}
