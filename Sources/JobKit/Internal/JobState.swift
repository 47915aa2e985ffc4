import Synchronization

/// The state of one standalone performance of a job: one started with
/// ``Job/perform(on:then:)``, awaited, or the child of a transform, a
/// timeout or a retry. (A group's child and a sequence's step are
/// ``ChildToken``s instead; the job a `then` or a `recover` builds is no
/// child: it runs in its job's place, through the same controllers.)
///
/// It is made of parts that each do one thing:
/// - the ``OutcomeLatch``: the first outcome wins, later ones are dropped;
/// - the ``Delivery`` of the outcome: a handler called through the queue
///   or inline, or the continuation of the task that awaits the job,
///   handed over as the body starts (``HandOver``);
/// - the attachments (``AttachmentTable``), made on first use;
/// - the body, held from `start` until its work runs on the queue.
///
/// On completion every closure the state held is released, so objects
/// captured by them are freed. Handlers and `onCancel` blocks run after
/// any lock is released.
///
/// A performance costs two allocations, this state and the
/// ``StateToken`` its body's controllers share, and a third once it
/// attaches something. The enqueued work captures one of the first two
/// alone, so that it is the closure's context and the closure allocates
/// nothing.
///
/// Usable from inlinable code for ``Job/perform(on:then:)`` and
/// ``Job/value(on:isolation:)``, which the caller's module specializes.
@usableFromInline
final class JobState<Success: Sendable>: JobCancelling {
    @usableFromInline typealias Outcome = Result<Success, any Error>
    @usableFromInline typealias Handler = @Sendable (Outcome) -> Void
    @usableFromInline typealias Body = @Sendable (Job<Success>.Controller) -> Void
    /// Calls a handler with a value, as a success: made where `Success` is
    /// known (in ``Job/perform(on:then:)``, inlinable, a closure that
    /// captures nothing), as in unspecialized code building the `Result`
    /// looks up its type's metadata, at each call. Kept by the
    /// performance's ``StateToken``: this state stays within 120 bytes,
    /// which the allocator frees from another thread without a lock.
    @usableFromInline typealias SuccessCall = @Sendable (Handler, Success) -> Void
    /// Makes a child's state, on the queue, with the handler, and its
    /// controllers' token, with its ``SuccessCall``: made where `Success`
    /// is known (a transform's inlinable body, a closure that captures
    /// nothing), as each allocation in unspecialized code looks up its
    /// type's metadata at run time, at each step of a loop.
    @usableFromInline typealias MakeToken = @Sendable (any JobQueue, @escaping Handler) -> ChildStateToken<Success>

    /// Where the outcome goes.
    enum Delivery {
        /// To a handler called on the job's queue: a public performance.
        /// In the body's turn of the queue, once the body returned, if it
        /// completed the job; in a work item of its own otherwise.
        case throughQueue(Handler)
        /// To a handler called on the thread that completes the job: a
        /// combinator's own child.
        case inline(Handler)
        /// To the task that awaits the job, through the continuation it
        /// hands over.
        case awaiting
        /// Nowhere any more: the handler was called and released.
        case delivered

        /// A delivery still to make.
        enum Pending {
            case throughQueue(Handler)
            case inline(Handler)
            case awaiting
        }
    }

    /// The queue the job runs on; children run on it too.
    let queue: any JobQueue
    private let attachments = LazyReference<AttachmentTable>()
    private let latch = OutcomeLatch()
    /// Whether the body has run, for snapshots ("waiting to start" or
    /// "running"); nothing else reads it.
    private let hasStarted = Atomic<Bool>(false)
    /// For an awaited job, who has come of the two that meet over the
    /// continuation: the task that hands it over, and the outcome that
    /// resumes it. The second to come resumes the task.
    private let arrivals = Atomic<HandOver>(.nobody)

    // The next three are not behind a lock, and need not be:
    // - `delivery` is set in `init`, before the state is shared, and
    //   afterwards touched only by the one thread whose outcome won the latch.
    // - `continuation` is written by the awaiting task before it publishes
    //   it through `arrivals` (release), and read by the latch's winner
    //   only after `arrivals` showed it published (acquire); a task that
    //   came second clears it, and the winner then never reads it.
    // - `pendingBody` is set by a start (`start(_:)`, `start(_:controlledBy:)`,
    //   or `startHere` past the nesting limit) before it enqueues or holds
    //   the work that takes it, and that work runs once; or by
    //   `startStep(_:controlledBy:)`, the next step of the job, which its
    //   body's outcome sets once the body ran, before it hands over (in
    //   turn, on this thread, or through the queue) the work that takes
    //   it. One body or step at a time: nothing else touches it.
    private nonisolated(unsafe) var delivery: Delivery  // owned by the latch's winner
    private nonisolated(unsafe) var continuation: UnsafeContinuation<Success, any Error>?  // handed over
    private nonisolated(unsafe) var pendingBody: Body?  // handed to the one start or step that runs it

