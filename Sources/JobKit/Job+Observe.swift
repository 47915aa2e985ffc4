import Dispatch

// MARK: - Side effects

extension Job {
    /// A job that performs this job and, when it succeeds, calls `effect`
    /// with its value, then finishes with that value: a side effect that
    /// leaves the outcome as it is.
    ///
    /// For logging, a cache, a metric, on the way to the job that uses the
    /// value:
    ///
    /// ```swift
    /// let profile = loadingProfile(id).onSuccess { profile in cache.store(profile) }
    /// ```
    ///
    /// `effect` runs on the queue the job is performed on, before the
    /// returned job reports. It is not called when this job fails, nor once
    /// the returned job was cancelled (a cancel that comes while `effect`
    /// runs completes the job with `CancellationError`, as always).
    public func onSuccess(_ effect: @escaping @Sendable (Success) -> Void) -> Job<Success> {
        observing { outcome in
            if case .success(let value) = outcome { effect(value) }
        }
    }

    /// A job that performs this job and, when it fails, calls `effect`
    /// with its error, then fails with that error: a side effect that
    /// leaves the outcome as it is.
    ///
    /// ```swift
    /// let upload = uploading(file).onFailure { error in log.error("upload failed: \(error)") }
    /// ```
    ///
    /// `effect` runs on the queue the job is performed on, before the
    /// returned job reports. Cancelling the returned job is not a failure
    /// of this job: it completes with `CancellationError`, and `effect` is
    /// not called once it was. To act on every outcome, a cancel's too, use
    /// ``always(_:)``; to replace the error, ``mapError(_:)`` or
    /// ``recover(_:)``.
    public func onFailure(_ effect: @escaping @Sendable (any Error) -> Void) -> Job<Success> {
        observing { outcome in
            if case .failure(let error) = outcome { effect(error) }
        }
    }

    /// This job, with `observe` called with its outcome on the job's queue
    /// before the job reports it, unless the job was cancelled by then.
    private func observing(_ observe: @escaping @Sendable (Outcome) -> Void) -> Job<Success> {
        Job { controller in
            controller.token.performChild(self, hopsToQueue: true) { outcome in
                // Cancelled: the outcome is the cancel's, not this job's.
                if !controller.isCompleted { observe(outcome) }
                controller.complete(with: outcome)
            }
        }
    }

    /// A job that performs this job and finishes with its outcome, a
    /// success or a failure, as a value: it fails only when it is
    /// cancelled itself.
    ///
    /// For code that handles both outcomes where the next job is built, or
    /// that must go on whatever one job does:
    ///
    /// ```swift
    /// let report = syncing(account).capturingOutcome().then { outcome in
    ///     sendingReport(success: (try? outcome.get()) != nil)
    /// }
    /// ```
    ///
    /// For many jobs at once, ``collectOutcomes(_:maxConcurrent:)``.
    public func capturingOutcome() -> Job<Outcome> {
        Job<Outcome> { controller in
            controller.token.performChild(self) { outcome in
                controller.finish(with: outcome)
            }
        }
    }
}

// MARK: - Performing with a handler for each outcome

extension Job {
    /// Runs the job on `queue` and calls `onSuccess` with its value or
    /// `onFailure` with its error: one of them, once.
    ///
    /// ```swift
    /// loadingProfile(id).perform(on: .main) { profile in
    ///     header.show(profile)
    /// } onFailure: { error in
    ///     header.showError(error)
    /// }
    /// ```
    ///
    /// As ``perform(on:then:)``: both handlers are called on `queue`, and
    /// cancelling the returned handle completes the job at once with
    /// `CancellationError`, which `onFailure` receives like any error (an
    /// alert that must not show for a cancel tests for it:
    /// `guard !(error is CancellationError) else { return }`).
    ///
    /// - Parameters:
    ///   - queue: Where the job and its children run. Defaults to the
    ///     global concurrent dispatch queue.
    ///   - onSuccess: Called with the job's value, if it succeeds.
    ///   - onFailure: Called with the job's error, if it fails.
    /// - Returns: A handle that can cancel this performance.
    @discardableResult
    public func perform(
        on queue: any JobQueue = DispatchQueue.global(),
        onSuccess: @escaping @Sendable (Success) -> Void,
        onFailure: @escaping @Sendable (any Error) -> Void
    ) -> JobHandle {
        perform(on: queue) { outcome in
            switch outcome {
            case .success(let value): onSuccess(value)
            case .failure(let error): onFailure(error)
            }
        }
    }
}
