import Synchronization

/// A combinator's run that keeps its running children's state itself (a
/// group, a zip, a sequence), so that each child costs only its
/// ``ChildToken``.
protocol ChildRunning<Element>: AnyObject, Sendable {
    /// What each child produces.
    associatedtype Element: Sendable

    /// The queue the children run on.
    var queue: any JobQueue { get }
    /// Whether the run is over (reported or cancelled): its running
    /// children count as cancelled. Set and read sequentially consistent,
    /// for an attachment that makes its table as the run ends
    /// (``LazyReference``).
    var isOver: Bool { get }

    /// The child at `index` completed with `outcome`: its token's latch let
    /// this outcome through, once. `hasTable` says whether the child has an
    /// attachment table, whose attachments the run then releases; `inBody`,
    /// whether the child's body still runs, so that the thread running it
    /// may start what this completion lets start.
    func childCompleted(
        _ index: Int, _ outcome: Result<Element, any Error>, hasTable: Bool, inBody: Bool
    ) -> ChildCompletion
    /// Starts what a child's completion let start (``ChildCompletion/startsNext``)
    /// when the thread that ran the child's body is not there to: a group's
    /// next ticket, a sequence's next step.
    func continueAfterChild()
    /// The table the running child at `index` keeps its attachments in,
    /// from its first attachment on: a group makes one for each child that
    /// attaches something; a sequence, whose steps run one at a time, has
    /// one for all its steps. The run takes what the table holds when the
    /// child completes (to release it) or the run is over (to cancel it).
    func makeTable(forChild index: Int) -> AttachmentTable
    /// Keeps `table`, which the running child at `index` just made, where
    /// the run finds it to cancel or describe the child, without taking the
    /// run's lock.
    /// - Returns: `true` if the run keeps it, and must forget it
    ///   (``uninstall(_:forChild:)``) if the child turns out to have
    ///   completed, or the run to be over, as it made it.
    func install(_ table: AttachmentTable, forChild index: Int) -> Bool
    /// Forgets `table`, kept for the child at `index`: the child had
    /// completed, or the run was over, as it made the table.
    func uninstall(_ table: AttachmentTable, forChild index: Int)
}

extension ChildRunning {
    /// A table of its own for each child (a group's, a zip's).
    func makeTable(forChild index: Int) -> AttachmentTable {
        AttachmentTable()
    }
}

extension [AttachmentTable] {
    /// Cancels what the running children whose tables these are attached:
    /// their run is over.
    func cancelAttachments() {
        for table in self {
            for (_, attachment) in table.takeAll() { attachment.cancelWithOwner() }
        }
    }
}

/// What became of a child's outcome.
enum ChildCompletion: Sendable {
    /// It was recorded.
    case recorded
    /// It was recorded and lets the next child start: a group's ticket, a
    /// sequence's next step. The thread that runs the child's body starts
    /// it, if the body has not returned; otherwise
    /// ``ChildRunning/continueAfterChild()`` does.
    case startsNext
    /// It was dropped: the run was over, so the child had been cancelled.
    case lost
}

/// A running child of a group or a zip, or a step of a sequence: what its
/// controllers share, and the only state of its own the child has: its
/// outcome latch, and what it attached, in a table made on first use (most
/// children attach nothing). Whether it completed is kept by its run, which
/// also keeps the child's table, to cancel and describe it.
///
/// The child is cancelled when its run is over: then ``isCancelled`` is
/// `true`, what the child reports is dropped, and what it attaches is
/// cancelled at once. What it attached is released when it completes.
///
/// The thread that runs the child's body (a group's block, a zip's start,
/// a sequence's loop) calls ``bodyReturned()`` after it. A child that
/// completes before that, and so lets the next child start, leaves the
/// next child to that thread, which starts it at once, without a queue hop
/// or a nested call: the latch says so, as ``ChildPhase/grantedToRunner``.
///
/// Unchecked, as its base class: it holds an immutable reference, an
/// integer and atomics.
final class ChildToken<Run: ChildRunning>: ControllerToken, @unchecked Sendable {
    let run: Run
    /// The child's index, in 32 bits, so that the token with its table
    /// reference stays in the allocator's 48-byte size class (a group or a
    /// sequence holds at most `UInt32.max` jobs).
    private let storedIndex: UInt32
    /// ``ChildPhase``: whether the body runs, and whether an outcome of the
    /// child's own went through.
    private let phase = Atomic<UInt8>(ChildPhase.inBody)
    /// A group's child, a race's, a zip's or a sequence's step.
    private let childKind: Kind
    /// What the child attached (`onCancel` blocks, grandchildren, names),
    /// made on first use (``ChildRunning/makeTable(forChild:)``).
    private let attachments = LazyReference<AttachmentTable>()

