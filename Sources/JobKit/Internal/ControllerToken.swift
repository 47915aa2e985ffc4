/// What the copies of a job's controller share: the performance they report
/// to, and their lifetime. When the last copy goes away and the job has not
/// completed, the job fails with ``JobError/abandoned``.
///
/// A performance keeps its state in one of two places, and the token is a
/// subclass for each:
/// - ``StateToken``: a performance of its own (``Job/perform(on:then:)``,
///   an awaited job, the child of a transform, a timeout or a retry), whose
///   state is a ``JobState``;
///
///   (The job a `then` or a `recover` builds runs in its job's place, with
///   its job's token, whichever subclass that is.)
/// - ``ChildToken``: a group's running child, a zip's or a sequence's
///   step, whose state is the token itself and its place in its run, so
///   that a parked child costs one small object.
///   A race's child is a ``ChildToken`` of a group of `any Sendable`, and
///   a zip's one of a ``ZipRun``, whose controllers are typed as the
///   child's own job: they box its value.
///
/// A controller holds the token as one class reference, so that a closure
/// that captures a controller (`other.async { controller.finish() }`) has
/// the token as its context and allocates nothing. Its methods do not call
/// the subclasses through the class's table, which is never specialized (a
/// `Job<Void>`'s controller would build and inspect its `Result` in
/// unspecialized code, looking up type metadata on every call): they ask
/// the token's ``kind`` (overridden to return a constant) and switch over
/// the subclass it names (``TypedToken``; ``succeed(with:)``, the path of
/// every child's success, switches in place). Only ``queue`` and
/// ``attach(node:)``, which build nothing of the job's type, go through
/// the table, for code that does not know that type (a zip's run). The
/// base class stores nothing, so that a token is no larger than its
/// subclass's fields make it.
///
/// Unchecked: the base class holds nothing, and each subclass is final and
/// holds immutable references, integers and atomics (Swift checks no
/// subclass of a class that is not final).
@usableFromInline class ControllerToken: @unchecked Sendable {
    /// Which subclass a token is.
    enum Kind: UInt8, Sendable {
        case state, groupChild, sequenceStep, boxingChild, zipChild
    }

    @usableFromInline
    init() {}

    /// Which subclass this is.
    var kind: Kind {
        preconditionFailure("Internal inconsistency: \(type(of: self)) does not say its kind")
    }

    /// The queue the job runs on, for code that does not know the job's
    /// value type (a zip's run, made in code generic over a pack of types,
    /// would look up that tuple type's metadata to ask ``typed(as:)``).
    var queue: any JobQueue {
        preconditionFailure("Internal inconsistency: \(type(of: self)) does not say its queue")
    }

    /// Holds `node` while the job runs, for code that does not know the
    /// job's value type, as ``queue``: see ``TypedToken/attach(_:)-(JobNode)``.
    func attach(node: any JobNode) {
        preconditionFailure("Internal inconsistency: \(type(of: self)) does not hold nodes")
    }

    /// Reports `value` unless the job already completed, switching over
    /// ``kind`` here rather than making a ``TypedToken`` and calling it:
    /// the path of every child's success, where a typed token made and
    /// handed on is retained and released around the call.
    /// - Returns: `true` if this outcome won.
    @inline(__always)
    func succeed<Success: Sendable>(with value: Success) -> Bool {
        switch kind {
        case .state:
            let token = unsafeDowncast(self, to: StateToken<Success>.self)
            token.leaveParent()
            return token.state.succeed(with: value, calling: token.callsWithSuccess)
        case .groupChild:
            return unsafeDowncast(self, to: ChildToken<GroupRun<Success>>.self).succeed(with: value)
        case .sequenceStep:
            return unsafeDowncast(self, to: ChildToken<SequenceRun>.self).report(.success(()))
        case .boxingChild:
            return unsafeDowncast(self, to: ChildToken<GroupRun<any Sendable>>.self).report(.success(value))
        case .zipChild:
            return unsafeDowncast(self, to: ChildToken<ZipRun>.self).report(.success(value))
        }
    }

