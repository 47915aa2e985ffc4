/// The state of one performance of a group, as a state machine: each event
/// changes the state and returns the action to take once the lock is
/// released. It runs nothing itself; ``GroupRun`` holds it under its lock
/// and acts.
///
/// Besides each child's ``ChildToken``, the group is the only place a
/// running child's state lives: which children are running, and for a
/// child that attached something (an `onCancel` block, a grandchild, a
/// name), its attachments, in a side table made on first use.
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
        case finish(Result<[Element], any Error>)
        /// Nothing: the group was cancelled before it started.
        case none
    }

    /// What the owner does after unlocking, when a child completed.
    enum CompletionAction: Sendable {
        /// Nothing: the child's outcome was recorded.
        case none
        /// Hand out one more ticket: the child freed room.
        case enqueueTicket
        /// Report `result` and cancel `cancelling`, the attachments of the
        /// children still running: the group is over.
        case finish(Result<[Element], any Error>, cancelling: [Attachment])
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
        /// The attachments of the running children that made any, by
        /// input index.
        var sideTables: [Int: AttachmentList] = [:]
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
    /// Which children completed while the group ran, by input index (one
    /// bit each); kept once the group is over, so that a child can tell a
    /// cancellation from its own completion.
    private var completed: [UInt64] = []

    init(count: Int, maxConcurrent: Int, failurePolicy: FailurePolicy, collectsValues: Bool) {
        self.count = count
        self.maxConcurrent = maxConcurrent
        self.failurePolicy = failurePolicy
        self.collectsValues = collectsValues
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
                return .finish(.success([]))
            }
            let tickets = Swift.min(maxConcurrent, count)
            state = .running
            running.ticketCount = tickets
            running.activeCount = tickets
            if collectsValues { running.values = Array(repeating: nil, count: count) }
            completed = Array(repeating: 0, count: (count + 63) / 64)
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

    /// The child at `index` completed with `outcome`. Its side table, if
    /// it had one, is returned, to be released after unlocking.
    mutating func childCompleted(
        index: Int,
        outcome: Result<Element, any Error>
    ) -> (action: CompletionAction, detached: AttachmentList?) {
        switch state {
        case .running:
            completed[index / 64] |= 1 << UInt64(index % 64)
            let detached = running.sideTables.isEmpty ? nil : running.sideTables.removeValue(forKey: index)
            running.activeCount -= 1
            running.completedCount += 1
            switch outcome {
            case .success(let value):
                if collectsValues { running.values[index] = value }
            case .failure(let error):
                if failurePolicy == .failFast {
                    let done = finish()
                    return (.finish(.failure(error), cancelling: done.attachments), detached)
                }
                if running.firstError == nil { running.firstError = error }
            }
            if running.completedCount == count {
                let done = finish()
                if let error = done.running.firstError { return (.finish(.failure(error), cancelling: []), detached) }
                let values = collectsValues ? done.running.values.map { $0! } : []
                return (.finish(.success(values), cancelling: []), detached)
            }
            guard running.ticketCount < count && running.activeCount < maxConcurrent else { return (.none, detached) }
            running.ticketCount += 1
            running.activeCount += 1
            return (.enqueueTicket, detached)
        case .finished:
            return (.lost, nil)
        case .idle:
            preconditionFailure("Internal inconsistency: a child completed before the group started")
        }
    }

    /// The group is cancelled: the attachments of the running children, to
    /// cancel. Children not started never start.
    mutating func cancel() -> [Attachment] {
        switch state {
        case .idle:
            state = .finished
            return []
        case .running:
            return finish().attachments
        case .finished:
            return []
        }
    }

    /// Whether the child at `index` completed while the group ran.
    private func hasCompleted(_ index: Int) -> Bool {
        index / 64 < completed.count && completed[index / 64] & (1 << UInt64(index % 64)) != 0
    }

    /// Keeps `attachment` for the running child at `index`, under `key` or
    /// the child's next key.
    mutating func attach(_ attachment: Attachment, toChild index: Int, key: Int?) -> AttachDecision {
        if hasCompleted(index) { return .drop }
        guard case .running = state else { return .cancelNow }
        running.sideTables[index, default: AttachmentList()].append(attachment, key: key)
        return .kept
    }

    /// A key for an attachment of the running child at `index`, to be
    /// attached with it later.
    mutating func reserveKey(forChild index: Int) -> Int {
        guard case .running = state else { return 0 }
        return running.sideTables[index, default: AttachmentList()].reserveKey()
    }

    /// Forgets the attachment `key` of the child at `index`; returned, to
    /// be released after unlocking.
    mutating func detach(_ key: Int, fromChild index: Int) -> Attachment? {
        guard case .running = state else { return nil }
        return running.sideTables[index]?.remove(key)
    }

    /// How far a running group is, and its running children in input
    /// order, each with its attachments; `nil` before it started and once
    /// it is over.
    var progress: (done: Int, running: [(index: Int, attachments: [(key: Int, attachment: Attachment)])])? {
        guard case .running = state else { return nil }
        var children: [(index: Int, attachments: [(key: Int, attachment: Attachment)])] = []
        for index in 0..<running.nextIndex where !hasCompleted(index) {
            children.append((index, running.sideTables[index]?.attachments ?? []))
        }
        return (running.completedCount, children)
    }

    /// Moves to `finished` and hands over the bookkeeping, leaving none,
    /// with the attachments of the children still running.
    private mutating func finish() -> (running: Running, attachments: [Attachment]) {
        state = .finished
        let done = running
        running = Running()
        return (done, done.sideTables.values.flatMap { $0.attachments.map(\.attachment) })
    }
}
