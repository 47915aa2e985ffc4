/// What the group waits for, and so which outcome ends it.
enum GroupGoal: Sendable, Equatable {
    /// Every child's success (`group`, `collect`); a failure does what
    /// the policy says.
    case everySuccess(FailurePolicy)
    /// Every child's outcome (`collectOutcomes`): a failure is recorded
    /// and never ends the group.
    case everyOutcome
    /// The first outcome, success or failure (`race`).
    case firstOutcome
    /// The first success (`firstSuccess`): failures are recorded, and
    /// when every child failed the group fails with all their errors.
    case firstSuccess
}

/// The state of one performance of a group, as a state machine: each event
/// changes the state and returns the action to take once the lock is
/// released. It runs nothing itself; ``GroupRun`` holds it under its lock
/// and acts.
///
/// Besides each child's ``ChildToken`` (its outcome latch and what it
/// attached), the group is the only place a running child's state lives:
/// which children are running and which completed.
///
/// A group starts children through *tickets*: permissions to start the next
/// child in input order, which the owner's work items on the group's queue
/// use (``claim(upTo:)``). ``start()`` says how many tickets there are at
/// first (up to `maxConcurrent`); each completion that frees room calls for
/// one more. The counting is `DispatchGroup`'s: a ticket enters, a
/// completion leaves, and the group finishes when every child left.
struct GroupStateMachine<Element: Sendable>: Sendable {
    /// What the owner does after unlocking, when the group starts.
    enum StartAction: Sendable {
        /// Start this many children (enqueue work that uses the tickets).
        case enqueueTickets(Int)
        /// Report `result`: the group is over before any child started
        /// (no children, a bad argument, or cancelled already).
        case finish(Result<GroupValue<Element>, any Error>)
        /// Nothing: the group was cancelled before it started.
        case none
    }

    /// What the owner does after unlocking, when a child completed.
    enum CompletionAction: Sendable {
        /// Nothing: the child's outcome was recorded.
        case none
        /// Hand out one more ticket: the child freed room.
        case enqueueTicket
        /// Report `result`: the group is over. If `cancelsRunning`, children
        /// still run: cancel what they attached.
        case finish(Result<GroupValue<Element>, any Error>, cancelsRunning: Bool)
        /// Nothing, and the child's outcome is dropped: the group was over
        /// already, so the child had been cancelled.
        case lost
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
        /// Each child's error, in input order, when the group records
        /// failures (``GroupGoal/everyOutcome``, ``GroupGoal/firstSuccess``);
        /// empty until the first failure.
        var errors: [(any Error)?] = []
    }

    private enum State: Sendable {
        case idle
        /// Children run; `running` holds the bookkeeping.
        case running
        /// Done: reported, or cancelled. `running` is empty.
        case finished
    }

    /// The most children a group holds: a child's token keeps its index in
    /// 32 bits.
    static var maxCount: Int { Int(UInt32.max) }

    let count: Int
    let maxConcurrent: Int
    let goal: GroupGoal
    /// Whether the group keeps its children's values (always, for
    /// ``GroupGoal/everyOutcome``).
    let collectsValues: Bool
    private var state = State.idle
    private var running = Running()
    /// Which children completed while the group ran, by input index (one
    /// bit each); kept once the group is over, so that a child can tell a
    /// cancellation from its own completion.
    private var completed = CompletionBits()
    /// See ``takeLeftovers()``.
    private var leftovers: (values: [Element?], errors: [(any Error)?]) = ([], [])

    init(count: Int, maxConcurrent: Int, goal: GroupGoal, collectsValues: Bool) {
        self.count = count
        self.maxConcurrent = maxConcurrent
        self.goal = goal
        self.collectsValues = collectsValues || goal == .everyOutcome
    }

