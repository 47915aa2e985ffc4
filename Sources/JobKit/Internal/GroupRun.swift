import Synchronization

/// One performance of a group: the storage of its state machine.
///
/// Each event (start, a block claims children, a child completes, cancel)
/// is decided by ``GroupStateMachine`` under the lock and acted on after
/// unlocking: enqueue blocks, start children, cancel what running children
/// attached, report.
///
/// A running child has no state object of its own: its controllers share a
/// ``GroupChild`` token (the group, the child's index, its outcome latch),
/// and the group keeps the rest. So a child parked on a request in flight
/// costs that token, like the `leave` closure a hand-written `DispatchGroup`
/// loop keeps.
///
/// Tickets are run by *blocks*: closures that capture the run alone (so the
/// run is their context and they allocate nothing, like the block of a
/// hand-written `DispatchGroup` loop). A block runs on the queue, claims up
/// to ``blockQuota`` children and runs them there, one after another. A
/// large group enqueues one block per 64 children, not one per child, and
/// still at least 64 blocks, so that children run in parallel on a
/// concurrent queue as they would with one block each. A child that
/// completes inside its body and frees room (a bounded group) leaves the
/// next ticket to its block, which runs the next child at once, without a
/// queue hop, for up to ``inlineBudget`` children; then the block hops
/// through the queue.
///
/// There is one code path whatever the queue: blocks are enqueued through
/// ``Trampoline``, so children that complete synchronously never recurse,
/// even on a queue that runs work inline.
///
/// The counting is `DispatchGroup`'s (enter per ticket, leave per
/// completion, notify at zero), kept in this run's lock rather than in a
/// `DispatchGroup` object: `DispatchGroup.notify` can only target a
/// `DispatchQueue`, so with an injected `TestQueue` or `ImmediateQueue` the
/// group would finish on a real thread, after the test had looked, and the
/// lock is needed anyway for the failure policy and the collected values.
final class GroupRun<Element: Sendable>: JobNode {
    private typealias StateMachine = GroupStateMachine<Element>

