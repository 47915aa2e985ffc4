import Synchronization

/// One performance of a sequence: the storage of its state machine.
///
/// Each event (start, a step succeeded or failed, cancel) is decided by
/// ``SequenceStateMachine`` under the lock and acted on after unlocking.
/// A running step has no state object of its own: its controllers share a
/// ``ChildToken`` (the sequence, the step's index, its outcome latch, and
/// what it attached, in a table made on first use), and the sequence keeps
/// the rest, and the step's table, to cancel and describe it.
///
/// There is one code path whatever the queue. A step runs on the queue,
/// through ``Trampoline``, like a hand-written chain where each step
/// `async`s the next; but a step that completed by the time its body
/// returned is followed at once, on the same thread, by the next step,
/// without a hop: a run of synchronous steps loops, with a flat stack. So
/// that the sequence does not hold its queue (the main queue, say) for as
/// long as its steps keep completing synchronously, it hops through the
/// queue after ``inlineBudget`` steps in a row, letting other work run.
final class SequenceRun: JobNode, ChildRunning {
    typealias Element = Void

    /// The most steps run one after another on one thread before the
    /// sequence yields its queue.
    static let inlineBudget = 64

    /// Whether the sequence is over (finished, failed or cancelled), for
    /// the steps' controllers to read without the lock. Set under the lock,
    /// when the state machine finishes; sequentially consistent, as
    /// ``ChildRunning/isOver`` says.
    private let over = Atomic<Bool>(false)
    /// The step that a step's completion outside its body let start, with
    /// its job, for the work that runs it: written under the lock by the
    /// completion, taken by that work, which ``continueAfterChild()``
    /// enqueues after the write. One step runs at a time, so no two of
    /// these overlap.
    private nonisolated(unsafe) var handedStep: (index: Int, job: Job<Void>)?
    /// The last step whose body started, for snapshots ("waiting to start"
    /// or "running"); nothing else reads it.
    private let startedStep = Atomic<Int>(-1)
    /// The steps' attachment table, made when the first step attaches
    /// something. Steps run one at a time, and the sequence takes what the
    /// table holds under its lock as each step completes, so the table
    /// holds the running step's attachments only.
    private let stepTable = LazyReference<AttachmentTable>()
    /// The sequence's job's controller. Set in `init`, and taken only in
    /// `deinit`, when no other reference to the run is left: released there
    /// through ``Trampoline/releasing(_:)``, as it holds the run of a
    /// sequence this one may be a step of, a million deep.
    private nonisolated(unsafe) var heldController: Job<Void>.Controller?
    private var controller: Job<Void>.Controller { heldController.unsafelyUnwrapped }
    let queue: any JobQueue
    private let lock: Lock<Storage>
    /// The number of steps.
    private let count: Int

    init(jobs: [Job<Void>], controller: Job<Void>.Controller) {
        self.heldController = controller
        self.queue = controller.queue
        self.count = jobs.count
        self.lock = Lock(Storage(machine: SequenceStateMachine(count: jobs.count), jobs: jobs))
    }

    /// What the lock protects.
    private struct Storage: Sendable {
        var machine: SequenceStateMachine
        /// The steps' jobs, until the sequence is over: then they are
        /// released, with what their closures capture, even if a step's
        /// controller (which holds this run) is kept longer.
        var jobs: [Job<Void>]

        /// Takes the jobs out if the sequence is over, to be released by
        /// the caller after unlocking (a closure's captures may do anything
        /// when they go, even report to this sequence).
        mutating func jobsToRelease() -> [Job<Void>] {
            guard machine.isOver else { return [] }
            defer { jobs = [] }
            return jobs
        }
    }

    deinit {
        if !Trampoline.releasing({ heldController = nil }) {
            Trampoline.holdRelease { [heldController] in _ = heldController }
        }
    }

    var isOver: Bool {
        over.load(ordering: .sequentiallyConsistent)
    }

    func start() {
        let (action, released) = lock.withLock { storage in
            (storage.machine.start(), storage.jobsToRelease())
        }
        _ = released  // released here, outside the lock
        if case .startStep = action {
            controller.token.attach(self)
        }
        perform(action)
    }

