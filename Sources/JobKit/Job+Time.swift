// MARK: - timeout

extension Job {
    /// A job that fails with ``JobError/timedOut`` and cancels this job
    /// when it has not completed within `duration`.
    ///
    /// The time is measured on the job's queue with
    /// ``JobQueue/enqueue(after:_:)``, so on a `TestQueue` it passes only
    /// when the test advances it:
    ///
    /// ```swift
    /// Job<Data>.never.timeout(after: .seconds(30)).perform(on: queue) { outcome in print(outcome) }
    /// try queue.advance(by: .seconds(30))   // prints failure(JobKit.JobError.timedOut)
    /// ```
    ///
    /// The timer is cancelled as soon as the job completes, however it
    /// completes, so it keeps nothing alive until the deadline.
    ///
    /// The timer also runs on the job's queue: on a serial queue (such as
    /// `.main`) that is blocked, the timeout cannot fire until the queue is
    /// free again, however late that is. Give a job that may block its
    /// queue a concurrent queue, or time it out from another one.
    ///
    /// - Parameter duration: How long this job may take.
    public func timeout(after duration: Duration) -> Job<Success> {
        Job { controller in
            let timer = TimerSlot(.timeout(duration))
            controller.token.attach(timer)
            let child = controller.token.performChild(self) { outcome in
                timer.close()
                controller.complete(with: outcome)
            }
            timer.arm(
                controller.queue.enqueue(after: duration) {
                    if controller.fail(with: JobError.timedOut) {
                        child.cancel()
                    }
                }
            )
        }
    }
}

// MARK: - sleep

extension Job where Success == Void {
    /// A job that finishes after `duration`, measured on its queue's clock.
    ///
    /// The wait is the queue's ``JobQueue/enqueue(after:_:)``: on a
    /// `TestQueue` it ends only when the test advances time that far.
    /// Because jobs are lazy, a sleep followed by a job is a delayed start,
    /// and the delay begins only when the whole is performed:
    ///
    /// ```swift
    /// let refreshLater = Job.sequence([.sleep(for: .seconds(30)), refresh])
    /// ```
    ///
    /// Cancelling it cancels its timer, so that nothing of it is left on
    /// the queue. A duration of zero or less finishes on the queue's next
    /// turn.
    ///
    /// - Parameter duration: How long to wait.
    public static func sleep(for duration: Duration) -> Job<Void> {
        Job { controller in
            let timer = TimerSlot(.sleep(duration))
            controller.token.attach(timer)
            timer.arm(controller.queue.enqueue(after: max(duration, .zero)) { controller.finish() })
        }
    }
}

// MARK: - retry

/// How long ``Job/retry(attempts:delay:while:)`` waits before each new
/// attempt, and ``Job/repeated(while:delay:)`` before each new step.
public enum RetryDelay: Sendable, Equatable {
    /// Retry at once.
    case none
    /// Wait the same time before every retry.
    case fixed(Duration)
    /// Wait `initial` before the first retry, then `multiplier` times longer
    /// before each next one, never more than `maximum`.
    case exponential(initial: Duration, multiplier: Double = 2, maximum: Duration)

    /// The delay before retry number `retry` (1 for the first retry).
    public func delay(beforeRetry retry: Int) -> Duration {
        switch self {
        case .none:
            return .zero
        case .fixed(let duration):
            return duration
        case .exponential(let initial, let multiplier, let maximum):
            var delay = initial
            for _ in 1..<max(retry, 1) {
                let next = delay * multiplier
                if next >= maximum { return maximum }
                // No longer changing (a multiplier of 1, a delay shrunk to
                // zero): the step of a long loop costs no more than the first.
                if next == delay { break }
                delay = next
            }
            return min(delay, maximum)
        }
    }
}

