import Dispatch

// MARK: - Awaiting a job

extension Job {
    /// Performs the job on the global concurrent dispatch queue and returns
    /// its value, or throws its error.
    ///
    /// ```swift
    /// let data = try await download.value
    /// ```
    ///
    /// Cancelling the awaiting task cancels the job (its
    /// ``Controller/onCancel(_:)`` blocks run once) and throws
    /// `CancellationError`. A task that is already cancelled never starts
    /// the job. Use ``value(on:isolation:)`` to choose the queue.
    ///
    /// The caller stays on its own actor (`nonisolated(nonsending)`): no
    /// executor hop on the way in or out.
    @inlinable
    public nonisolated(nonsending) var value: Success {
        get async throws {
            try await value(on: DispatchQueue.global())
        }
    }

    /// Performs the job on `queue` and returns its value, or throws its
    /// error.
    ///
    /// The job runs on `queue` as with ``perform(on:then:)``. The awaiting
    /// task stays on the caller's actor and resumes on its own executor,
    /// without another hop through `queue`. A queue that drops the job's
    /// work without running it (one torn down first) makes this throw
    /// ``JobError/abandoned`` rather than wait forever.
    ///
    /// Cancellation goes both ways, with no window where it is lost:
    /// - if the awaiting task is cancelled while the job runs, the job is
    ///   cancelled (its ``Controller/onCancel(_:)`` blocks run once) and
    ///   this throws `CancellationError`;
    /// - if the awaiting task is already cancelled when it calls this, the
    ///   job never starts and this throws `CancellationError`.
    ///
    /// - Parameters:
    ///   - queue: Where the job and its children run.
    ///   - isolation: The caller's actor; leave the default.
    /// - Returns: The job's value.
    /// - Throws: The job's error, or `CancellationError`.
    @inlinable
    public func value(
        on queue: any JobQueue,
        isolation: isolated (any Actor)? = #isolation
    ) async throws -> Success {
        // Inlinable, so that the caller's module specializes it for
        // `Success`: generic, it looks up type metadata on every call.
        let state = JobState<Success>(awaitingOn: queue)
        return try await withTaskCancellationHandler {
            // Unchecked: the state resumes the continuation exactly once,
            // with the job's outcome or, cancelled first, without starting it.
            try await withUnsafeThrowingContinuation { continuation in
                state.start(body, resuming: continuation)
            }
        } onCancel: {
            state.cancel()
        }
    }
}

// MARK: - Async body

extension Job {
    /// A job whose body is an `async` closure, run in a Swift task.
    ///
    /// Each performance starts a Swift task through `scheduler` that runs
    /// `body`; the job finishes with the value `body` returns, or fails with
    /// the error it throws. Cancelling the job cancels that task (`body`
    /// sees `Task.isCancelled`; what it reports afterwards is dropped).
    ///
    /// ```swift
    /// let profile = Job.task { try await api.profile(id: id) }
    /// ```
    ///
    /// The name says what it costs: a task per performance. A job whose work
    /// reports through a callback needs no task: use ``init(_:)`` and its
    /// controller.
    ///
    /// With the default scheduler, a job performed on a queue that is also
    /// a ``TaskScheduling`` starts its task through that queue. A
    /// `TestQueue` is one, whose tasks run as its items: the body's
    /// nonisolated code runs when the test runs the queue, its sleeps on
    /// the queue's `clock` end when the test advances it, so `timeout` and
    /// `retry` around the job run wholly in virtual time, and the job's
    /// snapshots say where its task waits (unless the job has a detail of
    /// its own, from ``named(_:detail:)`` or ``Controller/onDescribe(_:)``).
    /// On any other queue (a `DispatchQueue`, an `ImmediateQueue`) the task
    /// is a plain `Task`.
    ///
    /// In tests, inject a scheduler from `JobKitTesting` to control when the
    /// task runs (`ManualTaskScheduler`) or to wait for it
    /// (`RecordingTaskScheduler`): any scheduler but a
    /// ``DefaultTaskScheduler`` is used whatever the queue.
    ///
    /// - Parameters:
    ///   - scheduler: Starts the task. A ``DefaultTaskScheduler`` by default.
    ///   - priority: The task's priority, or `nil` to inherit it.
    ///   - body: The work. It is isolated like any `@Sendable` async
    ///     closure: write `{ @MainActor in ... }` to run it on the main
    ///     actor.
    /// - Returns: The job.
    public static func task(
        scheduler: any TaskScheduling = DefaultTaskScheduler(),
        priority: TaskPriority? = nil,
        _ body: @escaping @Sendable @isolated(any) () async throws -> Success
    ) -> Job {
        Job { controller in
            let operation: @Sendable () async throws -> Void = {
                do {
                    controller.finish(with: try await body())
                } catch {
                    controller.fail(with: error)
                }
            }
            // A queue that starts tasks itself (a `TestQueue`) runs the
            // body in its order and on its clock, unless a scheduler was
            // injected.
            let queueScheduler = scheduler is DefaultTaskScheduler ? controller.queue as? any TaskScheduling : nil
            let task = (queueScheduler ?? scheduler).schedule(name: nil, priority: priority, operation: operation)
            controller.onCancel { task.cancel() }
            if let status = task.status {
                // Beneath a detail of the job's own, which tests must see
                // as the app does.
                controller.token.attach(.taskStatus { "its task \(status())" })
            }
        }
    }

    /// Unavailable: a job with an `async` body starts a Swift task each time
    /// it is performed, so it is made with ``task(scheduler:priority:_:)``,
    /// which says so: `Job.task { try await ... }`.
    @available(
        *, unavailable,
        message: "a job with an async body starts a Swift task each time it is performed: write Job.task { ... }"
    )
    public init(_ body: @escaping @Sendable () async throws -> Success) {
        fatalError("unavailable")
    }
}

