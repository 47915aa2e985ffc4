/// One performance of a group: the storage of its state machine.
///
/// Each event (start, a ticket runs, a child completes, cancel) is decided
/// by ``GroupStateMachine`` under the lock and acted on after unlocking:
/// enqueue tickets, start a child, cancel children, report.
///
/// Tickets are run by *blocks*: closures that capture the run alone (so the
/// run is their context and they allocate nothing, like the block of a
/// hand-written `DispatchGroup` loop). A block runs on the queue, claims up
/// to ``blockQuota`` children and runs them there, one after another; a
/// child's state is made when its block claims it, so a child's
/// bookkeeping exists only from then until it completes. A large group
/// enqueues one block per 64 children, not one per child, and still at
/// least 64 blocks, so that children run in parallel on a concurrent queue
/// as they would with one block each. A child that completes
/// synchronously and frees room (a bounded group) is followed at once by
/// the next child on the same block, without a queue hop, for up to
/// ``inlineBudget`` children; then the block hops through the queue.
///
/// There is one code path whatever the queue: a completion that frees room
/// enqueues a block for the next ticket through ``Trampoline``, so children that
/// complete synchronously never recurse, even on a queue that runs work
/// inline.
///
/// The counting is `DispatchGroup`'s (enter per ticket, leave per
/// completion, notify at zero), kept in this run's lock rather than in a
/// `DispatchGroup` object: `DispatchGroup.notify` can only target a
/// `DispatchQueue`, so with an injected `TestQueue` or `ImmediateQueue` the
/// group would finish on a real thread, after the test had looked, and the
/// lock is needed anyway for the failure policy and the collected values.
final class GroupRun<Element: Sendable>: JobNode {
    private typealias StateMachine = GroupStateMachine<Element, JobState<Element>>

    private let jobs: [Job<Element>]
    private let queue: any JobQueue
    private let report: @Sendable (Result<[Element], any Error>) -> Void
    private let lock: Lock<StateMachine>
    /// The most tickets one block takes; set once, before the first block
    /// is enqueued.
    private let blockQuota: Int

    /// The most children a block starts in a row before it hops.
    static var inlineBudget: Int { 64 }
    /// The fewest blocks a group's first children are spread over.
    static var minimumBlocks: Int { 64 }

    init(
        jobs: [Job<Element>],
        maxConcurrent: Int,
        failurePolicy: FailurePolicy,
        collectsValues: Bool,
        queue: any JobQueue,
        report: @escaping @Sendable (Result<[Element], any Error>) -> Void
    ) {
        self.jobs = jobs
        self.queue = queue
        self.report = report
        let firstChildren = min(max(maxConcurrent, 1), jobs.count)
        self.blockQuota = max(1, min(Self.inlineBudget, firstChildren / Self.minimumBlocks))
        self.lock = Lock(
            StateMachine(
                count: jobs.count,
                maxConcurrent: maxConcurrent,
                failurePolicy: failurePolicy,
                collectsValues: collectsValues
            )
        )
    }

    /// Starts the group. `attach` hands the run to the group's job, which
    /// cancels it with the job and describes it in its snapshots.
    func start(attach: (any JobNode) -> Void) {
        switch lock.withLock({ $0.start() }) {
        case .none:
            break
        case .finish(let result):
            report(result)
        case .enqueueTickets(let count):
            attach(self)
            let blocks = (count + blockQuota - 1) / blockQuota
            for _ in 0..<blocks { enqueueBlock() }
        }
    }

    private func enqueueBlock() {
        // Captures the run alone: no allocation for the closure.
        Trampoline.enqueue({ [self] in runBlock() }, on: queue)
    }

    /// A block runs: starts up to `blockQuota` children here, one after
    /// another, and the children that the synchronous completions of these
    /// free room for, unless the group is over.
    ///
    /// The block claims its children under one lock (their states are made
    /// then, so that cancelling the group reaches them, and a cancelled one
    /// never runs its body), then runs their bodies. A child that completed
    /// before its body returned hands its outcome back
    /// (``JobState/runHoldingOutcome(_:)``) instead of calling the group:
    /// the block reports it, and takes the room it frees itself.
    private func runBlock() {
        var quota = blockQuota
        var budget = Self.inlineBudget
        var claimed: [(index: Int, child: JobState<Element>)] = []
        while budget > 0 && quota > 0 {
            let wanted = min(quota, budget)
            claimed.removeAll(keepingCapacity: true)
            claimed.reserveCapacity(wanted)
            lock.withLock { machine in
                while claimed.count < wanted, let next = machine.ticketRan(makeChild: makeChild) {
                    claimed.append(next)
                }
            }
            if claimed.isEmpty { return }
            quota -= claimed.count
            budget -= claimed.count
            for (index, child) in claimed {
                guard let outcome = child.runHoldingOutcome(jobs[index].body) else { continue }
                var granted = false
                let action = lock.withLock { machine in
                    var action = machine.childCompleted(slot: child.index, outcome: outcome)
                    if case .enqueueTicket = action {
                        // Room for one more: this block takes it.
                        granted = true
                        action = .none
                    }
                    return action
                }
                if granted { quota += 1 }
                perform(action)
            }
        }
        // The budget is spent: the tickets left go to a block of their own.
        if quota > 0 { enqueueBlock() }
    }

    /// A child's state, for the slot it is given.
    private func makeChild(slot: Int) -> JobState<Element> {
        JobState<Element>(queue: queue, index: slot) { [self] slot, outcome in
            childCompleted(slot, outcome)
        }
    }

    private func childCompleted(_ slot: Int, _ outcome: Result<Element, any Error>) {
        perform(lock.withLock { $0.childCompleted(slot: slot, outcome: outcome) })
    }

    private func perform(_ action: StateMachine.CompletionAction) {
        switch action {
        case .none:
            break
        case .enqueueTicket:
            enqueueBlock()
        case .finish(let result, let cancelling):
            for child in cancelling { child.cancel() }
            report(result)
        }
    }

    /// Cancels every running child; children not started never start.
    func cancelWithOwner() {
        for child in lock.withLock({ $0.cancel() }) { child.cancel() }
    }

    /// Says the job is a group, how far it is, and adds its running
    /// children.
    func describe(into owner: inout JobSnapshot) {
        guard let (done, running) = lock.withLock({ $0.progress }) else { return }
        owner.kind = .group(done: done, running: running.count, count: jobs.count)
        // Sorted here, outside the lock the children complete through.
        for (_, child) in running.sorted(by: { $0.index < $1.index }) { child.describe(into: &owner) }
    }
}
