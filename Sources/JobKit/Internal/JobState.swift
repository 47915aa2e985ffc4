import Synchronization

/// What a handle or a parent needs of a job, whatever its value type.
protocol JobCancelling: AnyObject, Sendable {
    /// Completes the job with `CancellationError` unless it already completed.
    @discardableResult func cancel() -> Bool
    /// Whether the job has completed, by any means.
    var isCompleted: Bool { get }
    /// The job and the children it waits on, as they are now.
    func snapshot() -> JobSnapshot
}

/// Something a running job holds that is cancelled with it and shows in
/// its snapshot: a child job's state, or a combinator's run (a group's,
/// a sequence's, a timeout's or a retry's timer).
protocol JobNode: AnyObject, Sendable {
    /// The job that holds this node was cancelled.
    func cancelWithOwner()
    /// Adds what this node knows to the snapshot of the job that holds it:
    /// a child job adds itself as a child; a combinator's run says which
    /// combinator the job is, and adds its own children.
    func describe(into owner: inout JobSnapshot)
}

/// What a running performance holds besides its handler, kept in its
/// lock: what to cancel with it, and what its snapshot shows.
enum Attachment: Sendable {
    /// An `onCancel` block.
    case onCancel(@Sendable () -> Void)
    /// A child job or a combinator's run.
    case node(any JobNode)
    /// The name given with `named(_:)`; kept after the job completed.
    case name(String)
    /// What the job says about its progress, asked when a snapshot is taken.
    case detail(@Sendable () -> String)
    /// The error the job failed with (`cancel` aside); kept after it
    /// completed, for its snapshots.
    case failure(any Error)

    /// The job that holds this attachment was cancelled: an `onCancel`
    /// block runs, a node is cancelled, the rest stays as it is.
    func cancelWithOwner() {
        switch self {
        case .onCancel(let run): run()
        case .node(let node): node.cancelWithOwner()
        case .name, .detail, .failure: break
        }
    }
}

/// The lock-protected part of a performance's state.
///
/// It is deliberately not generic: a `JobState<Success>` is destroyed by
/// its (unspecialized) generic deinit, and a lock around a type that
/// depends on `Success` makes that deinit look up type metadata at run
/// time, which cost more than the rest of a child's bookkeeping together.
struct JobStatus: Sendable {
    var attachments: [(key: Int, attachment: Attachment)] = []
    var nextKey = 0
}

/// The state of one performance of a job: the outcome latch, the handler
/// (or the continuation of the task that awaits the job), and the
/// cancellation handlers.
///
/// The first outcome wins; later ones are dropped. On completion every
/// closure the state held is released, so objects captured by them are
/// freed. Handlers and `onCancel` blocks run after the lock is released.
///
/// A performance costs two allocations: this state, and the
/// ``StateToken`` its body's controllers share, made when the body
/// starts (an awaited job's, when the body is enqueued). The enqueued work
/// captures one of the two alone, so it is the closure's context and the
/// closure allocates nothing.
///
/// Usable from inlinable code for ``Job/value(on:isolation:)``, which the
/// caller's module specializes.
@usableFromInline
final class JobState<Success: Sendable>: JobCancelling {
    typealias Outcome = Result<Success, any Error>
    typealias Handler = @Sendable (Outcome) -> Void
    @usableFromInline typealias Body = @Sendable (Job<Success>.Controller) -> Void

    // The small stored properties sit together, so that they share a word.

    /// The queue the job runs on; children run on it too.
    let queue: any JobQueue
    private let lock = Lock(JobStatus())