    /// A performance whose handler is called through `queue` or inline.
    @usableFromInline
    init(queue: any JobQueue, hopsToQueue: Bool, handler: @escaping Handler) {
        self.queue = queue
        self.delivery = hopsToQueue ? .throughQueue(handler) : .inline(handler)
    }

    /// The token of a child that a transform or a loop starts in its body,
    /// and its state, whose handler is called on the thread that completes
    /// it: a ``MakeToken``, for the caller's module to make them (and to
    /// build the `Result` of their success) where `Success` is known.
    @inlinable
    static func makeChildToken(on queue: any JobQueue, handler: @escaping Handler) -> ChildStateToken<Success> {
        ChildStateToken(
            JobState(queue: queue, hopsToQueue: false, handler: handler),
            callsWithSuccess: { handler, value in handler(.success(value)) })
    }

    /// A performance awaited by a task, which hands over its continuation
    /// with ``start(_:resuming:)``. It may be cancelled before that.
    @usableFromInline
    init(awaitingOn queue: any JobQueue) {
        self.queue = queue
        self.delivery = .awaiting
    }

    @inline(__always)
    var isCompleted: Bool {
        latch.isCompleted
    }

    var isCancelled: Bool {
        latch.isCancelled
    }

    // MARK: Starting

    /// Enqueues the body on the queue. When the work runs it starts the body
    /// with a fresh controller, unless the job has completed (been
    /// cancelled) by then. Call it once.
    func start(_ body: @escaping Body) {
        pendingBody = body
        Trampoline.enqueue({ [self] in runPendingBody(controlledBy: nil) }, on: queue)
    }

    /// Starts an awaited job's body on the queue, to resume `continuation`
    /// once with its outcome, on the thread that completes it. If the job
    /// was cancelled before (the task was), the body never runs and
    /// `continuation` is resumed at once with `CancellationError`.
    @inlinable
    func start(_ body: @escaping Body, resuming continuation: UnsafeContinuation<Success, any Error>) {
        if handOver(continuation) {
            // The token is made here, where the caller's module knows
            // `Success`; made in generic code, it costs a metadata lookup.
            start(body, controlledBy: StateToken(self))
        } else {
            continuation.resume(throwing: CancellationError())
        }
    }

    /// Hands `continuation` over to the outcome, unless the job has
    /// completed already: only a cancellation completes a job whose body
    /// has not run.
    /// - Returns: `true` if the outcome will resume `continuation`.
    @usableFromInline
    func handOver(_ continuation: UnsafeContinuation<Success, any Error>) -> Bool {
        self.continuation = continuation
        let cameFirst = arrivals.compareExchange(
            expected: .nobody, desired: .continuation, ordering: .acquiringAndReleasing
        ).exchanged
        if !cameFirst { self.continuation = nil }
        return cameFirst
    }

    /// ``start(_:)`` with the controllers' token made by the caller: the
    /// work holds it until the body runs, so a queue that drops the work
    /// without running it fails the job as abandoned.
    @usableFromInline
    func start(_ body: @escaping Body, controlledBy token: StateToken<Success>) {
        pendingBody = body
        Trampoline.enqueue({ [token] in token.state.runPendingBody(controlledBy: token) }, on: queue)
    }

    /// ``start(_:controlledBy:)``, for ``Job/perform(on:then:)``.
    /// - Returns: The handle on this performance.
    @usableFromInline
    func performance(of body: @escaping Body, controlledBy token: StateToken<Success>) -> JobHandle {
        start(body, controlledBy: token)
        return JobHandle(self)
    }

    /// ``start(_:controlledBy:)`` on this thread, now, for a caller that
    /// runs on the job's queue already (a shared job's first consumer
    /// starts the run in its own body): one queue hop fewer. One level
    /// deeper (``Trampoline/Level``): such jobs may nest a million deep.
    func startHere(_ body: @escaping Body, controlledBy token: StateToken<Success>) {
        if let level = Trampoline.Level.enter() {
            run(body, controlledBy: token)
            level.leave()
        } else {
            pendingBody = body
            Trampoline.hold { [token] in token.state.runPendingBody(controlledBy: token) }
        }
    }

