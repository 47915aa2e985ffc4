import Synchronization

/// A combinator's run that keeps its running children's state itself (a
/// group, a sequence), so that each child costs only its ``ChildToken``.
protocol ChildRunning<Element>: AnyObject, Sendable {
    /// What each child produces.
    associatedtype Element: Sendable

    /// The queue the children run on.
    var queue: any JobQueue { get }
    /// Whether the run is over (reported or cancelled): its running
    /// children count as cancelled.
    var isOver: Bool { get }

    /// The child at `index` completed with `outcome`: its token's latch let
    /// this outcome through, once.
    func childCompleted(_ index: Int, _ outcome: Result<Element, any Error>) -> ChildCompletion
    /// Starts what a child's completion let start (``ChildCompletion/startsNext``)
    /// when the thread that ran the child's body is not there to: a group's
    /// next ticket, a sequence's next step.
    func continueAfterChild()
    /// Keeps `attachment` for the running child at `index` (an `onCancel`
    /// block, a grandchild, a name) under `key` or the child's next key, or
    /// cancels it at once if the child was cancelled, or drops it if the
    /// child completed.
    func attach(_ attachment: Attachment, toChild index: Int, key: Int?)
    /// A key for an attachment of the running child at `index`, to be
    /// attached with it later.
    func reserveKey(forChild index: Int) -> Int
    /// Forgets the attachment `key` of the child at `index` (a grandchild
    /// completed).
    func detach(_ key: Int, fromChild index: Int)
}

extension ChildRunning {
    /// Performs `job` as a child of the child at `index`: it is cancelled
    /// with that child and shows in its snapshot. `handler` is called on the
    /// thread that completes it, or through the queue if `hopsToQueue`.
    func performGrandchild<Grandchild>(
        _ job: Job<Grandchild>,
        of index: Int,
        hopsToQueue: Bool,
        then handler: @escaping @Sendable (Result<Grandchild, any Error>) -> Void
    ) -> JobState<Grandchild> {
        let key = reserveKey(forChild: index)
        let grandchild = JobState<Grandchild>(queue: queue, hopsToQueue: hopsToQueue) { [self] outcome in
            detach(key, fromChild: index)
            handler(outcome)
        }
        attach(.node(grandchild), toChild: index, key: key)
        grandchild.start(job.body)
        return grandchild
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

/// A running child of a group or a step of a sequence: what its
/// controllers share, and the only state of its own the child has. Its
/// outcome latch is here; the rest (its attachments, whether it completed)
/// is kept by its run.
///
/// The child is cancelled when its run is over: then ``isCancelled`` is
/// `true` and what the child reports is dropped.
///
/// The thread that runs the child's body (a group's block, a sequence's
/// loop) calls ``bodyReturned()`` after it. A child that completes before
/// that, and so lets the next child start, leaves the next child to that
/// thread, which starts it at once, without a queue hop or a nested call:
/// the latch says so, as ``ChildPhase/grantedToRunner``.
///
/// Unchecked, as its base class: it holds an immutable reference, an
/// integer and an atomic.
final class ChildToken<Run: ChildRunning>: ControllerToken, @unchecked Sendable {
    let run: Run
    let index: Int
    /// ``ChildPhase``: whether the body runs, and whether an outcome of the
    /// child's own went through.
    private let phase = Atomic<UInt8>(ChildPhase.inBody)
    /// A group's child or a sequence's step.
    private let childKind: Kind

    override var kind: Kind { childKind }

    /// A group's child.
    init<Element>(run: GroupRun<Element>, index: Int) where Run == GroupRun<Element> {
        self.run = run
        self.index = index
        self.childKind = .groupChild
    }

    /// A sequence's step.
    init(run: SequenceRun, index: Int) where Run == SequenceRun {
        self.run = run
        self.index = index
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
                ordering: .acquiringAndReleasing
            )
            guard exchanged else {
                current = original
                continue
            }
            switch run.childCompleted(index, outcome) {
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
                phase.store(ChildPhase.cancelled, ordering: .releasing)
                return false
            }
            return true
        }
        return false
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