    /// The outcome latch, without a lock: `pending` until the first outcome
    /// wins it by compare-and-exchange, then `completed`, `failed` or
    /// `cancelled` for good. `lock` is then taken only to collect
    /// attachments, when some were made (`hasAttachments`), and to keep a
    /// failure's error for snapshots, so a child that attaches nothing
    /// finishes with one atomic operation. Both atomics are sequentially
    /// consistent: an attachment stores `hasAttachments` and then reads
    /// `phase`, the winner sets `phase` and then reads `hasAttachments`, so
    /// at least one of the two sees the other and no attachment is lost.
    private let phase = Atomic<UInt8>(Phase.pending)
    private let hasAttachments = Atomic<Bool>(false)
    /// Whether the body has run, for snapshots ("waiting to start" or
    /// "running"); nothing else reads it.
    private let hasStarted = Atomic<Bool>(false)
    /// Whether the handler is called through `queue` (public performances)
    /// or inline, on the completing thread (combinators' own children).
    private let hopsToQueue: Bool
    /// For an awaited job, who has come of the two that meet over the
    /// continuation: the task that hands it over, and the outcome that
    /// resumes it (``HandOver``). The second to come resumes the task.
    private let arrivals = Atomic<UInt8>(HandOver.nobody)

    // The next three are not behind `lock`, and need not be:
    // - `handler` is set in `init`, before the state
    //   is shared, and afterwards touched only by the one thread whose
    //   outcome won the latch in `finish(with:failing:cancelling:)`.
    // - `continuation` is written by the awaiting task before it publishes
    //   it through `arrivals` (release), and read by the latch's winner
    //   only after `arrivals` showed it published (acquire); a task that
    //   came second clears it, and the winner then never reads it.
    // - `pendingBody` is set by `start(_:)` or `start(_:controlledBy:)`
    //   before it enqueues the work that takes it, and that work runs
    //   once; nothing else touches it.
    private nonisolated(unsafe) var handler: Handler?  // owned by the latch's winner
    private nonisolated(unsafe) var continuation: UnsafeContinuation<Success, any Error>?  // handed over
    private nonisolated(unsafe) var pendingBody: Body?  // handed to the one enqueued start

    /// A performance whose handler is called through `queue` or inline.
    init(queue: any JobQueue, hopsToQueue: Bool, handler: @escaping Handler) {
        self.queue = queue
        self.hopsToQueue = hopsToQueue
        self.handler = handler
    }

    /// A performance awaited by a task, which hands over its continuation
    /// with ``start(_:resuming:)``. It may be cancelled before that.
    @usableFromInline
    init(awaitingOn queue: any JobQueue) {
        self.queue = queue
        self.hopsToQueue = false
    }

    var isCompleted: Bool {
        phase.load(ordering: .acquiring) != Phase.pending
    }

    var isCancelled: Bool {
        phase.load(ordering: .acquiring) == Phase.cancelled
    }

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
            expected: HandOver.nobody, desired: HandOver.continuation, ordering: .acquiringAndReleasing
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

    /// Runs the body a `start` left, now, on this thread, unless the job has
    /// completed (been cancelled): its controllers share `token`, or a
    /// fresh one.
    private func runPendingBody(controlledBy token: StateToken<Success>?) {
        let body = pendingBody
        pendingBody = nil
        guard let body, !isCompleted else { return }
        hasStarted.store(true, ordering: .relaxed)
        body(Job<Success>.Controller(token ?? StateToken(self)))
    }

    /// Reports `outcome` unless the job already completed.
    /// - Returns: `true` if this outcome won.
    @discardableResult
    func complete(with outcome: Outcome) -> Bool {
        switch outcome {
        case .success: finish(with: outcome, failing: false, cancelling: false)
        case .failure: finish(with: outcome, failing: true, cancelling: false)
        }
    }

    /// Reports `value` unless the job already completed: ``complete(with:)``
    /// without looking into the outcome, which unspecialized code pays for.
    /// - Returns: `true` if this outcome won.
    func succeed(with value: Success) -> Bool {
        finish(with: .success(value), failing: false, cancelling: false)
    }

    /// Reports `error` unless the job already completed.
    /// - Returns: `true` if this outcome won.
    func fail(with error: any Error) -> Bool {
        finish(with: .failure(error), failing: true, cancelling: false)
    }

    @usableFromInline
    @discardableResult
    func cancel() -> Bool {
        finish(with: .failure(CancellationError()), failing: false, cancelling: true)
    }

