import Synchronization

/// One performance of a group: the storage of its state machine.
///
/// Each event (start, a block claims children, a child completes, cancel)
/// is decided by ``GroupStateMachine`` under the lock and acted on after
/// unlocking: enqueue blocks, start children, cancel what running children
/// attached, report.
///
/// A running child has no state object of its own: its controllers share a
/// ``ChildToken`` (the group, the child's index, its outcome latch, and
/// what it attached, in a table made on first use), and the group keeps
/// the rest. So a child parked on a request in flight costs that token,
/// like the `leave` closure a hand-written `DispatchGroup` loop keeps. The
/// tables children make are kept in ``ChildTables`` too, where the group
/// finds them to cancel and describe its running children, and where a
/// child puts its table without taking the group's lock.
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
final class GroupRun<Element: Sendable>: JobNode, ChildRunning {
    typealias StateMachine = GroupStateMachine<Element>

    /// Whether the group is over (reported or cancelled), for the
    /// children's controllers to read without the lock. Set under the lock,
    /// when the state machine finishes; the state machine decides.
    /// Sequentially consistent, as ``ChildRunning/isOver`` says.
    private let over = Atomic<Bool>(false)
    /// The tables of the running children that attached something, made
    /// when the first does.
    private let tables = LazyReference<ChildTables>()
    let queue: any JobQueue
    /// What the group's job's controllers share, the group's `owner`. Set
    /// in `init`, and taken only in `deinit`, when no other reference to the
    /// run is left: released there through ``Trampoline/releasing(_:)``, as
    /// it holds the run of a group this one may be the child of, a million
    /// deep.
    private nonisolated(unsafe) var owner: ControllerToken?
    /// Reports the group's outcome to its job, through the owner (a
    /// controller the closure makes of it, typed as the job's).
    private let report: @Sendable (ControllerToken, Result<GroupValue<Element>, any Error>) -> Void
    private let lock: Lock<Storage>
    /// The number of children.
    private let count: Int
    /// The most tickets one block takes; set once, before the first block
    /// is enqueued.
    private let blockQuota: Int
    /// Which combinator the group is.
    private let role: GroupRole

    /// The most children a block starts in a row before it hops.
    static var inlineBudget: Int { 64 }
    /// The fewest blocks a group's first children are spread over.
    static var minimumBlocks: Int { 64 }