    /// Whether the group is over: reported, or cancelled.
    var isOver: Bool {
        if case .finished = state { true } else { false }
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
                switch goal {
                case .everySuccess: return .finish(.success(.values([])))
                case .everyOutcome: return .finish(.success(.outcomes([])))
                case .firstOutcome:
                    return .finish(.failure(JobError.invalidArgument("race needs at least one job, got none")))
                case .firstSuccess:
                    return .finish(.failure(JobError.invalidArgument("firstSuccess needs at least one job, got none")))
                }
            }
            guard count <= Self.maxCount else {
                state = .finished
                return .finish(
                    .failure(JobError.invalidArgument("a group holds at most \(Self.maxCount) jobs, got \(count)")))
            }
            let tickets = Swift.min(maxConcurrent, count)
            state = .running
            running.ticketCount = tickets
            running.activeCount = tickets
            if collectsValues { running.values = Array(repeating: nil, count: count) }
            completed = CompletionBits(count: count)
            return .enqueueTickets(tickets)
        case .finished:
            return .none
        case .running:
            preconditionFailure("Internal inconsistency: a group started twice")
        }
    }

    /// Tickets run: the input indices of the children to start, at most
    /// `limit` of them; empty if the group is over or every ticket handed
    /// out has started its child.
    mutating func claim(upTo limit: Int) -> Range<Int> {
        switch state {
        case .running:
            let start = running.nextIndex
            let end = start + Swift.max(0, Swift.min(limit, running.ticketCount - start))
            precondition(end <= count, "Internal inconsistency: more tickets than children")
            running.nextIndex = end
            return start..<end
        case .finished:
            return 0..<0
        case .idle:
            preconditionFailure("Internal inconsistency: a ticket ran before the group started")
        }
    }

    /// The child at `index` completed with `outcome`.
    mutating func childCompleted(index: Int, outcome: Result<Element, any Error>) -> CompletionAction {
        switch state {
        case .running:
            completed.insert(index)
            running.activeCount -= 1
            running.completedCount += 1
            switch outcome {
            case .success(let value):
                switch goal {
                case .everySuccess, .everyOutcome:
                    if collectsValues { running.values[index] = value }
                case .firstOutcome, .firstSuccess:
                    let done = finish()
                    return .finish(.success(.winner(value)), cancelsRunning: done.activeCount > 0)
                }
            case .failure(let error):
                switch goal {
                case .everySuccess(.failFast), .firstOutcome:
                    let done = finish()
                    return .finish(.failure(error), cancelsRunning: done.activeCount > 0)
                case .everySuccess(.waitForAll):
                    if running.firstError == nil { running.firstError = error }
                case .everyOutcome, .firstSuccess:
                    // Made on the first failure: most groups have none.
                    if running.errors.isEmpty { running.errors = Array(repeating: nil, count: count) }
                    running.errors[index] = error
                }
            }
            if running.completedCount == count {
                return .finish(finishedResult(of: finish()), cancelsRunning: false)
            }
            guard running.ticketCount < count && running.activeCount < maxConcurrent else { return .none }
            running.ticketCount += 1
            running.activeCount += 1
            return .enqueueTicket
        case .finished:
            return .lost
        case .idle:
            preconditionFailure("Internal inconsistency: a child completed before the group started")
        }
    }

    /// What a group whose every child completed reports.
    private func finishedResult(of done: Running) -> Result<GroupValue<Element>, any Error> {
        switch goal {
        case .everySuccess:
            if let error = done.firstError { return .failure(error) }
            return .success(.values(collectsValues ? done.values.map { $0! } : []))
        case .everyOutcome:
            return .success(
                .outcomes(
                    done.values.indices.map { index in
                        if let error = done.errors.isEmpty ? nil : done.errors[index] {
                            .failure(error)
                        } else {
                            .success(done.values[index]!)
                        }
                    }
                )
            )
        case .firstSuccess:
            return .failure(AllFailedError(errors: done.errors.map { $0! }))
        case .firstOutcome:
            preconditionFailure("Internal inconsistency: a race's children all completed and none won")
        }
    }

    /// The group is cancelled. Children not started never start.
    /// - Returns: `true` if children were running: cancel what they
    ///   attached.
    mutating func cancel() -> Bool {
        switch state {
        case .idle:
            state = .finished
            return false
        case .running:
            return finish().activeCount > 0
        case .finished:
            return false
        }
    }

    /// Whether the child at `index` completed while the group ran.
    func hasCompleted(_ index: Int) -> Bool {
        completed.contains(index)
    }

    /// How far a running group is, and the input indices of its running
    /// children, in order; `nil` before it started and once it is over.
    var progress: (done: Int, running: [Int])? {
        guard case .running = state else { return nil }
        return (running.completedCount, (0..<running.nextIndex).filter { !hasCompleted($0) })
    }

    /// Moves to `finished` and hands over the bookkeeping, leaving none;
    /// the values collected stay in ``leftovers`` until the owner takes
    /// them, to release them after unlocking.
    private mutating func finish() -> Running {
        state = .finished
        defer {
            var errors = running.errors
            // The first error too: a cancelled group drops it, under the lock.
            if let firstError = running.firstError { errors.append(firstError) }
            leftovers = (running.values, errors)
            running = Running()
        }
        return running
    }

    /// The values collected by a group that is over, taken out to be
    /// released after unlocking: they are the user's, and a value's deinit
    /// may do anything, even take a snapshot of this group.
    mutating func takeLeftovers() -> (values: [Element?], errors: [(any Error)?]) {
        defer { leftovers = ([], []) }
        return leftovers
    }
}

/// What a group that succeeded reports, by its goal.
enum GroupValue<Element: Sendable>: Sendable {
    /// Every child succeeded, and the group does not collect their values.
    case values([Element])
    /// Every child completed: their outcomes, in input order.
    case outcomes([Result<Element, any Error>])
    /// The first child to succeed (or to complete, in a race) and its value.
    case winner(Element)

    /// The values of ``values(_:)``.
    var values: [Element] {
        guard case .values(let values) = self else { preconditionFailure("Internal inconsistency: \(self)") }
        return values
    }

    /// The outcomes of ``outcomes(_:)``.
    var outcomes: [Result<Element, any Error>] {
        guard case .outcomes(let outcomes) = self else { preconditionFailure("Internal inconsistency: \(self)") }
        return outcomes
    }

    /// The value of ``winner(_:)``.
    var winner: Element {
        guard case .winner(let value) = self else { preconditionFailure("Internal inconsistency: \(self)") }
        return value
    }
}

/// A set of children's input indices, one bit each: the first 64 in a word
/// of their own, so that a small group (a race) allocates nothing
/// for it.
private struct CompletionBits: Sendable {
    private var first: UInt64 = 0
    /// The bits of indices from 64 on; empty for a group of at most 64.
    private var rest: [UInt64] = []

    init() {}

    /// Room for `count` indices, none in the set.
    init(count: Int) {
        if count > 64 { rest = Array(repeating: 0, count: (count - 1) / 64) }
    }

    mutating func insert(_ index: Int) {
        if index < 64 {
            first |= 1 << UInt64(index)
        } else {
            rest[index / 64 - 1] |= 1 << UInt64(index % 64)
        }
    }

    /// Whether `index` is in the set; `false` for an index beyond its room.
    func contains(_ index: Int) -> Bool {
        if index < 64 { return first & (1 << UInt64(index)) != 0 }
        let word = index / 64 - 1
        return word < rest.count && rest[word] & (1 << UInt64(index % 64)) != 0
    }
}