    /// Fails the job with ``JobError/abandoned`` unless it completed: the
    /// last controller is gone.
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

    /// Reports `outcome` unless the job already completed; `failing` says
    /// whether it is a failure (other than the cancellation), so that
    /// success does not look into it.
    private func finish(with outcome: Outcome, failing: Bool, cancelling: Bool) -> Bool {
        let won = phase.compareExchange(
            expected: Phase.pending,
            desired: cancelling ? Phase.cancelled : failing ? Phase.failed : Phase.completed,
            ordering: .sequentiallyConsistent
        ).exchanged
        guard won else { return false }
        var attachments: [(key: Int, attachment: Attachment)] = []
        if failing || hasAttachments.load(ordering: .sequentiallyConsistent) {
            let failure: (any Error)? =
                if failing, case .failure(let error) = outcome { error } else { nil }
            attachments = lock.withLock { $0.takeAttachments(keeping: failure) }
        }
        // This thread's outcome won: it alone touches the handlers now.
        if cancelling {
            for (_, attachment) in attachments { attachment.cancelWithOwner() }
        }
        if let handler {
            self.handler = nil
            if hopsToQueue {
                Trampoline.enqueue({ handler(outcome) }, on: queue)
            } else {
                handler(outcome)
            }
        } else if arrivals.exchange(HandOver.outcome, ordering: .acquiringAndReleasing) == HandOver.continuation {
            // An awaited job (it has no handler) whose task handed its
            // continuation over; before that, the task resumes itself.
            let continuation = continuation.take()
            continuation?.resume(with: outcome)
        }
        return true
    }

    /// Holds `attachment` while the job runs (a name, for good). An
    /// `onCancel` block or a node attached to a cancelled job is cancelled
    /// at once; anything attached to a job that completed otherwise is
    /// dropped.
    func attach(_ attachment: Attachment, key: Int? = nil) {
        let decision = lock.withLock { status -> AttachDecision in
            hasAttachments.store(true, ordering: .sequentiallyConsistent)
            let phase = phase.load(ordering: .sequentiallyConsistent)
            if phase != Phase.pending { return phase == Phase.cancelled ? .cancelNow : .drop }
            status.append(attachment, key: key)
            return .kept
        }
        if decision == .cancelNow { attachment.cancelWithOwner() }
    }

    /// Forgets an attachment that is no longer needed (a child finished).
    func detach(_ key: Int) {
        let removed = lock.withLock { $0.remove(key) }
        _ = removed  // released here, outside the lock
    }

    /// The job and the children it waits on, as they are now. Safe from any
    /// thread; `onDescribe` blocks run here, outside the lock.
    func snapshot() -> JobSnapshot {
        // The phase first, then the attachments, which are never older than
        // it: a job keeps its names once it completed. Read the other way
        // round, a thread held between the two reads could pair the
        // attachments of a job not yet started with the phase of one that
        // completed since: a finished job without its name.
        let phase = phase.load(ordering: .acquiring)
        let started = hasStarted.load(ordering: .relaxed)
        let attachments = lock.withLock { $0.attachments }
        var failure: (any Error)? = nil
        for case (_, .failure(let error)) in attachments { failure = error }
        let state: JobSnapshot.State =
            switch phase {
            case Phase.pending: started ? .running : .waitingToStart
            case Phase.completed: .finished
            case Phase.cancelled: .cancelled
            // The error is kept just after the latch is won: until then,
            // the job is still completing.
            default: failure.map { .failed($0) } ?? .running
            }
        return JobSnapshot(state: state, attachments: attachments).collapsingWrapper()
    }

    /// Performs `child` on this job's queue as a child of this job: it is
    /// cancelled when this job is cancelled, and `handler` is called on the
    /// thread that completes it, or through the queue if `hopsToQueue`.
    func performChild<Child>(
        _ child: Job<Child>,
        hopsToQueue: Bool,
        then handler: @escaping @Sendable (Result<Child, any Error>) -> Void
    ) -> JobState<Child> {
        let key = reserveKey()
        let childState = JobState<Child>(queue: queue, hopsToQueue: hopsToQueue) { [self] outcome in
            detach(key)
            handler(outcome)
        }
        attach(.node(childState), key: key)
        childState.start(child.body)
        return childState
    }