    /// The state of a performance of its own (a ``StateToken``'s), asked
    /// without making a ``TypedToken``, whose reference is retained and
    /// released around each call: what a loop's every step asks.
    @inline(__always)
    func ownState<Success: Sendable>(as _: Success.Type) -> JobState<Success>? {
        kind == .state ? unsafeDowncast(self, to: StateToken<Success>.self).state : nil
    }

    /// Calls `body` with this token as a ``StateToken``, if it is one,
    /// without retaining it for the call (the caller holds it):
    /// ``ownState(as:)`` for a caller that hands the token on (the next
    /// step of a loop).
    /// - Returns: `false` if it is not one.
    @inline(__always)
    func withOwnStateToken<Success: Sendable>(as _: Success.Type, _ body: (StateToken<Success>) -> Void) -> Bool {
        guard kind == .state else { return false }
        Unmanaged.passUnretained(unsafeDowncast(self, to: StateToken<Success>.self))._withUnsafeGuaranteedRef(body)
        return true
    }

    /// Whether the job has completed, by any means: asked of the subclass
    /// in place, as ``succeed(with:)`` does (every step of a loop asks).
    @inline(__always)
    func isCompleted<Success: Sendable>(as _: Success.Type) -> Bool {
        switch kind {
        case .state: unsafeDowncast(self, to: StateToken<Success>.self).state.isCompleted
        case .groupChild: unsafeDowncast(self, to: ChildToken<GroupRun<Success>>.self).isCompleted
        case .sequenceStep: unsafeDowncast(self, to: ChildToken<SequenceRun>.self).isCompleted
        case .boxingChild: unsafeDowncast(self, to: ChildToken<GroupRun<any Sendable>>.self).isCompleted
        case .zipChild: unsafeDowncast(self, to: ChildToken<ZipRun>.self).isCompleted
        }
    }

    /// Whether the job has been cancelled: asked as ``isCompleted(as:)``.
    @inline(__always)
    func isCancelled<Success: Sendable>(as _: Success.Type) -> Bool {
        switch kind {
        case .state: unsafeDowncast(self, to: StateToken<Success>.self).state.isCancelled
        case .groupChild: unsafeDowncast(self, to: ChildToken<GroupRun<Success>>.self).isCancelled
        case .sequenceStep: unsafeDowncast(self, to: ChildToken<SequenceRun>.self).isCancelled
        case .boxingChild: unsafeDowncast(self, to: ChildToken<GroupRun<any Sendable>>.self).isCancelled
        case .zipChild: unsafeDowncast(self, to: ChildToken<ZipRun>.self).isCancelled
        }
    }

    /// This token with its subclass, for `Success`.
    @inline(__always)
    func typed<Success>(as _: Success.Type) -> TypedToken<Success> {
        switch kind {
        case .state: .state(unsafeDowncast(self, to: StateToken<Success>.self))
        case .groupChild: .groupChild(unsafeDowncast(self, to: ChildToken<GroupRun<Success>>.self))
        case .sequenceStep: .sequenceStep(unsafeDowncast(self, to: ChildToken<SequenceRun>.self))
        case .boxingChild: .boxingChild(unsafeDowncast(self, to: ChildToken<GroupRun<any Sendable>>.self))
        case .zipChild: .zipChild(unsafeDowncast(self, to: ChildToken<ZipRun>.self))
        }
    }
}

/// A controller's token with its subclass: what a controller does, done by
/// the subclass that keeps the performance's state.
enum TypedToken<Success: Sendable>: Sendable {
    typealias Outcome = Result<Success, any Error>

    /// A performance whose state is a ``JobState``.
    case state(StateToken<Success>)
    /// A group's running child.
    case groupChild(ChildToken<GroupRun<Success>>)
    /// A sequence's step: only a `Job<Void>`'s controller holds one, so
    /// the value it reports is `()`.
    case sequenceStep(ChildToken<SequenceRun>)
    /// A race's child: a child of a group of `any Sendable`, whatever its
    /// own value type, which it boxes.
    case boxingChild(ChildToken<GroupRun<any Sendable>>)
    /// A zip's child, whatever its own value type, which it boxes.
    case zipChild(ChildToken<ZipRun>)

    /// The queue the job runs on; children run on it too.
    var queue: any JobQueue {
        switch self {
        case .state(let token): token.state.queue
        case .groupChild(let child): child.run.queue
        case .sequenceStep(let step): step.run.queue
        case .boxingChild(let child): child.run.queue
        case .zipChild(let child): child.run.queue
        }
    }

