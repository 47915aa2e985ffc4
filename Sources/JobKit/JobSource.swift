/// An outcome made outside any job, completed once from anywhere, and
/// waited for by any number of jobs: PromiseKit's `Promise.pending()`,
/// swift-nio's `EventLoopPromise`.
///
/// Use one to bring an answer that no job produces (a delegate's callback,
/// the user's tap on "OK") into jobs that wait for it:
///
/// ```swift
/// let confirmation = JobSource<Bool>(named: "confirm deletion")
/// dialog.onAnswer = { confirmed in confirmation.finish(with: confirmed) }
///
/// let deletion = confirmation.job.then { confirmed in
///     confirmed ? deleting(draft) : .succeeded(())
/// }
/// ```
///
/// The first of ``finish(with:)``, ``fail(with:)`` or
/// ``complete(with:)-(Job<Success>.Outcome)`` wins; later calls return
/// `false` and do nothing, as a controller's do. ``job`` waits for that
/// outcome:
///
/// - Any number of performances of ``job`` wait, on any queues, and each
///   one's handler is called on its own queue. They complete on the
///   thread that completes the source, as a job whose body reports from
///   another thread does. A performance started after the source
///   completed completes at once, on its queue.
/// - Cancelling a performance that waits cancels that performance only:
///   the source and the others go on waiting.
/// - A source released before it completed fails the jobs that wait for it
///   with ``JobError/abandoned``, on the thread that released it, as a
///   job's body that released its controller does, rather than leaving
///   them waiting forever. A job that waits for a source and holds it
///   (a handler that captures it) keeps it alive: then nothing is
///   released, and the job waits until the source completes.
///
/// A performance that waits shows in snapshots and stall reports under
/// the source's name: "confirm deletion: source (running)".
public final class JobSource<Success: Sendable>: Sendable {
    private let state: SourceState<Success>

    /// A job that waits for the source's outcome and completes with it.
    ///
    /// Each performance waits on its own, and holds the source's outcome
    /// only, not the source: once every ``JobSource`` reference is gone
    /// before the source completed, the jobs fail with
    /// ``JobError/abandoned``.
    public let job: Job<Success>

    /// Creates a source that has not completed.
    ///
    /// - Parameter name: What snapshots and stall reports call the jobs
    ///   that wait for it, or `nil` for none ("source (running)").
    public init(named name: String? = nil) {
        let state = SourceState<Success>(name: name)
        self.state = state
        job = Job { controller in state.wait(controller) }
    }

    deinit {
        if !state.isCompleted { state.abandon() }
    }

    /// Whether the source has completed: finished, failed or abandoned.
    public var isCompleted: Bool {
        state.isCompleted
    }

    /// Finishes the source with `value`.
    /// - Returns: `true` if this was the source's outcome, `false` if it
    ///   had already completed.
    @discardableResult
    public func finish(with value: Success) -> Bool {
        state.complete(with: .success(value))
    }

    /// Fails the source with `error`.
    /// - Returns: `true` if this was the source's outcome, `false` if it
    ///   had already completed.
    @discardableResult
    public func fail(with error: any Error) -> Bool {
        state.complete(with: .failure(error))
    }

    /// Completes the source with `outcome`, a value or an error.
    /// - Returns: `true` if this was the source's outcome, `false` if it
    ///   had already completed.
    @discardableResult
    public func complete(with outcome: Job<Success>.Outcome) -> Bool {
        state.complete(with: outcome)
    }

    /// Completes the source with a `Result` whose error type is typed, as
    /// the completion handlers of many APIs are.
    /// - Returns: `true` if this was the source's outcome, `false` if it
    ///   had already completed.
    @discardableResult
    public func complete<Failure: Error>(with result: Result<Success, Failure>) -> Bool {
        state.complete(with: result.mapError { $0 })
    }
}

extension JobSource where Success == Void {
    /// Finishes a source that carries no value.
    /// - Returns: `true` if this was the source's outcome, `false` if it
    ///   had already completed.
    @discardableResult
    public func finish() -> Bool {
        finish(with: ())
    }
}

/// What a ``JobSource``'s jobs share: its outcome once it has one, and
/// until then the performances waiting for it. The source's object holds
/// it, and so does each performance of its job, which the object's deinit
/// fails as abandoned if it had not completed.
final class SourceState<Success: Sendable>: Waited {
    typealias Outcome = Result<Success, any Error>

    let name: String?
    private let state = Lock(SourceLockState())
    /// Written once, under `state`'s lock, as `isCompleted` is set; read
    /// under that lock once it is.
    private nonisolated(unsafe) var outcome: Outcome?  // guarded by `state`'s lock

    init(name: String?) {
        self.name = name
    }

    var isCompleted: Bool {
        state.withLock { $0.isCompleted }
    }

    /// Fails the source with ``JobError/abandoned``: its object is gone.
    /// Apart, for a deinit runs unspecialized, and building a `Result`
    /// there looks its type up, which a completed source need not pay.
    @inline(never)
    func abandon() {
        complete(with: .failure(JobError.abandoned))
    }

    /// Keeps `outcome` unless the source has one, and completes every
    /// performance waiting with it, here.
    /// - Returns: `true` if this was the source's outcome.
    @discardableResult
    func complete(with outcome: Outcome) -> Bool {
        let waiting = state.withLock { state -> [ControllerToken]? in
            guard !state.isCompleted else { return nil }
            state.isCompleted = true
            self.outcome = outcome
            return state.waiters.takeAll()
        }
        guard let waiting else { return false }
        for token in waiting { Job<Success>.Controller(token).complete(with: outcome) }
        return true
    }

    /// A performance of the source's job: it completes now with the
    /// outcome, if there is one, or waits for it.
    func wait(_ controller: Job<Success>.Controller) {
        if let name { controller.token.attach(.name(name)) }
        let id = state.withLock { state -> Int? in
            state.isCompleted ? nil : state.waiters.add(controller.shared)
        }
        guard let id else {
            // Completed: the outcome is written, and no longer changes.
            controller.complete(with: state.withLock { _ in outcome! })
            return
        }
        // Attached after it waits: a job cancelled meanwhile cancels the
        // node at once, and it leaves.
        controller.token.attach(.node(WaitNode(self, number: 0, id: id)))
    }

    func leave(_ id: Int, from _: Int) {
        // The waiter's token goes with the lock released: it may be the
        // last reference to its performance's state.
        let left = state.withLock { $0.waiters.remove(id) }
        _ = left
    }

    func describe(_: Int, into owner: inout JobSnapshot) {
        owner.kind = .source
    }
}

/// What a source's lock protects. Not nested in ``SourceState``, where it
/// would be generic, and its type looked up on every call.
private struct SourceLockState: Sendable {
    var isCompleted = false
    var waiters = Waiters()
}