    private func reserveKey() -> Int {
        lock.withLock { $0.reserveKey() }
    }
}

/// What becomes of an attachment offered to a job.
enum AttachDecision: Sendable {
    /// It is kept while the job runs.
    case kept
    /// Cancel it now: the job was cancelled.
    case cancelNow
    /// Drop it: the job completed otherwise.
    case drop
}

extension JobStatus {
    /// Keeps `attachment` under `key`, or under the next key.
    mutating func append(_ attachment: Attachment, key: Int?) {
        let key = key ?? nextKey
        if key == nextKey { nextKey += 1 }
        attachments.append((key, attachment))
    }

    /// A key for an attachment to be kept later.
    mutating func reserveKey() -> Int {
        defer { nextKey += 1 }
        return nextKey
    }

    /// Removes the attachment kept under `key` and returns it. Children
    /// finish mostly in the order they started, so the search starts from
    /// the end.
    mutating func remove(_ key: Int) -> Attachment? {
        guard let index = attachments.lastIndex(where: { $0.key == key }) else { return nil }
        return attachments.remove(at: index).attachment
    }

    /// Takes every attachment out, for the job has completed, and keeps
    /// what snapshots of the completed job still show: its names, and
    /// `failure`, the error it failed with, if any.
    mutating func takeAttachments(keeping failure: (any Error)?) -> [(key: Int, attachment: Attachment)] {
        let taken = attachments
        let isName = { (entry: (key: Int, attachment: Attachment)) in
            if case .name = entry.attachment { true } else { false }
        }
        // A named job that holds nothing else keeps its list as it is.
        if failure == nil && taken.allSatisfy(isName) { return [] }
        attachments = taken.filter(isName)
        if let failure { attachments.append((nextKey, .failure(failure))) }
        return taken
    }
}

extension JobSnapshot {
    /// A snapshot of a job in `state` that holds `attachments`: its name,
    /// its detail (asked now) and what its nodes describe.
    init(state: State, attachments: [(key: Int, attachment: Attachment)]) {
        self.init(state: state)
        for (_, attachment) in attachments {
            switch attachment {
            case .onCancel: break
            case .node(let node): node.describe(into: &self)
            case .name(let name): if self.name == nil { self.name = name }
            case .detail(let describe): self.detail = describe()
            case .failure: break
            }
        }
    }

    /// This snapshot as a reader wants it. A pending job that is nothing
    /// but a wrapper around the one child it runs (`then`, `map`,
    /// `recover`, `mapError`, unnamed) shows as that child; a pending job
    /// that waits on one anonymous job, with nothing to say and no
    /// children, shows without it (an uploader's request under "upload
    /// photo-1.jpg"): it is where that job is stuck.
    func collapsingWrapper() -> JobSnapshot {
        guard state.isPending, kind == nil, children.count == 1 else { return self }
        if name == nil && detail == nil { return children[0] }
        var snapshot = self
        if children[0].isAnonymousLeaf { snapshot.children = [] }
        return snapshot
    }
}

extension JobState: JobNode {
    func cancelWithOwner() {
        cancel()
    }

    /// Adds this job to `owner`'s children.
    func describe(into owner: inout JobSnapshot) {
        owner.children.append(snapshot())
    }
}

/// Who has come, of the two that meet over an awaited job's continuation.
private enum HandOver {
    static let nobody: UInt8 = 0
    /// The task handed its continuation over.
    static let continuation: UInt8 = 1
    /// The job completed.
    static let outcome: UInt8 = 2
}

/// The values of `JobState`'s lock-free latch.
private enum Phase {
    static let pending: UInt8 = 0
    static let completed: UInt8 = 1
    static let cancelled: UInt8 = 2
    static let failed: UInt8 = 3
}