// MARK: - Callback bridges

extension Job {
    /// A job that calls a completion-handler API taking a `Result`.
    ///
    /// `start` is called each time the job is performed, on the job's
    /// queue, with the completion handler to pass on; the job completes
    /// with the first result reported to it:
    ///
    /// ```swift
    /// let profile = Job.bridging { completion in api.loadProfile(id: id, completion: completion) }
    /// ```
    ///
    /// The completion handler may be called from any thread; calls after
    /// the first, or after the job was cancelled, are dropped. To cancel
    /// the underlying work too, use `bridgingCancellable(_:)`.
    ///
    /// - Parameter start: Starts the work and hands it the completion
    ///   handler.
    /// - Returns: The job.
    public static func bridging(
        _ start: @escaping @Sendable (_ completion: @escaping @Sendable (Outcome) -> Void) -> Void
    ) -> Job {
        Job { controller in
            start(controller.resultCompletion())
        }
    }

    /// A job that calls a completion-handler API taking a `Result` with a
    /// typed error, such as `Result<Data, NetworkError>`: the same as
    /// `bridging(_:)` with an untyped `Result`, for any error type.
    ///
    /// - Parameter start: Starts the work and hands it the completion
    ///   handler.
    /// - Returns: The job.
    public static func bridging<Failure: Error>(
        _ start: @escaping @Sendable (_ completion: @escaping @Sendable (Result<Success, Failure>) -> Void) -> Void
    ) -> Job {
        Job { controller in
            start(controller.resultCompletion())
        }
    }

    /// A job that calls a completion-handler API taking a `Result` and
    /// returning something cancellable, and cancels that when the job is
    /// cancelled.
    ///
    /// ```swift
    /// let download = Job.bridgingCancellable { completion in
    ///     downloader.fetch(url, completion: completion)   // returns a DispatchWorkItem
    /// }
    /// ```
    ///
    /// Cancelling the job calls `cancel()` on the object `start` returned,
    /// once. If the job is cancelled while `start` is still running (from
    /// another thread), the object is cancelled as soon as `start` returns
    /// it. The object is released when the job completes.
    ///
    /// - Parameter start: Starts the work, hands it the completion handler
    ///   and returns the work's ``CancellableWork`` (a `URLSessionTask`, a
    ///   `DispatchWorkItem`, a `Task`...).
    /// - Returns: The job.
    public static func bridgingCancellable(
        _ start: @escaping @Sendable (_ completion: @escaping @Sendable (Outcome) -> Void) -> any CancellableWork
    ) -> Job {
        bridging(cancelling: { controller in start(controller.resultCompletion()) })
    }

    /// A job that calls a completion-handler API taking a `Result` with a
    /// typed error and returning something cancellable: the same as
    /// `bridgingCancellable(_:)` with an untyped
    /// `Result`, for any error type.
    ///
    /// - Parameter start: Starts the work, hands it the completion handler
    ///   and returns the work's ``CancellableWork``.
    /// - Returns: The job.
    public static func bridgingCancellable<Failure: Error>(
        _ start:
            @escaping @Sendable (_ completion: @escaping @Sendable (Result<Success, Failure>) -> Void) ->
            any CancellableWork
    ) -> Job {
        bridging(cancelling: { controller in start(controller.resultCompletion()) })
    }

    /// Runs `start` with the controller, keeping the work object it returns
    /// to cancel it with the job.
    private static func bridging(
        cancelling start: @escaping @Sendable (Controller) -> any CancellableWork
    ) -> Job {
        Job { controller in
            let work = BridgedWork()
            controller.onCancel { work.cancel() }
            work.didStart(start(controller))
        }
    }
}

extension Job where Success == Void {
    /// A job that calls a completion-handler API reporting an optional
    /// error: `nil` finishes the job, an error fails it.
    ///
    /// ```swift
    /// let save = Job.bridging { completion in store.save(record, completion: completion) }
    /// ```
    ///
    /// The completion handler may be called from any thread; calls after
    /// the first, or after the job was cancelled, are dropped.
    ///
    /// - Parameter start: Starts the work and hands it the completion
    ///   handler.
    /// - Returns: The job.
    public static func bridging(
        _ start: @escaping @Sendable (_ completion: @escaping @Sendable ((any Error)?) -> Void) -> Void
    ) -> Job {
        Job { controller in
            start(controller.errorCompletion())
        }
    }

    /// A job that calls a completion-handler API reporting an optional
    /// error and returning something cancellable, and cancels that when the
    /// job is cancelled.
    ///
    /// Cancellation works as in `bridgingCancellable(_:)` with a `Result`, including
    /// a cancel that arrives before `start` returned the work object.
    ///
    /// - Parameter start: Starts the work, hands it the completion handler
    ///   and returns the work's ``CancellableWork``.
    /// - Returns: The job.
    public static func bridgingCancellable(
        _ start: @escaping @Sendable (_ completion: @escaping @Sendable ((any Error)?) -> Void) -> any CancellableWork
    ) -> Job {
        bridging(cancelling: { controller in start(controller.errorCompletion()) })
    }
}

extension Job.Controller {
    /// A completion handler that completes the job with a `Result`.
    fileprivate func resultCompletion<Failure: Error>() -> @Sendable (Result<Success, Failure>) -> Void {
        { result in complete(with: result.mapError { $0 as any Error }) }
    }
}

extension Job.Controller where Success == Void {
    /// A completion handler that fails the job with an error, or finishes
    /// it for `nil`.
    fileprivate func errorCompletion() -> @Sendable ((any Error)?) -> Void {
        { error in
            if let error {
                fail(with: error)
            } else {
                finish()
            }
        }
    }
}