    /// Whether the group is over (reported or cancelled), for the
    /// children's controllers to read without the lock. Set under the lock,
    /// when the state machine finishes; the state machine decides.
    private let over = Atomic<Bool>(false)
    let queue: any JobQueue
    private let report: @Sendable (Result<[Element], any Error>) -> Void
    private let lock: Lock<Storage>
    /// The number of children.
    private let count: Int
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
        self.count = jobs.count
        self.queue = queue
        self.report = report
        let firstChildren = min(max(maxConcurrent, 1), jobs.count)
        self.blockQuota = max(1, min(Self.inlineBudget, firstChildren / Self.minimumBlocks))
        self.lock = Lock(
            Storage(
                machine: StateMachine(
                    count: jobs.count,
                    maxConcurrent: maxConcurrent,
                    failurePolicy: failurePolicy,
                    collectsValues: collectsValues
                ),
                jobs: jobs
            )
        )
    }

    /// What the lock protects.
    private struct Storage: Sendable {
        var machine: StateMachine
        /// The children's jobs, until the group is over: then they are
        /// released, with what their closures capture, even if a child's
        /// controller (which holds this run) is kept longer.
        var jobs: [Job<Element>]

        /// Takes the jobs out, for the group is over: released by the
        /// caller, after unlocking (a closure's captures may do anything
        /// when they go, even report to this group).
        mutating func takeJobs() -> [Job<Element>] {
            defer { jobs = [] }
            return jobs
        }
    }

    /// Whether the group is over: its running children count as cancelled.
    var isOver: Bool {
        over.load(ordering: .acquiring)
    }

    /// Starts the group. `attach` hands the run to the group's job, which
    /// cancels it with the job and describes it in its snapshots.
    func start(attach: (any JobNode) -> Void) {
        let (action, released) = lock.withLock { storage in
            let action = storage.machine.start()
            return (action, storage.machine.isOver ? storage.takeJobs() : [])
        }
        _ = released  // released here, outside the lock
        switch action {
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

    /// Enqueues a block, for a ticket of the group's start or one a child's
    /// completion freed.
    func enqueueBlock() {
        // Captures the run alone: no allocation for the closure.
        Trampoline.enqueue({ [self] in runBlock() }, on: queue)
    }

    /// A block runs: starts up to `blockQuota` children here, one after
    /// another, and the children that the completions inside these
    /// children's bodies free room for, unless the group is over.
    private func runBlock() {
        var quota = blockQuota
        var budget = Self.inlineBudget
        while budget > 0 && quota > 0 {
            let claimed = lock.withLock { storage in
                storage.jobs[storage.machine.claim(upTo: min(quota, budget))]
            }
            if claimed.isEmpty { return }
            quota -= claimed.count
            budget -= claimed.count
            for index in claimed.indices {
                // Over since the claim: the children left never start.
                if isOver { return }
                let child = GroupChild(run: self, index: index)
                claimed[index].body(Job<Element>.Controller(token: .groupChild(child)))
                if child.bodyReturned() { quota += 1 }
            }
        }
        // The budget is spent: the tickets left go to a block of their own.
        if quota > 0 { enqueueBlock() }
    }

    /// What became of a child's outcome.
    enum Completion {
        /// It was recorded.
        case recorded
        /// It was recorded and freed room for the next child: one more
        /// ticket, for the child's block (if its body has not returned) or
        /// a block of its own.
        case freedRoom
        /// It was dropped: the group was over, so the child had been
        /// cancelled.
        case lost
    }

    /// The child at `index` completed with `outcome` (its token's latch let
    /// this outcome through).
    func childCompleted(_ index: Int, _ outcome: Result<Element, any Error>) -> Completion {
        let (action, detached, released) = lock.withLock { storage in
            let (action, detached) = storage.machine.childCompleted(index: index, outcome: outcome)
            guard case .finish = action else { return (action, detached, []) }
            over.store(true, ordering: .releasing)
            return (action, detached, storage.takeJobs())
        }
        _ = (detached, released)  // released here, outside the lock
        switch action {
        case .none:
            return .recorded
        case .enqueueTicket:
            return .freedRoom
        case .finish(let result, let cancelling):
            for attachment in cancelling { attachment.cancelWithOwner() }
            report(result)
            return .recorded
        case .lost:
            return .lost
        }
    }

    /// Keeps `attachment` for the running child at `index`, or cancels or
    /// drops it as ``GroupStateMachine/attach(_:toChild:key:)`` decides.
    func attach(_ attachment: Attachment, toChild index: Int, key: Int? = nil) {
        let decision = lock.withLock { $0.machine.attach(attachment, toChild: index, key: key) }
        if case .cancelNow = decision { attachment.cancelWithOwner() }
    }

    /// Performs `job` as a child of the group's child at `index`: it is
    /// cancelled with that child and shows in its snapshot.
    func performGrandchild<Grandchild>(
        _ job: Job<Grandchild>,
        of index: Int,
        hopsToQueue: Bool,
        then handler: @escaping @Sendable (Result<Grandchild, any Error>) -> Void
    ) -> JobState<Grandchild> {
        let key = lock.withLock { $0.machine.reserveKey(forChild: index) }
        let grandchild = JobState<Grandchild>(queue: queue, hopsToQueue: hopsToQueue) { [self] outcome in
            let detached = lock.withLock { $0.machine.detach(key, fromChild: index) }
            _ = detached  // released here, outside the lock
            handler(outcome)
        }
        attach(.node(grandchild), toChild: index, key: key)
        grandchild.start(job.body)
        return grandchild
    }

    /// Cancels every running child; children not started never start.
    func cancelWithOwner() {
        let (cancelling, released) = lock.withLock { storage in
            let attachments = storage.machine.cancel()
            over.store(true, ordering: .releasing)
            return (attachments, storage.takeJobs())
        }
        _ = released  // released here, outside the lock
        for attachment in cancelling { attachment.cancelWithOwner() }
    }

    /// Says the job is a group, how far it is, and adds its running
    /// children.
    func describe(into owner: inout JobSnapshot) {
        guard let (done, running) = lock.withLock({ $0.machine.progress }) else { return }
        owner.kind = .group(done: done, running: running.count, count: count)
        // Described here, outside the lock the children complete through.
        for (_, attachments) in running {
            owner.children.append(JobSnapshot(state: .running, attachments: attachments).collapsingWrapper())
        }
    }
}

/// A running child of a group: what its controllers share, and the only
/// state of its own the child has. Its outcome latch is here; the rest (its
/// attachments, whether it completed) is kept by the group.
///
/// The child is cancelled when the group is over: then ``isCancelled`` is
/// `true` and what the child reports is dropped.
///
final class GroupChild<Element: Sendable>: Sendable {
    let run: GroupRun<Element>
    let index: Int
    /// ``ChildPhase``: whether the body runs, and whether an outcome of the
    /// child's own went through.
    private let phase = Atomic<UInt8>(ChildPhase.inBody)

    init(run: GroupRun<Element>, index: Int) {
        self.run = run
        self.index = index
    }

    deinit {
        if !isCompleted { failAbandoned() }
    }

    /// Apart from the deinit, which runs for every child: building a
    /// `Result` looks up type metadata in unspecialized code.
    @inline(never)
    private func failAbandoned() {
        _ = report(.failure(JobError.abandoned))
    }

    /// The block is done with the child's body.
    /// - Returns: `true` if the child completed inside its body and freed
    ///   room: the block takes the next ticket.
    func bodyReturned() -> Bool {
        var (exchanged, current) = phase.compareExchange(
            expected: ChildPhase.inBody, desired: ChildPhase.running, ordering: .acquiringAndReleasing
        )
        if exchanged { return false }
        if current == ChildPhase.reportedInBody {
            // The outcome is still on its way to the group (from another
            // thread): the block leaves, and the completion enqueues a
            // block of its own if it frees room.
            (exchanged, current) = phase.compareExchange(
                expected: ChildPhase.reportedInBody, desired: ChildPhase.reported, ordering: .acquiringAndReleasing
            )
            if exchanged { return false }
        }
        return current == ChildPhase.grantedToBlock
    }

    /// Whether the child was cancelled: the group is over and the child had
    /// not completed.
    var isCancelled: Bool {
        let phase = phase.load(ordering: .acquiring)
        return phase == ChildPhase.cancelled || (phase < ChildPhase.reportedInBody && run.isOver)
    }

    /// Whether the child completed, by any means.
    var isCompleted: Bool {
        phase.load(ordering: .acquiring) >= ChildPhase.reportedInBody || run.isOver
    }

    /// Lets the first outcome through to the group; the room it frees goes
    /// to the child's block if its body has not returned, else to a block
    /// of its own.
    func report(_ outcome: Result<Element, any Error>) -> Bool {
        var current = phase.load(ordering: .relaxed)
        while current < ChildPhase.reportedInBody {
            let inBody = current == ChildPhase.inBody
            let (exchanged, original) = phase.compareExchange(
                expected: current,
                desired: inBody ? ChildPhase.reportedInBody : ChildPhase.reported,
                ordering: .acquiringAndReleasing
            )
            guard exchanged else {
                current = original
                continue
            }
            switch run.childCompleted(index, outcome) {
            case .recorded:
                break
            case .freedRoom:
                let granted =
                    inBody
                    && phase.compareExchange(
                        expected: ChildPhase.reportedInBody,
                        desired: ChildPhase.grantedToBlock,
                        ordering: .acquiringAndReleasing
                    ).exchanged
                if !granted { run.enqueueBlock() }
            case .lost:
                phase.store(ChildPhase.cancelled, ordering: .releasing)
                return false
            }
            return true
        }
        return false
    }

}

/// The values of a ``GroupChild``'s phase; from `reportedInBody` on, the
/// child has completed.
private enum ChildPhase {
    /// The block runs the child's body; no outcome yet.
    static let inBody: UInt8 = 0
    /// The body returned; no outcome yet.
    static let running: UInt8 = 1
    /// An outcome went through the latch while the body ran, and is on its
    /// way to the group.
    static let reportedInBody: UInt8 = 2
    /// That outcome freed room, and the block, still running the body,
    /// takes the next ticket.
    static let grantedToBlock: UInt8 = 3
    /// An outcome went through the latch, and the group has it or will
    /// have it.
    static let reported: UInt8 = 4
    /// An outcome went through the latch after the group was over: it was
    /// dropped, the child had been cancelled.
    static let cancelled: UInt8 = 5
}