    override var kind: Kind { childKind }

    override var queue: any JobQueue { run.queue }

    override func attach(node: any JobNode) {
        attach(.node(node))
    }

    /// The child's index in its run.
    var index: Int { Int(storedIndex) }

    /// A group's child; a race's, if `boxesValue`: then the run
    /// is a group of `any Sendable`, and the child's controllers, typed as
    /// its own job, box the value they report.
    init<Element>(run: GroupRun<Element>, index: Int, boxesValue: Bool) where Run == GroupRun<Element> {
        self.run = run
        self.storedIndex = UInt32(truncatingIfNeeded: index)
        self.childKind = boxesValue ? .boxingChild : .groupChild
    }

    /// A zip's child: its controllers, typed as its own job, box the value
    /// they report.
    init(run: ZipRun, index: Int) where Run == ZipRun {
        self.run = run
        self.storedIndex = UInt32(truncatingIfNeeded: index)
        self.childKind = .zipChild
    }

    /// A sequence's step.
    init(run: SequenceRun, index: Int) where Run == SequenceRun {
        self.run = run
        self.storedIndex = UInt32(truncatingIfNeeded: index)
        self.childKind = .sequenceStep
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

    /// Whether the child was cancelled: its run is over and the child had
    /// not completed.
    var isCancelled: Bool {
        let phase = phase.load(ordering: .acquiring)
        return phase == ChildPhase.cancelled || (phase < ChildPhase.reportedInBody && run.isOver)
    }

    /// Whether the child completed, by any means.
    var isCompleted: Bool {
        phase.load(ordering: .acquiring) >= ChildPhase.reportedInBody || run.isOver
    }

    /// The thread that ran the child's body is done with it.
    /// - Returns: `true` if the child completed inside its body and let the
    ///   next child start: the caller starts it.
    func bodyReturned() -> Bool {
        var (exchanged, current) = phase.compareExchange(
            expected: ChildPhase.inBody, desired: ChildPhase.running, ordering: .acquiringAndReleasing
        )
        if exchanged { return false }
        if current == ChildPhase.reportedInBody {
            // The outcome is still on its way to the run (from another
            // thread): the runner leaves, and the completion starts the
            // next child itself if it may.
            (exchanged, current) = phase.compareExchange(
                expected: ChildPhase.reportedInBody, desired: ChildPhase.reported, ordering: .acquiringAndReleasing
            )
            if exchanged { return false }
        }
        return current == ChildPhase.grantedToRunner
    }

    /// ``report(_:)`` of `value`. Apart, so that unspecialized code that
    /// calls it (``ControllerToken/succeed(with:)``) looks up the metadata of
    /// the `Result` it builds only on this path.
    @inline(never)
    func succeed(with value: Run.Element) -> Bool {
        report(.success(value))
    }

    /// Lets the first outcome through to the run; the next child it lets
    /// start goes to the thread running this child's body if the body has
    /// not returned, else to ``ChildRunning/continueAfterChild()``.
    /// - Returns: `true` if this outcome won.
    func report(_ outcome: Result<Run.Element, any Error>) -> Bool {
        var current = phase.load(ordering: .relaxed)
        while current < ChildPhase.reportedInBody {
            let inBody = current == ChildPhase.inBody
            let (exchanged, original) = phase.compareExchange(
                expected: current,
                desired: inBody ? ChildPhase.reportedInBody : ChildPhase.reported,
                ordering: .sequentiallyConsistent
            )
            guard exchanged else {
                current = original
                continue
            }
            switch run.childCompleted(index, outcome, hasTable: attachments.existing != nil, inBody: inBody) {
            case .recorded:
                break
            case .startsNext:
                let granted =
                    inBody
                    && phase.compareExchange(
                        expected: ChildPhase.reportedInBody,
                        desired: ChildPhase.grantedToRunner,
                        ordering: .acquiringAndReleasing
                    ).exchanged
                if !granted { run.continueAfterChild() }
            case .lost:
                // The run was over: it cancels what the child attached.
                phase.store(ChildPhase.cancelled, ordering: .releasing)
                return false
            }
            return true
        }
        return false
    }

    // MARK: Attachments

    /// Holds `attachment` while the child runs. An `onCancel` block or a
    /// node attached to a cancelled child is cancelled at once; anything
    /// attached to a child that completed otherwise is dropped.
    ///
    /// The child's table is made on first use; its run cancels what it
    /// holds when the run is over, and releases it when the child completes.
    func attach(_ attachment: Attachment) {
        let early = decideAttachment()
        guard early == .kept else {
            // No table for what is not kept.
            if early == .cancelNow { attachment.cancelWithOwner() }
            return
        }
        let (table, installed) = madeTable()
        keep(attachment, key: nil, in: table, installed: installed)
    }

    /// The child goes on to the job that finishes it in its place, the
    /// next step of a loop: see ``AttachmentList/startStep()``. The step
    /// that ends ran a child (the `then`'s first job), so the child has its
    /// table.
    func startStep() {
        attachments.existing?.startStep()
    }

    /// The child's table, made now if it was not, and given to the run;
    /// `installed` says whether this call gave it.
    ///
    /// Every attachment gives it, not only the one that made it: the maker
    /// may not have given it yet, and an attachment kept in a table the run
    /// cannot find would be neither cancelled with the run nor released
    /// with the child. Giving it again is a load when the run has it.
    private func madeTable() -> (table: AttachmentTable, installed: Bool) {
        let table = attachments.made { run.makeTable(forChild: index) }
        return (table, run.install(table, forChild: index))
    }

    /// Keeps `attachment` in `table` under `key`, or the next key, or
    /// cancels or drops it.
    /// - Returns: The key it is kept under, if it is kept.
    @inline(__always)
    @discardableResult
    private func keep(_ attachment: Attachment, key: Int?, in table: AttachmentTable, installed: Bool) -> Int? {
        let (decision, kept) = table.attach(attachment, key: key) { decideAttachment() }
        // Made as the child completed or the run ended: nothing to keep.
        if installed && decision != .kept { run.uninstall(table, forChild: index) }
        if decision == .cancelNow { attachment.cancelWithOwner() }
        return kept
    }

    /// What becomes of an attachment now: kept while the child runs,
    /// cancelled if the child was, dropped if it completed.
    private func decideAttachment() -> AttachDecision {
        let phase = phase.load(ordering: .sequentiallyConsistent)
        if phase >= ChildPhase.reportedInBody { return phase == ChildPhase.cancelled ? .cancelNow : .drop }
        return run.isOver ? .cancelNow : .kept
    }

    /// Performs `job` as a child of this child: it is cancelled with this
    /// child and shows in its snapshot. `handler` is called on the thread
    /// that completes it, or through the queue if `hopsToQueue`.
    func performChild<Grandchild>(
        _ job: Job<Grandchild>,
        hopsToQueue: Bool,
        startsHere: Bool,
        making makeToken: JobState<Grandchild>.MakeToken?,
        then handler: @escaping @Sendable (Result<Grandchild, any Error>) -> Void
    ) -> JobState<Grandchild> {
        let (table, installed) = madeTable()
        if let makeToken {
            return table.perform(
                job, on: run.queue, startsHere: startsHere, making: makeToken,
                keep: { keep($0, key: $1, in: table, installed: installed) }, then: handler
            ).state
        }
        return table.perform(
            job, on: run.queue, hopsToQueue: hopsToQueue, startsHere: startsHere,
            keep: { keep($0, key: $1, in: table, installed: installed) }, then: handler
        )
    }
}

/// The values of a ``ChildToken``'s phase; from `reportedInBody` on, the
/// child has completed.
private enum ChildPhase {
    /// The runner runs the child's body; no outcome yet.
    static let inBody: UInt8 = 0
    /// The body returned; no outcome yet.
    static let running: UInt8 = 1
    /// An outcome went through the latch while the body ran, and is on its
    /// way to the run.
    static let reportedInBody: UInt8 = 2
    /// That outcome let the next child start, and the runner, still running
    /// the body, starts it.
    static let grantedToRunner: UInt8 = 3
    /// An outcome went through the latch, and the run has it or will have
    /// it.
    static let reported: UInt8 = 4
    /// An outcome went through the latch after the run was over: it was
    /// dropped, the child had been cancelled.
    static let cancelled: UInt8 = 5
}
