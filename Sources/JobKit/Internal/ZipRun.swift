import Synchronization

/// One performance of a zip: its children's values, a count of the values
/// still to come, and whether it is over. It does a group's work for the
/// one policy a zip has (every value, the first failure ends it), without
/// a group's tickets, blocks and state machine.
///
/// The children start one after another on the thread that starts the
/// zip, each as a ``ChildToken`` whose controllers, typed as the child's
/// own job, box the value they report. A child's completion takes the lock
/// once: its value goes into its slot, and the last value, or the first
/// failure, ends the zip. The run then reports to the zip's job, through
/// its `owner`.
///
/// A child's slot holds its value once it succeeded, so the slots also say
/// which children completed, for snapshots and for the tables to cancel.
/// Slots are written only under the lock and only while the zip runs; the
/// thread that ends the zip takes the values out after unlocking, and no
/// one writes them after that.
///
/// Unchecked: `owner` is set in `init` and taken only in `deinit`; `jobs`
/// is read and emptied by the thread that starts the children alone; the
/// slots are written under the lock, and read under it or by the one
/// thread that ended the zip, as above; the rest is immutable or atomic.
final class ZipRun: JobNode, ChildRunning, @unchecked Sendable {
    typealias Element = any Sendable

    /// The queue the zip's job runs on, and its children: kept, as asking
    /// the owner would climb a chain of zips nested in zips, one level at
    /// a time, for every read.
    let queue: any JobQueue
    /// The children's jobs (the zip's own, shared by its performances),
    /// until they started: read by the thread that starts them alone,
    /// which then lets them go, so that a child's controller kept after
    /// the zip is over does not keep them and what they capture.
    private nonisolated(unsafe) var jobs: [Job<any Sendable>]  // the starting thread's alone
    /// The number of children.
    private let count: Int
    /// What the zip's job's controllers share. Released in `deinit` through
    /// ``Trampoline/releasing(_:)``, as a group's (a zip may be a child of
    /// a zip, a million deep).
    private nonisolated(unsafe) var owner: ControllerToken?  // set in init, taken in deinit
    /// Reports the zip's outcome to its job, through the owner: this run,
    /// to take the values from, or the first failure.
    private let report: @Sendable (ControllerToken, Result<ZipRun, any Error>) -> Void
    /// Whether the zip is over (reported or cancelled), for the children's
    /// controllers to read without the lock. Set under the lock.
    /// Sequentially consistent, as ``ChildRunning/isOver`` says.
    private let over = Atomic<Bool>(false)
    /// How many children started, for snapshots.
    private let started = Atomic<Int>(0)
    /// The tables of the running children that attached something, made
    /// when the first does.
    private let tables = LazyReference<ChildTables>()
    /// The values still to come, and whether the zip is over.
    private let lock: Lock<Progress>
    /// Each child's value, once it succeeded (see the type's comment).
    private let slots: UnsafeMutablePointer<(any Sendable)?>

    /// What the lock protects.
    private struct Progress {
        var remaining: Int
        var isOver = false
    }

    /// A run of `jobs` for the zip's job whose controllers share `owner`.
    init(
        jobs: [Job<any Sendable>],
        owner: ControllerToken,
        report: @escaping @Sendable (ControllerToken, Result<ZipRun, any Error>) -> Void
    ) {
        self.jobs = jobs
        self.count = jobs.count
        self.queue = owner.queue
        self.owner = owner
        self.report = report
        self.lock = Lock(Progress(remaining: count))
        self.slots = .allocate(capacity: count)
        slots.initialize(repeating: nil, count: count)
    }

    deinit {
        slots.deinitialize(count: count)
        slots.deallocate()
        if !Trampoline.releasing({ owner = nil }) { Trampoline.holdRelease { [owner] in _ = owner } }
    }

    /// Whether the zip is over: its running children count as cancelled.
    var isOver: Bool {
        over.load(ordering: .sequentiallyConsistent)
    }

    /// Takes the value of the child at `index` out, as the type of that
    /// child's job. For the report of a zip that succeeded: every slot
    /// holds a value.
    func takeValue<Value: Sendable>(at index: Int, as _: Value.Type) -> Value {
        guard let boxed = slots[index].take() else {
            preconditionFailure("Internal inconsistency: a zip's value \(index) is missing")
        }
        return unboxed(boxed)
    }

    /// Starts the zip: the zip's job holds the run, to cancel it with the
    /// job and describe it in its snapshots. The children start here, one
    /// after another (later on this thread, if the zip is itself a child
    /// of a zip or a race, a million deep).
    func start() {
        // No jobs: nothing to hold, start or wait for.
        guard count > 0 else { return deliver(.success(self)) }
        owner.unsafelyUnwrapped.attach(node: self)
        if let level = Trampoline.Level.enter() {
            startChildren()
            level.leave()
        } else {
            Trampoline.hold { [self] in startChildren() }
        }
    }

    /// Starts each child in argument order, unless the zip is over: the
    /// children left never start.
    private func startChildren() {
        defer { jobs = [] }
        for index in 0..<count {
            if isOver { return }
            started.store(index + 1, ordering: .relaxed)
            let child = ChildToken(run: self, index: index)
            jobs[index].body(Job<any Sendable>.Controller(child))
            _ = child.bodyReturned()
        }
    }