    /// Reports `error` unless the job already completed.
    /// - Returns: `true` if this outcome won.
    func fail(with error: any Error) -> Bool {
        switch self {
        case .state(let token):
            token.leaveParent()
            return token.state.fail(with: error)
        case .groupChild(let child): return child.report(.failure(error))
        case .sequenceStep(let step): return step.report(.failure(error))
        case .boxingChild(let child): return child.report(.failure(error))
        case .zipChild(let child): return child.report(.failure(error))
        }
    }

    /// Reports `outcome` unless the job already completed.
    /// - Returns: `true` if this outcome won.
    func complete(with outcome: Outcome) -> Bool {
        switch self {
        case .state(let token):
            token.leaveParent()
            return token.state.complete(with: outcome)
        case .groupChild(let child): return child.report(outcome)
        case .sequenceStep(let step): return step.report(outcome.map { _ in () })
        case .boxingChild(let child): return child.report(outcome.map { $0 as any Sendable })
        case .zipChild(let child): return child.report(outcome.map { $0 as any Sendable })
        }
    }

    /// Holds `attachment` while the job runs (a name, for good). An
    /// `onCancel` block or a node attached to a cancelled job is cancelled
    /// at once; anything attached to a job that completed otherwise is
    /// dropped.
    func attach(_ attachment: Attachment) {
        switch self {
        case .state(let token): token.state.attach(attachment)
        case .groupChild(let child): child.attach(attachment)
        case .sequenceStep(let step): step.attach(attachment)
        case .boxingChild(let child): child.attach(attachment)
        case .zipChild(let child): child.attach(attachment)
        }
    }

    /// The job goes on to the job that finishes it in its place, the next
    /// step of a loop: what the step that ends said about itself goes
    /// (``AttachmentList/startStep()``).
    func startStep() {
        switch self {
        case .state(let token): token.state.startStep()
        case .groupChild(let child): child.startStep()
        case .sequenceStep(let step): step.startStep()
        case .boxingChild(let child): child.startStep()
        case .zipChild(let child): child.startStep()
        }
    }

    /// Runs `step`, the job's next step, on the job's queue: a standalone
    /// performance's in the turn that runs its body now, if this thread
    /// runs it (``JobState/runStep(_:)``); a combinator's child's in a
    /// work item of its own.
    func runStep(_ step: @escaping @Sendable () -> Void) {
        switch self {
        case .state(let token): token.state.runStep(step)
        case .groupChild(let child): Trampoline.enqueue(step, on: child.run.queue)
        case .sequenceStep(let sequenceStep): Trampoline.enqueue(step, on: sequenceStep.run.queue)
        case .boxingChild(let child): Trampoline.enqueue(step, on: child.run.queue)
        case .zipChild(let child): Trampoline.enqueue(step, on: child.run.queue)
        }
    }

    /// Holds `node` while the job runs: it is cancelled with the job and
    /// shows in its snapshot.
    func attach(_ node: any JobNode) {
        attach(.node(node))
    }

    /// Performs `child` on the job's queue as a child of the job: it is
    /// cancelled with the job and shows in its snapshots. `handler` is
    /// called on the thread that completes the child, or through the queue
    /// if `hopsToQueue`. Its body runs on this thread, now, if `startsHere`
    /// (the caller is the job's body, on its queue), or else through the
    /// queue. `makeToken`, if any, makes the child's state and token where
    /// its type is known (``JobState/MakeToken``), and with them decides how
    /// the handler is called, in place of `hopsToQueue`. The child's
    /// handler holds the job's state, not
    /// this token: a body that dropped its controllers is abandoned even
    /// while a child it started runs.
    @discardableResult
    func performChild<Child>(
        _ child: Job<Child>,
        hopsToQueue: Bool = false,
        startsHere: Bool = false,
        making makeToken: JobState<Child>.MakeToken? = nil,
        then handler: @escaping @Sendable (Result<Child, any Error>) -> Void
    ) -> JobState<Child> {
        switch self {
        case .state(let token):
            // A performance of its own takes the children of its transforms
            // and loops through `JobState.performChildHere`, made by
            // `makeToken` (`Job.Controller.performChildHere`): none here.
            token.state.performChild(child, hopsToQueue: hopsToQueue, startsHere: startsHere, then: handler)
        case .groupChild(let groupChild):
            groupChild.performChild(
                child, hopsToQueue: hopsToQueue, startsHere: startsHere, making: makeToken, then: handler)
        case .sequenceStep(let step):
            step.performChild(
                child, hopsToQueue: hopsToQueue, startsHere: startsHere, making: makeToken, then: handler)
        case .boxingChild(let boxingChild):
            boxingChild.performChild(
                child, hopsToQueue: hopsToQueue, startsHere: startsHere, making: makeToken, then: handler)
        case .zipChild(let zipChild):
            zipChild.performChild(
                child, hopsToQueue: hopsToQueue, startsHere: startsHere, making: makeToken, then: handler)
        }
    }
}

