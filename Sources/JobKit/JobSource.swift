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
///   gets the outcome on its own queue. A performance started after the
///   source completed gets it at once, on its queue.
/// - Cancelling a performance that waits cancels that performance only:
///   the source and the others go on waiting.
/// - A source released before it completed fails the jobs that wait for it
///   with ``JobError/abandoned``, as a job's body that released its
///   controller does, rather than leaving them waiting forever.
///
/// A performance that waits shows in snapshots and stall reports under
/// the source's name: "confirm deletion: source (running)".
public final class JobSource<Success: Sendable>: Sendable {
    private let state: SourceState<Success>

    /// Creates a source that has not completed.
    ///
    /// - Parameter name: What snapshots and stall reports call the jobs
    ///   that wait for it, or `nil` for none ("source (running)").
    public init(named name: String? = nil) {
        state = SourceState(name: name)
    }

    deinit {
        state.complete(with: .failure(JobError.abandoned))
    }

    /// A job that waits for the source's outcome and completes with it.
    ///
    /// Each performance waits on its own, and holds the source's outcome
    /// only, not the source: once every ``JobSource`` reference is gone
    /// before the source completed, the jobs fail with
    /// ``JobError/abandoned``.
    public var job: Job<Success> {
        let state = self.state
        return Job { controller in state.wait(controller) }
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
final class SourceState<Success: Sendable>: Sendable {
    typealias Outcome = Result<Success, any Error>

    private struct State: Sendable {
        var outcome: Outcome?
        var waiters = Waiters<Success>()
    }

    let name: String?
    private let state = Lock(State())

    init(name: String?) {
        self.name = name
    }

    var isCompleted: Bool {
        state.withLock { $0.outcome != nil }
    }

    /// Keeps `outcome` unless the source has one, and hands it to every
    /// performance waiting, each on its queue.
    /// - Returns: `true` if this was the source's outcome.
    @discardableResult
    func complete(with outcome: Outcome) -> Bool {
        let waiting = state.withLock { state -> [Job<Success>.Controller]? in
            guard state.outcome == nil else { return nil }
            state.outcome = outcome
            return state.waiters.takeAll()
        }
        guard let waiting else { return false }
        for controller in waiting { controller.complete(onQueueWith: outcome) }
        return true
    }

    /// A performance of the source's job: it completes now with the
    /// outcome, if there is one, or waits for it.
    func wait(_ controller: Job<Success>.Controller) {
        if let name { controller.token.attach(.name(name)) }
        let found = state.withLock { state -> Found<Success> in
            if let outcome = state.outcome { return .outcome(outcome) }
            return .waiting(state.waiters.add(controller))
        }
        switch found {
        case .outcome(let outcome):
            controller.complete(with: outcome)
        case .waiting(let id):
            // Attached after it waits: a job cancelled meanwhile cancels
            // the node at once, and it leaves.
            controller.token.attach(SourceWait(source: self, id: id))
        }
    }

    /// The performance numbered `id` was cancelled: it waits no more.
    func leave(_ id: Int) {
        state.withLock { $0.waiters.remove(id) }
    }
}

/// What a performance of a source's job found: the outcome, or its number
/// among those that wait.
private enum Found<Success: Sendable> {
    case outcome(Result<Success, any Error>)
    case waiting(Int)
}

/// A performance waiting for a ``JobSource``: a cancel makes it leave the
/// source, and its snapshots say it waits for one.
private final class SourceWait<Success: Sendable>: JobNode {
    let source: SourceState<Success>
    let id: Int

    init(source: SourceState<Success>, id: Int) {
        self.source = source
        self.id = id
    }

    func cancelWithOwner() {
        source.leave(id)
    }

    func describe(into owner: inout JobSnapshot) {
        owner.kind = .source
    }
}