    /// Reports `result` to the zip's job, which may be another zip's
    /// child, a million deep (``Trampoline/Level``). Written out, as a
    /// group's is: a generic helper taking the report and its arguments
    /// measured 360 instructions a zip more.
    private func deliver(_ result: Result<ZipRun, any Error>) {
        let owner = owner.unsafelyUnwrapped
        if let level = Trampoline.Level.enter() {
            report(owner, result)
            level.leave()
        } else {
            Trampoline.hold { [report] in report(owner, result) }
        }
    }

    /// What a child's completion does after unlocking.
    private enum Completion {
        /// Nothing more: the value was kept.
        case kept
        /// Report the values: that was the last.
        case succeeded
        /// Report the failure, cancel the running children, release the
        /// values kept.
        case failed(any Error)
        /// Nothing: the zip was over, so the child had been cancelled.
        case lost
    }

    func childCompleted(
        _ index: Int, _ outcome: Result<any Sendable, any Error>, hasTable: Bool, inBody: Bool
    ) -> ChildCompletion {
        var table: AttachmentTable?
        var cancelling: [AttachmentTable] = []
        let completion = lock.withLock { progress -> Completion in
            if hasTable { table = tables.existing?.take(at: index) }
            guard !progress.isOver else { return .lost }
            switch outcome {
            case .success(let value):
                // The slot holds `nil`, which owns nothing: initialized
                // over, rather than assigned, which would destroy that
                // `nil` through the existential's value witnesses (120
                // instructions a child). `initialize(to:)` asks for
                // uninitialized memory; over a `nil`, nothing is lost.
                // (Slots left uninitialized, with a record under the lock
                // of those that hold a value, measured 900 a zip more.)
                (slots + index).initialize(to: value)
                progress.remaining -= 1
                guard progress.remaining == 0 else { return .kept }
                progress.isOver = true
                over.store(true, ordering: .sequentiallyConsistent)
                return .succeeded
            case .failure(let error):
                progress.isOver = true
                over.store(true, ordering: .sequentiallyConsistent)
                cancelling = runningTables()
                return .failed(error)
            }
        }
        // What the child attached goes with its completion.
        _ = table?.takeAll()
        switch completion {
        case .kept:
            return .recorded
        case .succeeded:
            deliver(.success(self))
            return .recorded
        case .failed(let error):
            cancelling.cancelAttachments()
            releaseValues()
            deliver(.failure(error))
            return .recorded
        case .lost:
            return .lost
        }
    }

    /// Takes the tables of the running children out, the zip being over.
    /// Call under the lock, after setting ``over``: a child that makes its
    /// table after this sees the zip over.
    private func runningTables() -> [AttachmentTable] {
        guard let tables = tables.existing else { return [] }
        // A completed child's table is only here if it was made as the
        // child completed: it holds nothing to cancel.
        return tables.takeAll().compactMap { slots[$0.index] == nil ? $0.table : nil }
    }

    /// Releases the values kept, here, outside the lock (a value may do
    /// anything when it goes, even report to this zip): the zip failed or
    /// was cancelled. Called by the thread that ended it, once.
    private func releaseValues() {
        for index in 0..<count { slots[index] = nil }
    }

    /// A zip starts no child after another's completion.
    func continueAfterChild() {
        preconditionFailure("Internal inconsistency: a zip's child freed a ticket")
    }

    func install(_ table: AttachmentTable, forChild index: Int) -> Bool {
        tables.made { ChildTables(count: count) }.install(table, at: index)
    }

    func uninstall(_ table: AttachmentTable, forChild index: Int) {
        lock.withLock { _ in tables.existing?.remove(table, at: index) }
    }

    /// Cancels every running child; children not started never start.
    func cancelWithOwner() {
        let cancelling = lock.withLock { progress -> [AttachmentTable]? in
            guard !progress.isOver else { return nil }
            progress.isOver = true
            over.store(true, ordering: .sequentiallyConsistent)
            return runningTables()
        }
        guard let cancelling else { return }
        releaseValues()
        cancelling.cancelAttachments()
    }

    /// Says how far the zip is, and adds its running children.
    func describe(into owner: inout JobSnapshot) {
        let progress = lock.withLock { progress -> (done: Int, running: [AttachmentTable?])? in
            guard !progress.isOver else { return nil }
            let tables = tables.existing
            var done = 0
            var running: [AttachmentTable?] = []
            for index in 0..<started.load(ordering: .relaxed) {
                if slots[index] == nil { running.append(tables?.table(at: index)) } else { done += 1 }
            }
            return (done, running)
        }
        guard let (done, running) = progress else { return }
        owner.kind = .zip(done: done, running: running.count, count: count)
        // Described here, outside the lock the children complete through.
        for table in running {
            owner.children.append(
                SnapshotWalk.child {
                    JobSnapshot(state: .running, entries: table?.entries ?? .init()).collapsingWrapper()
                })
        }
    }
}