/// The token of a performance whose state is a ``JobState``.
///
/// Unchecked, as its base class: it holds an immutable reference and an
/// immutable `Sendable` closure. Not final: a child a transform or a loop
/// starts has a ``ChildStateToken``, so that this token stays within 40
/// bytes, the allocator's 48-byte size class.
@usableFromInline class StateToken<Success: Sendable>: ControllerToken, @unchecked Sendable {
    final let state: JobState<Success>
    /// How the state's handler is called with a success, if the token's
    /// maker knew `Success` (``JobState/SuccessCall``).
    final let callsWithSuccess: JobState<Success>.SuccessCall?

    @usableFromInline
    init(_ state: JobState<Success>, callsWithSuccess: JobState<Success>.SuccessCall? = nil) {
        self.state = state
        self.callsWithSuccess = callsWithSuccess
    }

    final override var kind: Kind { .state }

    final override var queue: any JobQueue { state.queue }

    /// Calls `body` with the state, without retaining it for the call (the
    /// token holds it): read as a value, it is retained around each call,
    /// an atomic operation, at every step of a loop.
    @inline(__always)
    final func withState<Result>(_ body: (JobState<Success>) -> Result) -> Result {
        Unmanaged.passUnretained(state)._withUnsafeGuaranteedRef(body)
    }

    final override func attach(node: any JobNode) {
        state.attach(.node(node))
    }

    /// The performance leaves the table of the job it is a child of, if it
    /// is kept in one by its token (``ChildStateToken``): its own outcome
    /// comes, before its handler runs. Said twice, the second finds
    /// nothing to take.
    func leaveParent() {}

    deinit {
        withState { $0.abandon() }
    }
}

/// The token of a child that a transform or a loop starts
/// (``JobState/MakeToken``): it knows where the job it is a child of keeps
/// it, and the child leaves that table as its own outcome comes
/// (``leaveParent()``). Other children leave through a wrapper of their
/// handler, an allocation more at every step of a loop.
///
/// Unchecked, as its base class; where its job keeps it is written once
/// before the child starts (the start, on this thread or through the
/// queue, publishes it) and only read after.
@usableFromInline final class ChildStateToken<Success: Sendable>: StateToken<Success>, @unchecked Sendable {
    /// The table of the job the child is a child of, retained while here
    /// (released by the deinit), so that leaving it takes no retain.
    private var parentTable: Unmanaged<AttachmentTable>?
    /// The key the child is kept under there.
    private var parentKey = 0

    @usableFromInline
    override init(_ state: JobState<Success>, callsWithSuccess: JobState<Success>.SuccessCall? = nil) {
        super.init(state, callsWithSuccess: callsWithSuccess)
    }

    /// The job the child is a child of keeps it in `table` under `key`.
    /// Said once, before the child starts.
    func kept(in table: AttachmentTable, key: Int) {
        parentTable = .passRetained(table)
        parentKey = key
    }

    override func leaveParent() {
        guard let parentTable else { return }
        let detached = parentTable._withUnsafeGuaranteedRef { $0.detach(parentKey) }
        _ = detached  // released here, outside the lock
    }

    /// Before the base class's, which abandons the child: it leaves its
    /// job's table first, as an outcome of its own does.
    deinit {
        if !withState({ $0.isCompleted }) { leaveParent() }
        parentTable?.release()
    }
}