    /// ``start(_:)`` on this thread, now, for a caller that runs on the
    /// job's queue already (a transform's body starts its child): one queue
    /// hop fewer. One level deeper, as ``startHere(_:controlledBy:)``.
    func startHere(_ body: @escaping Body) {
        if let level = Trampoline.Level.enter() {
            run(body, controlledBy: nil)
            level.leave()
        } else {
            pendingBody = body
            Trampoline.hold { [self] in runPendingBody(controlledBy: nil) }
        }
    }

    /// Runs `step`, the next step of the job, in its place
    /// (``Job/Controller/finish(byRunning:)``), as a body: in the turn of
    /// the queue that runs this job's body on this thread now, after it,
    /// if one does (``Trampoline/runInTurn(of:_:)``: a loop of steps that
    /// finish at once takes no hop, and its stack stays flat), or else in a
    /// work item of its own, where the steps after it may run in turn.
    func runStep(_ step: @escaping @Sendable () -> Void) {
        if Trampoline.runInTurn(of: self, step) { return }
        Trampoline.enqueue({ [self] in Trampoline.runBody(of: self, step) }, on: queue)
    }

    /// ``startStep()``, then ``runStep(_:)`` for a step that is a job's
    /// body, to run with the controllers that share `token`
    /// (``Job/Controller/finish(byRunning:)``). The body waits in the
    /// state, as a start's does, and the work that runs it captures the
    /// token alone: it allocates nothing.
    func startStep(_ body: @escaping Body, controlledBy token: StateToken<Success>) {
        startStep()
        pendingBody = body
        if let turn = Trampoline.Turn(of: self) {
            turn.keep { [token] in token.state.runPendingStep(controlledBy: token) }
            return
        }
        Trampoline.enqueue(
            { [token] in
                Trampoline.runBody(of: token.state) { token.state.runPendingStep(controlledBy: token) }
            }, on: queue)
    }

    /// Runs the step ``startStep(_:controlledBy:)`` left, now, on this
    /// thread, unless the job has completed (been cancelled).
    private func runPendingStep(controlledBy token: StateToken<Success>) {
        // Not `take()`: a closure through generic code is thunked, an
        // allocation and a look-up of its type each time.
        let body = pendingBody
        pendingBody = nil
        guard let body, !isCompleted else { return }
        body(Job<Success>.Controller(token))
    }

    /// Runs the body a `start` left, now, on this thread, unless the job has
    /// completed (been cancelled): its controllers share `token`, or a
    /// fresh one.
    private func runPendingBody(controlledBy token: StateToken<Success>?) {
        let body = pendingBody
        pendingBody = nil
        guard let body else { return }
        run(body, controlledBy: token)
    }

    /// Runs `body`, now, on this thread, unless the job has completed
    /// (been cancelled): its controllers share `token`, or a fresh one.
    @inline(__always)
    private func run(_ body: Body, controlledBy token: StateToken<Success>?) {
        guard !isCompleted else { return }
        hasStarted.store(true, ordering: .relaxed)
        Trampoline.runBody(of: self) { body(Job<Success>.Controller(token ?? StateToken(self))) }
    }

    // MARK: Completing

    /// Reports `outcome` unless the job already completed.
    /// - Returns: `true` if this outcome won.
    @discardableResult
    func complete(with outcome: Outcome) -> Bool {
        switch outcome {
        case .success: finish(with: outcome, as: .completed)
        case .failure: finish(with: outcome, as: .failed)
        }
    }

    /// Reports `value` unless the job already completed: ``complete(with:)``
    /// without looking into the outcome, which unspecialized code pays for.
    /// `callsWithSuccess`, if any, calls a handler on the queue.
    /// - Returns: `true` if this outcome won.
    func succeed(with value: Success, calling callsWithSuccess: SuccessCall?) -> Bool {
        guard latch.win(.completed) else { return false }
        // What the job attached goes with its completion, after the
        // delivery, as a failure's does.
        let taken = attachments.existing?.takeOnCompletion(keeping: nil)
        defer { withExtendedLifetime(taken) {} }
        // Each case builds its `Result` where it calls the handler: in
        // unspecialized code, a `Result` held or captured looks up its
        // type's metadata at run time, each time, where a `Success`
        // captured does not.
        switch takeDelivery() {
        case .throughQueue(let handler):
            if let callsWithSuccess {
                callOnQueue { callsWithSuccess(handler, value) }
            } else {
                callOnQueue { handler(.success(value)) }
            }
        case .inline(let handler):
            if let callsWithSuccess {
                deliverInline(value, to: handler, calling: callsWithSuccess)
            } else {
                deliverInline(value, to: handler)
            }
        case .awaiting:
            if outcomeArrives() { continuation.take()?.resume(returning: value) }
        }
        return true
    }

