extension Job {
    /// The handle a job's closure reports through.
    ///
    /// A controller reports the job's outcome once: the first of
    /// ``finish(with:)``, ``fail(with:)`` or ``complete(with:)-(Outcome)`` (or a
    /// cancellation of the job) wins, and every later call returns `false`
    /// and does nothing. It may be called from any thread.
    ///
    /// Copies of a controller all refer to the same performance. When the
    /// last copy is released before the job completed, the job fails with
    /// ``JobError/abandoned``.
    public struct Controller: Sendable {
        /// What the copies of this controller share.
        let shared: ControllerToken

        @inline(__always)
        init(_ shared: ControllerToken) {
            self.shared = shared
        }

        /// ``shared``, with its type.
        var token: TypedToken<Success> { shared.typed(as: Success.self) }

        /// The queue the job is performed on. Run children and follow-up
        /// work here, so that a test's injected queue drives them too.
        public var queue: any JobQueue { token.queue }

        /// Whether the job has been cancelled. A long-running closure can
        /// check it between steps and stop early.
        public var isCancelled: Bool { shared.isCancelled(as: Success.self) }

        /// Whether the job has completed, by any means: finished, failed,
        /// cancelled or timed out.
        public var isCompleted: Bool { shared.isCompleted(as: Success.self) }

        /// Finishes the job with `value`.
        /// - Returns: `true` if this was the job's outcome, `false` if the
        ///   job had already completed.
        @discardableResult
        public func finish(with value: Success) -> Bool {
            shared.succeed(with: value)
        }

        /// Fails the job with `error`.
        /// - Returns: `true` if this was the job's outcome, `false` if the
        ///   job had already completed.
        @discardableResult
        public func fail(with error: any Error) -> Bool {
            token.fail(with: error)
        }

        /// Completes the job with `outcome`, a value or an error.
        ///
        /// Handy for forwarding a `Result` from a completion handler:
        /// `api.load { result in controller.complete(with: result) }`.
        /// - Returns: `true` if this was the job's outcome, `false` if the
        ///   job had already completed.
        @discardableResult
        public func complete(with outcome: Outcome) -> Bool {
            token.complete(with: outcome)
        }

        /// Completes the job with a `Result` whose error type is typed, as
        /// the completion handlers of many APIs are
        /// (`Result<Data, NetworkError>`).
        ///
        /// ```swift
        /// client.fetch(url) { (result: Result<Data, NetworkError>) in
        ///     controller.complete(with: result)
        /// }
        /// ```
        /// - Returns: `true` if this was the job's outcome, `false` if the
        ///   job had already completed.
        @discardableResult
        public func complete<Failure: Error>(with result: Result<Success, Failure>) -> Bool {
            token.complete(with: result.mapError { $0 })
        }

        /// Registers cleanup to run if the job is cancelled: cancel a
        /// network request, close a file.
        ///
        /// `handler` runs once, on the thread that cancels the job. If the
        /// job is already cancelled it runs at once; if the job completed
        /// in another way it never runs, and it is released when the job
        /// completes. Don't capture the controller itself strongly in it:
        /// that keeps the job from being reported as abandoned.
        public func onCancel(_ handler: @escaping @Sendable () -> Void) {
            token.attach(.onCancel(handler))
        }

        /// Performs `child` on this job's queue as a child of this job.
        ///
        /// The child is cancelled when this job is cancelled. `handler` is
        /// called once with the child's outcome, on this job's queue.
        /// Reporting this job's own outcome stays up to the caller.
        ///
        /// - Parameters:
        ///   - child: The job to run.
        ///   - handler: Called with the child's outcome.
        /// - Returns: A handle that cancels the child alone.
        @discardableResult
        public func perform<Child>(
            _ child: Job<Child>,
            then handler: @escaping @Sendable (Job<Child>.Outcome) -> Void
        ) -> JobHandle {
            JobHandle(token.performChild(child, hopsToQueue: true, then: handler))
        }
    }
}

extension Job.Controller where Success == Void {
    /// Finishes a job that produces no value.
    /// - Returns: `true` if this was the job's outcome, `false` if the job
    ///   had already completed.
    @discardableResult
    public func finish() -> Bool {
        finish(with: ())
    }
}
