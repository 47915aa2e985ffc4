// MARK: - then and map

extension Job {
    /// A job that performs this job, then the job `next` builds from its
    /// value, and finishes with that second job's outcome.
    ///
    /// If this job fails, `next` is not called and the returned job fails
    /// with the same error. Both jobs run on the returned job's queue, and
    /// cancelling it cancels whichever is running. `next` is called at
    /// once on the thread this job completed on.
    ///
    /// The job `next` builds runs in the returned job's place, so a loop
    /// written as recursion, a `then` whose next job is the loop again,
    /// holds one step at a time, however many steps it takes (wrap the
    /// whole loop, not the job `next` returns, in a `timeout` or a `map`:
    /// a wrapper around each step's next job is one more job per step).
    /// When a step finishes in the queue's turn that ran it, as a cached
    /// value does, the next starts in that turn too, without waiting for a
    /// turn of its own; after 256 such steps in a row, the next waits for
    /// one, so that other work on the queue runs:
    ///
    /// ```swift
    /// func waitUntilReady() -> Job<Status> {
    ///     fetchStatus().then { status in
    ///         status.isReady ? .succeeded(status) : Job.sleep(for: .seconds(2)).then { waitUntilReady() }
    ///     }
    /// }
    /// ```
    ///
    /// ```swift
    /// let avatar = Job.loadingProfile(id).then { profile in .loadingImage(profile.avatarURL) }
    /// ```
    @inlinable
    public func then<Next>(_ next: @escaping @Sendable (Success) -> Job<Next>) -> Job<Next> {
        Job<Next> { controller in
            controller.performHere(self) { outcome in
                switch outcome {
                case .success(let value):
                    // Cancelled as this job finished: nothing to build.
                    guard !controller.isCompleted else { return }
                    controller.finish(byRunning: next(value))
                case .failure(let error):
                    controller.fail(with: error)
                }
            }
        }
    }

    /// A job that performs this job and finishes with `transform` applied
    /// to its value.
    ///
    /// If this job fails, `transform` is not called. If `transform` throws,
    /// the returned job fails with the error it threw. `transform` runs at
    /// once on the thread this job completed on.
    @inlinable
    public func map<NewSuccess>(
        _ transform: @escaping @Sendable (Success) throws -> NewSuccess
    ) -> Job<NewSuccess> {
        Job<NewSuccess> { controller in
            controller.performHere(self) { outcome in
                controller.complete(with: outcome.flatMap { value in Result { try transform(value) } })
            }
        }
    }

    /// A job that performs this job and drops its value.
    ///
    /// Handy for putting jobs with values into a ``group(_:maxConcurrent:failurePolicy:)``
    /// or a ``sequence(_:)``.
    @inlinable
    public func discardingValue() -> Job<Void> {
        map { _ in () }
    }
}

// MARK: - Errors

extension Job {
    /// A job that performs this job and, if it fails, finishes with the
    /// value `handler` returns for the error instead.
    ///
    /// If `handler` throws, the returned job fails with the error it threw,
    /// so it can recover from some errors and pass the others on:
    ///
    /// ```swift
    /// cachedAvatar.recover { error in
    ///     guard error is NotFound else { throw error }
    ///     return .placeholder
    /// }
    /// ```
    ///
    /// Cancelling the returned job is not a failure of this job: it
    /// completes with `CancellationError` and `handler` is not called.
    /// `handler` runs on the job's queue.
    @inlinable
    public func recover(
        _ handler: @escaping @Sendable (any Error) throws -> Success
    ) -> Job<Success> {
        recover { error in Job { $0.complete(with: Result { try handler(error) }) } }
    }

    /// A job that performs this job and, if it fails, performs the job
    /// `handler` builds from the error and finishes with its outcome.
    ///
    /// The job `handler` builds runs in the returned job's place, as a
    /// ``then(_:)``'s next job does: a retry written as recursion (recover
    /// with the same job again) holds one attempt at a time. `handler` is
    /// called at once on the thread this job completed on.
    @inlinable
    public func recover(
        with handler: @escaping @Sendable (any Error) -> Job<Success>
    ) -> Job<Success> {
        Job { controller in
            controller.performHere(self) { outcome in
                switch outcome {
                case .success:
                    controller.complete(with: outcome)
                case .failure(let error):
                    // Cancelled: the error is the cancel's, not to recover from.
                    guard !controller.isCompleted else { return }
                    controller.finish(byRunning: handler(error))
                }
            }
        }
    }

    /// A job that performs this job and, if it fails, fails with the error
    /// `transform` makes of its error: to wrap low-level errors into a
    /// domain error, say. `transform` runs at once on the thread this job
    /// completed on.
    @inlinable
    public func mapError(
        _ transform: @escaping @Sendable (any Error) -> any Error
    ) -> Job<Success> {
        Job { controller in
            controller.performHere(self) { outcome in
                controller.complete(with: outcome.mapError(transform))
            }
        }
    }
}

extension Job.Controller {
    /// Finishes the job with the outcome of `job`, run in its place: `job`'s
    /// body reports through this controller, on the job's queue, unless the
    /// job completed before it starts. Call it while the job runs (its
    /// callers check, before they build `job`).
    ///
    /// Nothing waits on `job` as a child would: the job goes on as `job`,
    /// the next step of a loop. So a loop written as recursion holds one
    /// step, whatever its length, its outcome reaches the caller without
    /// going back up through its steps, and a cancel reaches the step
    /// running now at once. What the step that ends said about itself goes
    /// (``AttachmentList/startStep()``).
    @usableFromInline
    func finish(byRunning job: Job<Success>) {
        let isOwnState = shared.withOwnStateToken(as: Success.self) { token in
            token.withState { $0.startStep(job.body, controlledBy: token) }
        }
        if isOwnState { return }
        let step: @Sendable () -> Void = { [self] in
            guard !isCompleted else { return }
            job.body(self)
        }
        token.startStep()
        token.runStep(step)
    }
}

extension Job.Controller {
    /// Performs `child` as a child of the job, started here, now: the
    /// caller is the job's body, on its queue (a transform's). `handler` is
    /// called on the thread that completes it.
    ///
    /// Inlinable, so that the caller's module, which knows `Child`, makes
    /// the child's state and token (``JobState/makeChildToken(on:handler:)``).
    @inlinable
    func performHere<Child>(
        _ child: Job<Child>,
        then handler: @escaping @Sendable (Result<Child, any Error>) -> Void
    ) {
        performChildHere(child, making: JobState<Child>.makeChildToken, then: handler)
    }

    /// ``performHere(_:then:)``, with the child's state and token made by
    /// `makeToken`.
    @usableFromInline
    func performChildHere<Child>(
        _ child: Job<Child>,
        making makeToken: @escaping JobState<Child>.MakeToken,
        then handler: @escaping @Sendable (Result<Child, any Error>) -> Void
    ) {
        if let state = shared.ownState(as: Success.self) {
            state.performChildHere(child, making: makeToken, then: handler)
        } else {
            token.performChild(child, startsHere: true, making: makeToken, then: handler)
        }
    }
}