    /// Makes `call`, the handler's, on the queue: as soon as the body
    /// returns, if the job completed in the body a queue runs on this
    /// thread (the same turn of the queue: one hop fewer), or else in a
    /// work item of its own.
    @inline(__always)
    private func callOnQueue(_ call: @escaping @Sendable () -> Void) {
        if !Trampoline.callAfterBody(of: self, call) {
            Trampoline.enqueue(call, on: queue)
        }
    }

    /// Calls `handler` with `value` (``succeed(with:)``), on this thread.
    /// Apart, so that the `Result` it builds is looked up only on this path.
    @inline(never)
    private func deliverInline(_ value: Success, to handler: @escaping Handler) {
        // To a combinator that holds this job, which may be held by
        // another, a million deep (``Trampoline/Level``).
        if let level = Trampoline.Level.enter() {
            handler(.success(value))
            level.leave()
        } else {
            Trampoline.hold { handler(.success(value)) }
        }
    }

    /// ``deliverInline(_:to:)`` through `call`, which builds the `Result`
    /// where `Success` is known.
    private func deliverInline(_ value: Success, to handler: @escaping Handler, calling call: @escaping SuccessCall) {
        if let level = Trampoline.Level.enter() {
            call(handler, value)
            level.leave()
        } else {
            Trampoline.hold { call(handler, value) }
        }
    }

    /// Reports `error` unless the job already completed.
    /// - Returns: `true` if this outcome won.
    func fail(with error: any Error) -> Bool {
        finish(with: .failure(error), as: .failed)
    }

    @usableFromInline
    @discardableResult
    func cancel() -> Bool {
        finish(with: .failure(CancellationError()), as: .cancelled)
    }

    /// Fails the job with ``JobError/abandoned`` unless it completed: the
    /// last controller is gone.
    @inline(__always)
    func abandon() {
        if isCompleted { return }
        failAbandoned()
    }

    /// Apart from ``abandon()``: called from a generic deinit, it runs
    /// unspecialized, and building a `Result` there looks up its type
    /// metadata at run time, which the common case (completed) must not pay.
    @inline(never)
    private func failAbandoned() {
        _ = fail(with: JobError.abandoned)
    }

    /// Reports `outcome` unless the job already completed; `phase` says
    /// how it completes the job, so that success does not look into it.
    private func finish(with outcome: Outcome, as phase: OutcomeLatch.Phase) -> Bool {
        guard latch.win(phase) else { return false }
        // A failure's error is kept for snapshots, so it makes the table.
        var taken = AttachmentEntries()
        if phase == .failed, case .failure(let error) = outcome {
            taken = table.takeOnCompletion(keeping: error)
        } else if let table = attachments.existing {
            taken = table.takeOnCompletion(keeping: nil)
        }
        if phase == .cancelled {
            for (_, attachment) in taken { attachment.cancelWithOwner() }
        }
        switch takeDelivery() {
        case .throughQueue(let handler):
            callOnQueue { handler(outcome) }
        case .inline(let handler):
            // To a combinator that holds this job, which may be held by
            // another, a million deep (``Trampoline/Level``).
            if let level = Trampoline.Level.enter() {
                handler(outcome)
                level.leave()
            } else {
                Trampoline.hold { handler(outcome) }
            }
        case .awaiting:
            if outcomeArrives() { continuation.take()?.resume(with: outcome) }
        }
        return true
    }

    /// Where the outcome goes, taken by the thread whose outcome won the
    /// latch: it alone touches the delivery now.
    private func takeDelivery() -> Delivery.Pending {
        let pending: Delivery.Pending =
            switch delivery {
            case .throughQueue(let handler): .throughQueue(handler)
            case .inline(let handler): .inline(handler)
            case .awaiting: .awaiting
            case .delivered: preconditionFailure("Internal inconsistency: a job's outcome was delivered twice")
            }
        delivery = .delivered
        return pending
    }

    /// For an awaited job, the outcome arrives: whether the task handed its
    /// continuation over, for the outcome to resume it. Before the task
    /// handed it over, it resumes itself (``handOver(_:)`` fails).
    private func outcomeArrives() -> Bool {
        arrivals.exchange(.outcome, ordering: .acquiringAndReleasing) == .continuation
    }