    /// Runs the current step's body here, on the queue, and the steps after
    /// it for as long as each completes before its body returns, at most
    /// ``inlineBudget`` of them; then hops.
    private func runSteps() {
        var budget = Self.inlineBudget
        // A step that a completion from another thread let start comes
        // with its job: no lock to take for it.
        if let (index, job) = handedStep.take() {
            if isOver { return }
            guard runStep(job, at: index) else { return }
            budget -= 1
        }
        // The steps from the current one on: a slice, which keeps them while
        // this loop runs even if the sequence is over and lets them go.
        guard
            let (first, jobs) = lock.withLock({ storage in
                storage.machine.currentStep.map { ($0, storage.jobs[$0...]) }
            })
        else { return }
        var index = first
        while budget > 0 {
            if isOver { return }
            guard runStep(jobs[index], at: index) else { return }
            index += 1
            budget -= 1
        }
        enqueueSteps()
    }

    /// Runs step `index`'s body, `job`'s, here.
    /// - Returns: `true` if the step completed inside its body, and this
    ///   thread goes on with the next; `false` if its completion goes on.
    private func runStep(_ job: Job<Void>, at index: Int) -> Bool {
        let step = ChildToken(run: self, index: index)
        startedStep.store(index, ordering: .relaxed)
        job.body(Job<Void>.Controller(step))
        return step.bodyReturned()
    }

    /// Runs the current step, and those after it, once the queue gets to it.
    private func enqueueSteps() {
        // Captures the run alone: no allocation for the closure.
        Trampoline.enqueue({ [self] in runSteps() }, on: queue)
    }

    func childCompleted(_ index: Int, _ outcome: Result<Void, any Error>, hasTable: Bool, inBody: Bool)
        -> ChildCompletion
    {
        let (action, detached, released) = lock.withLock { storage in
            let action = storage.machine.stepCompleted(index: index, outcome: outcome)
            // Outside its body, the step's completion goes on itself
            // (``continueAfterChild()``): it hands the next step over.
            if !inBody, case .startStep(let next) = action { handedStep = (next, storage.jobs[next]) }
            if storage.machine.isOver { over.store(true, ordering: .sequentiallyConsistent) }
            // What the step attached goes with its completion (or was
            // cancelled with the sequence, if its outcome is lost).
            let detached = hasTable ? stepTable.existing?.takeAll() : nil
            return (action, detached, storage.jobsToRelease())
        }
        _ = (detached, released)  // released here, outside the lock
        switch action {
        case .startStep:
            return .startsNext
        case .lost:
            return .lost
        default:
            perform(action)
            return .recorded
        }
    }

    /// The next step runs on the queue: the thread that ran the last one
    /// has left it.
    func continueAfterChild() {
        enqueueSteps()
    }

    func makeTable(forChild index: Int) -> AttachmentTable {
        stepTable.made { AttachmentTable() }
    }

    /// The table is the sequence's own: nothing to keep.
    func install(_ table: AttachmentTable, forChild index: Int) -> Bool {
        false
    }

    func uninstall(_ table: AttachmentTable, forChild index: Int) {}

    func cancelWithOwner() {
        let (cancelling, released) = lock.withLock { storage in
            let action = storage.machine.cancel()
            over.store(true, ordering: .sequentiallyConsistent)
            var cancelling = AttachmentEntries()
            if case .cancelStep = action { cancelling = stepTable.existing?.takeAll() ?? AttachmentEntries() }
            return (cancelling, storage.jobsToRelease())
        }
        _ = released  // released here, outside the lock
        for (_, attachment) in cancelling { attachment.cancelWithOwner() }
    }

    /// Says the job is a sequence, which step it runs, and adds that step.
    func describe(into owner: inout JobSnapshot) {
        let progress = lock.withLock { storage in
            storage.machine.currentStep.map { ($0, stepTable.existing?.entries ?? .init()) }
        }
        guard let (index, entries) = progress else { return }
        owner.kind = .sequence(step: index + 1, count: count)
        let state: JobSnapshot.State = startedStep.load(ordering: .relaxed) >= index ? .running : .waitingToStart
        // Described here, outside the lock the step completes through.
        owner.children.append(SnapshotWalk.child { JobSnapshot(state: state, entries: entries).collapsingWrapper() })
    }

    /// Reports `outcome` to the sequence's job, which may be another
    /// sequence's step, a million deep (``Trampoline/Level``).
    private func report(_ outcome: Result<Void, any Error>) {
        let controller = controller
        if let level = Trampoline.Level.enter() {
            controller.complete(with: outcome)
            level.leave()
        } else {
            Trampoline.hold { controller.complete(with: outcome) }
        }
    }

    private func perform(_ action: SequenceStateMachine.Action) {
        switch action {
        case .startStep:
            enqueueSteps()
        case .finish:
            report(.success(()))
        case .fail(let error):
            report(.failure(error))
        case .cancelStep, .none, .lost:
            break
        }
    }
}