    init(
        jobs: [Job<Element>],
        maxConcurrent: Int,
        role: GroupRole,
        queue: any JobQueue,
        owner: ControllerToken,
        report: @escaping @Sendable (ControllerToken, Result<GroupValue<Element>, any Error>) -> Void
    ) {
        self.count = jobs.count
        self.queue = queue
        self.owner = owner
        self.report = report
        self.role = role
        precondition(
            !role.boxesValues || Element.self == (any Sendable).self,
            "Internal inconsistency: a \(role) of \(Element.self)")
        let firstChildren = min(max(maxConcurrent, 1), jobs.count)
        self.blockQuota = max(1, min(Self.inlineBudget, firstChildren / Self.minimumBlocks))
        self.lock = Lock(
            Storage(
                machine: StateMachine(
                    count: jobs.count,
                    maxConcurrent: maxConcurrent,
                    goal: role.goal,
                    collectsValues: role.collectsValues
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

        /// Takes the jobs, and the values and errors a group that is over
        /// had collected, out if the group is over, to be released by the
        /// caller after unlocking (a closure's captures, a value or an error
        /// may do anything when they go, even report to this group).
        mutating func jobsToRelease() -> (jobs: [Job<Element>], leftovers: ([Element?], [(any Error)?])) {
            guard machine.isOver else { return ([], ([], [])) }
            defer { jobs = [] }
            return (jobs, machine.takeLeftovers())
        }
    }

    deinit {
        if !Trampoline.releasing({ owner = nil }) { Trampoline.holdRelease { [owner] in _ = owner } }
    }

    /// Reports `result` to the group's job, which may be another group's
    /// child, a million deep (``Trampoline/Level``).
    private func deliver(_ result: Result<GroupValue<Element>, any Error>) {
        let owner = owner.unsafelyUnwrapped
        if let level = Trampoline.Level.enter() {
            report(owner, result)
            level.leave()
        } else {
            Trampoline.hold { [report] in report(owner, result) }
        }
    }

    /// Whether the group is over: its running children count as cancelled.
    var isOver: Bool {
        over.load(ordering: .sequentiallyConsistent)
    }

    /// Starts the group. `attach` hands the run to the group's job, which
    /// cancels it with the job and describes it in its snapshots.
    func start(attach: (any JobNode) -> Void) {
        // No tuple of the action and what to release: in unspecialized
        // code, a tuple's type is looked up at run time, at each start.
        let action = lock.withLock { $0.machine.start() }
        switch action {
        case .none:
            _ = lock.withLock { $0.jobsToRelease() }  // released here, outside the lock
        case .finish(let result):
            _ = lock.withLock { $0.jobsToRelease() }
            deliver(result)
        case .enqueueTickets(let count):
            attach(self)
            switch role {
            case .race:
                // Each child's body starts its work and returns: they start
                // here, one after another, without a queue hop each (later
                // on this thread, if the child is itself a race's, a
                // million deep).
                if let level = Trampoline.Level.enter() {
                    runBlock(quota: count)
                    level.leave()
                } else {
                    Trampoline.hold { [self] in runBlock(quota: count) }
                }
            case .group, .collect, .collectOutcomes, .firstSuccess:
                let blocks = (count + blockQuota - 1) / blockQuota
                for _ in 0..<blocks { enqueueBlock() }
            }
        }
    }

    /// Enqueues a block, for a ticket of the group's start or one a child's
    /// completion freed.
    private func enqueueBlock() {
        // Captures the run alone: no allocation for the closure.
        Trampoline.enqueue({ [self] in runBlock() }, on: queue)
    }

    /// A block runs: starts up to `quota` children here (`blockQuota` by
    /// default; every ticket, for a group started inline), one after
    /// another, and the children that the completions inside these
    /// children's bodies free room for, unless the group is over.
    private func runBlock(quota: Int? = nil) {
        var quota = quota ?? blockQuota
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
                let child = ChildToken(run: self, index: index, boxesValue: role.boxesValues)
                claimed[index].body(Job<Element>.Controller(child))
                if child.bodyReturned() { quota += 1 }
            }
        }
        // The budget is spent: the tickets left go to a block of their own.
        guard quota > 0 else { return }
        if quota <= blockQuota {
            enqueueBlock()
        } else {
            // The tickets of a group started inline: a block takes them all.
            Trampoline.enqueue({ [self, quota] in runBlock(quota: quota) }, on: queue)
        }
    }

    /// The child at `index` completed with `outcome` (its token's latch let
    /// this outcome through).
    func childCompleted(
        _ index: Int, _ outcome: Result<Element, any Error>, hasTable: Bool, inBody: Bool
    ) -> ChildCompletion {
        // Filled under the lock; not returned with the action, as a tuple
        // of them is copied whole, the values it holds retained one by one.
        var table: AttachmentTable?
        var cancelling: [AttachmentTable] = []
        var released: (jobs: [Job<Element>], leftovers: ([Element?], [(any Error)?]))?
        // Released here, outside the lock, after the report.
        defer { withExtendedLifetime(released) {} }
        let action = lock.withLock { storage in
            let action = storage.machine.childCompleted(index: index, outcome: outcome)
            if hasTable { table = tables.existing?.take(at: index) }
            if storage.machine.isOver {
                over.store(true, ordering: .sequentiallyConsistent)
                if case .finish(_, cancelsRunning: true) = action { cancelling = runningTables(storage.machine) }
                released = storage.jobsToRelease()
            }
            return action
        }
        // What the child attached goes with its completion.
        _ = table?.takeAll()
        switch action {
        case .none:
            return .recorded
        case .enqueueTicket:
            return .startsNext
        case .finish(let result, _):
            cancelling.cancelAttachments()
            deliver(result)
            return .recorded
        case .lost:
            return .lost
        }
    }

    /// Takes the tables of the running children out, the group being over.
    /// Call under the lock, after setting ``over``: a child that makes its
    /// table after this sees the group over.
    private func runningTables(_ machine: StateMachine) -> [AttachmentTable] {
        guard let tables = tables.existing else { return [] }
        // A completed child's table is only here if it was made as the
        // child completed: it holds nothing to cancel.
        return tables.takeAll().compactMap { machine.hasCompleted($0.index) ? nil : $0.table }
    }

    /// A ticket that a child freed goes to a block of its own.
    func continueAfterChild() {
        enqueueBlock()
    }

    func install(_ table: AttachmentTable, forChild index: Int) -> Bool {
        tables.made { ChildTables(count: count) }.install(table, at: index)
    }

    func uninstall(_ table: AttachmentTable, forChild index: Int) {
        lock.withLock { _ in tables.existing?.remove(table, at: index) }
    }

    /// Cancels every running child; children not started never start.
    func cancelWithOwner() {
        let (cancelling, released) = lock.withLock { storage in
            let cancelsRunning = storage.machine.cancel()
            over.store(true, ordering: .sequentiallyConsistent)
            return (cancelsRunning ? runningTables(storage.machine) : [], storage.jobsToRelease())
        }
        _ = released  // released here, outside the lock
        cancelling.cancelAttachments()
    }

    /// Says which combinator the job is and how far it is, and adds its
    /// running children.
    func describe(into owner: inout JobSnapshot) {
        let progress = lock.withLock { storage -> (done: Int, running: [AttachmentTable?])? in
            guard let (done, running) = storage.machine.progress else { return nil }
            let tables = tables.existing
            return (done, running.map { tables?.table(at: $0) })
        }
        guard let (done, running) = progress else { return }
        owner.kind =
            switch role {
            case .group, .collect, .collectOutcomes: .group(done: done, running: running.count, count: count)
            case .race: .race(running: running.count, count: count)
            case .firstSuccess: .firstSuccess(failed: done, running: running.count, count: count)
            }
        // Described here, outside the lock the children complete through.
        for table in running {
            owner.children.append(
                SnapshotWalk.child {
                    JobSnapshot(state: .running, entries: table?.entries ?? .init()).collapsingWrapper()
                })
        }
    }
}

/// Which combinator a ``GroupRun`` is: what it waits for, whether it keeps
/// values, how it starts its children, and how it shows in snapshots.
enum GroupRole: Sendable, Equatable {
    /// `group`: every child's success; values dropped.
    case group(FailurePolicy)
    /// `collect`: every child's value, in input order.
    case collect(FailurePolicy)
    /// `collectOutcomes`: every child's outcome.
    case collectOutcomes
    /// `race`: the first outcome. Its children start one after another on
    /// the thread that starts it.
    case race
    /// `firstSuccess`: the first success, or every error.
    case firstSuccess

    var goal: GroupGoal {
        switch self {
        case .group(let policy), .collect(let policy): .everySuccess(policy)
        case .collectOutcomes: .everyOutcome
        case .race: .firstOutcome
        case .firstSuccess: .firstSuccess
        }
    }

    /// Whether the group is one of `any Sendable`, whose children box the
    /// values of their own jobs: a race's boxed run is specialized (a group
    /// of a generic value type runs unspecialized, looking up type
    /// metadata at each step).
    var boxesValues: Bool {
        switch self {
        case .race: true
        case .group, .collect, .collectOutcomes, .firstSuccess: false
        }
    }

    var collectsValues: Bool {
        switch self {
        case .collect, .collectOutcomes: true
        case .group, .race, .firstSuccess: false
        }
    }
}