    // MARK: Attachments

    /// Holds `attachment` while the job runs (a name, for good). An
    /// `onCancel` block or a node attached to a cancelled job is cancelled
    /// at once; anything attached to a job that completed otherwise is
    /// dropped.
    /// - Returns: The key `attachment` is kept under (`key`, or a new one),
    ///   if it is kept.
    @discardableResult
    func attach(_ attachment: Attachment, key: Int? = nil) -> Int? {
        let (decision, kept): (AttachDecision, Int?) =
            switch latch.current {
            case .pending:
                attachments.withMade(by: { AttachmentTable() }) { table in
                    table.attach(attachment, key: key) {
                        switch latch.currentInOrder {
                        case .pending: .kept
                        case .cancelled: .cancelNow
                        case .completed, .failed: .drop
                        }
                    }
                }
            case .cancelled: (.cancelNow, nil)
            case .completed, .failed: (.drop, nil)
            }
        if decision == .cancelNow { attachment.cancelWithOwner() }
        return kept
    }

    /// The job goes on to the job that finishes it in its place, the next
    /// step of a loop: see ``AttachmentList/startStep()``. The step that
    /// ends ran a child (the `then`'s first job), so the job has its table.
    func startStep() {
        attachments.withExisting { $0.startStep() }
    }

    /// The attachment table, made now if it was not.
    private var table: AttachmentTable {
        attachments.made { AttachmentTable() }
    }

    /// Performs `child` on this job's queue as a child of this job: it is
    /// cancelled when this job is cancelled, and `handler` is called on the
    /// thread that completes it, or through the queue if `hopsToQueue`.
    func performChild<Child>(
        _ child: Job<Child>,
        hopsToQueue: Bool,
        startsHere: Bool,
        then handler: @escaping @Sendable (Result<Child, any Error>) -> Void
    ) -> JobState<Child> {
        attachments.withMade(by: { AttachmentTable() }) { table in
            table.perform(
                child, on: queue, hopsToQueue: hopsToQueue, startsHere: startsHere,
                keep: { attach($0, key: $1) }, then: handler)
        }
    }

    /// ``performChild(_:hopsToQueue:startsHere:then:)`` for a
    /// transform or a loop, whose child starts here and whose state and
    /// token `makeToken` makes: nothing to return, so no reference to
    /// retain at every step of a loop.
    func performChildHere<Child>(
        _ child: Job<Child>,
        making makeToken: @escaping JobState<Child>.MakeToken,
        then handler: @escaping @Sendable (Result<Child, any Error>) -> Void
    ) {
        attachments.withMade(by: { AttachmentTable() }) { table in
            _ = table.perform(
                child, on: queue, startsHere: true, making: makeToken, keep: { attach($0, key: $1) }, then: handler)
        }
    }

    // MARK: Snapshots

    /// The job and the children it waits on, as they are now. Safe from any
    /// thread; `onDescribe` blocks run here, outside the lock.
    func snapshot() -> JobSnapshot {
        // The phase first, then the attachments, which are never older than
        // it: a job keeps its names once it completed. Read the other way
        // round, a thread held between the two reads could pair the
        // attachments of a job not yet started with the phase of one that
        // completed since: a finished job without its name.
        let phase = latch.current
        let started = hasStarted.load(ordering: .relaxed)
        let entries = attachments.existing?.entries ?? .init()
        var failure: (any Error)? = nil
        for case (_, .failure(let error)) in entries.attachments { failure = error }
        let state: JobSnapshot.State =
            switch phase {
            case .pending: started ? .running : .waitingToStart
            case .completed: .finished
            case .cancelled: .cancelled
            // The error is kept just after the latch is won: until then,
            // the job is still completing.
            case .failed: failure.map { .failed($0) } ?? .running
            }
        return JobSnapshot(state: state, entries: entries).collapsingWrapper()
    }
}

extension JobState: JobNode {
    func cancelWithOwner() {
        cancel()
    }

    /// Adds this job to `owner`'s children.
    func describe(into owner: inout JobSnapshot) {
        owner.children.append(SnapshotWalk.child { self.snapshot() })
    }
}

/// Who has come, of the two that meet over an awaited job's continuation.
private enum HandOver: UInt8, AtomicRepresentable, Sendable {
    case nobody
    /// The task handed its continuation over.
    case continuation
    /// The job completed.
    case outcome
}