extension Job {
    /// A job that performs this job and, while it fails, performs it again,
    /// up to `attempts` performances in all.
    ///
    /// Each attempt is a fresh performance of this job (a retried sequence
    /// starts again from its first step). The returned job finishes with
    /// the first success, or fails with the last attempt's error. Waits
    /// between attempts run on the job's queue, so a `TestQueue` drives
    /// them in virtual time. Cancelling the returned job cancels the
    /// running attempt, or the wait for the next one (the queue releases
    /// it at once). Cancellation of an attempt itself (`CancellationError`)
    /// is not retried.
    ///
    /// ```swift
    /// upload.retry(attempts: 3, delay: .exponential(initial: .seconds(1), maximum: .seconds(8)))
    /// ```
    ///
    /// - Parameters:
    ///   - attempts: The most performances, first one included; at least 1
    ///     (a smaller value fails with ``JobError/invalidArgument(_:)``).
    ///   - delay: The wait before each retry. No wait by default.
    ///   - shouldRetry: Decides, from an attempt's error, whether to try
    ///     again. Retries every error but cancellation by default.
    public func retry(
        attempts: Int,
        delay: RetryDelay = .none,
        while shouldRetry: @escaping @Sendable (any Error) -> Bool = { !($0 is CancellationError) }
    ) -> Job<Success> {
        retry(attempts: attempts) { retry, error in
            shouldRetry(error) ? delay.delay(beforeRetry: retry) : nil
        }
    }

    /// A job that performs this job and, while it fails, performs it again
    /// after the wait `delay` chooses for the error, up to `attempts`
    /// performances in all.
    ///
    /// After each failed attempt but the last, `delay` is called with the
    /// number of the retry to come (1 before the second attempt) and the
    /// error: it returns the wait before that retry, or `nil` to fail at
    /// once with that error. So the wait can depend on the error: a
    /// server's `Retry-After`, say, or no retry at all for an error that
    /// cannot go away:
    ///
    /// ```swift
    /// let patient = fetch.retry(attempts: 5) { retry, error in
    ///     guard let error = error as? ServerError, error.isTemporary else { return nil }
    ///     return error.retryAfter ?? .seconds(retry)
    /// }
    /// ```
    ///
    /// Everything else is as in ``retry(attempts:delay:while:)``: each
    /// attempt is a fresh performance, waits run on the job's queue, and
    /// cancelling the returned job cancels the attempt or the wait. `delay`
    /// decides for `CancellationError` too; return `nil` for it unless an
    /// attempt that cancels itself should be tried again.
    ///
    /// - Parameters:
    ///   - attempts: The most performances, first one included; at least 1
    ///     (a smaller value fails with ``JobError/invalidArgument(_:)``).
    ///   - delay: The wait before retry number `retry` after `error`, or
    ///     `nil` to stop retrying. Called on the job's queue or the thread
    ///     the failed attempt completed on.
    public func retry(
        attempts: Int,
        delay: @escaping @Sendable (_ retry: Int, _ error: any Error) -> Duration?
    ) -> Job<Success> {
        Job { controller in
            guard attempts >= 1 else {
                controller.fail(with: JobError.invalidArgument("attempts must be at least 1, got \(attempts)"))
                return
            }
            let timer = TimerSlot(.retry(attempts: attempts))
            controller.token.attach(timer)
            RetryRun(job: self, attempts: attempts, delay: delay, controller: controller, timer: timer)
                .attempt(1)
        }
    }
}

/// One performance of a retried job.
private struct RetryRun<Success: Sendable>: Sendable {
    let job: Job<Success>
    let attempts: Int
    let delay: @Sendable (_ retry: Int, _ error: any Error) -> Duration?
    let controller: Job<Success>.Controller
    /// The wait before the next attempt, closed when the job is cancelled.
    let timer: TimerSlot

    func attempt(_ number: Int) {
        guard !controller.isCompleted else { return }
        if number > 1 { timer.begin(number) }
        controller.token.performChild(job) { outcome in
            switch outcome {
            case .success:
                controller.complete(with: outcome)
            case .failure(let error):
                // A cancelled retry asks for no wait: none follows.
                guard number < attempts, !controller.isCompleted, let wait = delay(number, error) else {
                    controller.complete(with: outcome)
                    return
                }
                timer.wait(before: number + 1, delay: max(wait, .zero), after: error, on: controller.queue) {
                    attempt(number + 1)
                }
            }
        }
    }
}
