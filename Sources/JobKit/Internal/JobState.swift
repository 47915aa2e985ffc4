/// What a handle or a parent needs of a job, whatever its value type.
package protocol JobCancelling: AnyObject, Sendable {
    /// Completes the job with `CancellationError` unless it already completed.
    @discardableResult func cancel() -> Bool
    /// Whether the job has completed, by any means.
    var isCompleted: Bool { get }
}

/// The state of one performance of a job: the outcome latch, the handler,
/// and the cancellation handlers.
///
/// The first outcome wins; later ones are dropped. On completion every
/// closure the state held is released, so objects captured by them are
/// freed. Handlers and `onCancel` blocks run after the lock is released.
final class JobState<Success: Sendable>: JobCancelling {
    typealias Outcome = Result<Success, any Error>
    typealias Handler = @Sendable (Outcome) -> Void
    typealias CancelHandler = @Sendable () -> Void

    private struct Inner: Sendable {
        var isCompleted = false
        var isCancelled = false
        var handler: Handler?
        var cancelHandlers: [(key: Int, run: CancelHandler)] = []
        var nextKey = 0
    }

    /// The queue the job runs on; children run on it too.
    let queue: any JobQueue
    /// Whether the handler is called through `queue` (public performances)
    /// or inline, on the completing thread (combinators' own children).
    private let hopsToQueue: Bool
    private let lock: Lock<Inner>

    init(queue: any JobQueue, hopsToQueue: Bool, handler: @escaping Handler) {
        self.queue = queue
        self.hopsToQueue = hopsToQueue
        self.lock = Lock(Inner(handler: handler))
    }

    var isCompleted: Bool { lock.withLock { $0.isCompleted } }
    var isCancelled: Bool { lock.withLock { $0.isCancelled } }

    /// Enqueues `body` on the queue with a fresh controller, unless the job
    /// has completed (been cancelled) by the time the work runs.
    func start(_ body: @escaping @Sendable (Job<Success>.Controller) -> Void) {
        let token = ControllerToken(self)
        queue.enqueue {
            if token.state.isCompleted { return }
            body(Job<Success>.Controller(token: token))
        }
    }

    /// Reports `outcome` unless the job already completed.
    /// - Returns: `true` if this outcome won.
    @discardableResult
    func complete(with outcome: Outcome) -> Bool {
        finish(with: outcome, cancelling: false)
    }

    @discardableResult
    func cancel() -> Bool {
        finish(with: .failure(CancellationError()), cancelling: true)
    }

    private func finish(with outcome: Outcome, cancelling: Bool) -> Bool {
        let taken = lock.withLock { inner -> (Handler?, [(key: Int, run: CancelHandler)])? in
            guard !inner.isCompleted else { return nil }
            inner.isCompleted = true
            inner.isCancelled = cancelling
            defer {
                inner.handler = nil
                inner.cancelHandlers = []
            }
            return (inner.handler, inner.cancelHandlers)
        }
        guard let (handler, cancelHandlers) = taken else { return false }
        if cancelling {
            for entry in cancelHandlers { entry.run() }
        }
        if let handler {
            if hopsToQueue {
                queue.enqueue { handler(outcome) }
            } else {
                handler(outcome)
            }
        }
        return true
    }

    /// Registers `handler` to run when the job is cancelled. It runs at once
    /// if the job is already cancelled, and never if it completed otherwise.
    func addCancelHandler(_ handler: @escaping CancelHandler) {
        addCancelHandler(key: nil, handler)
    }

    private func addCancelHandler(key: Int?, _ handler: @escaping CancelHandler) {
        let decision = lock.withLock { inner -> CancelHandlerDecision in
            if inner.isCompleted { return inner.isCancelled ? .runNow : .drop }
            let key = key ?? inner.nextKey
            if key == inner.nextKey { inner.nextKey += 1 }
            inner.cancelHandlers.append((key, handler))
            return .kept
        }
        if decision == .runNow { handler() }
    }

    /// Forgets a cancel handler that is no longer needed (a child finished).
    func removeCancelHandler(_ key: Int) {
        let removed = lock.withLock { inner -> CancelHandler? in
            guard let index = inner.cancelHandlers.lastIndex(where: { $0.key == key }) else { return nil }
            return inner.cancelHandlers.remove(at: index).run
        }
        _ = removed  // released here, outside the lock
    }

    /// Performs `child` on this job's queue as a child of this job: it is
    /// cancelled when this job is cancelled, and `handler` is called inline
    /// on the thread that completes it (no queue hop).
    @discardableResult
    func performChild<Child>(
        _ child: Job<Child>,
        then handler: @escaping @Sendable (Result<Child, any Error>) -> Void
    ) -> JobState<Child> {
        performChild(child, hopsToQueue: false, then: handler)
    }

    func performChild<Child>(
        _ child: Job<Child>,
        hopsToQueue: Bool,
        then handler: @escaping @Sendable (Result<Child, any Error>) -> Void
    ) -> JobState<Child> {
        let key = reserveKey()
        let childState = JobState<Child>(queue: queue, hopsToQueue: hopsToQueue) { [self] outcome in
            removeCancelHandler(key)
            handler(outcome)
        }
        addCancelHandler(key: key) { childState.cancel() }
        childState.start(child.body)
        return childState
    }

    private func reserveKey() -> Int {
        lock.withLock { inner in
            defer { inner.nextKey += 1 }
            return inner.nextKey
        }
    }
}

private enum CancelHandlerDecision: Sendable { case kept, runNow, drop }

/// Keeps a job's state alive for as long as its body holds a controller.
/// When the last copy of the controller goes away and the job has not
/// completed, the job fails with `JobError.abandoned`.
final class ControllerToken<Success: Sendable>: Sendable {
    let state: JobState<Success>

    init(_ state: JobState<Success>) {
        self.state = state
    }

    deinit {
        state.complete(with: .failure(JobError.abandoned))
    }
}
