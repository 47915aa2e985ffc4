// MARK: - collectOutcomes

extension Job {
    /// A job that performs `jobs` together and finishes with every one's
    /// outcome, success or failure, in input order.
    ///
    /// A child's failure never fails it: the children run to their end
    /// (as in ``collect(_:maxConcurrent:failurePolicy:)`` with
    /// ``FailurePolicy/waitForAll``), and each one's error takes its place
    /// in the array. So "upload all the photos and tell me which failed"
    /// is one job:
    ///
    /// ```swift
    /// let outcomes = try await Job.collectOutcomes(photos.map(uploading), maxConcurrent: 4).value
    /// let failed = zip(photos, outcomes).filter { _, outcome in (try? outcome.get()) == nil }.map(\.0)
    /// ```
    ///
    /// Cancelling it cancels every running child, and it fails with
    /// `CancellationError`, as every job does. An empty array finishes at
    /// once with no outcomes.
    ///
    /// - Parameters:
    ///   - jobs: The children; at most `UInt32.max` (more fail the job with
    ///     ``JobError/invalidArgument(_:)``).
    ///   - maxConcurrent: The most children running at any moment, started
    ///     in input order; at least 1 (a smaller value fails the job with
    ///     ``JobError/invalidArgument(_:)``). Unbounded by default.
    /// - Returns: A job whose value holds each child's outcome, in input
    ///   order, whatever the order they completed in.
    /// - Complexity: As ``group(_:maxConcurrent:failurePolicy:)``: O(1)
    ///   work per child, and a flat stack even when children complete
    ///   synchronously.
    public static func collectOutcomes<Element>(
        _ jobs: [Job<Element>],
        maxConcurrent: Int = .max
    ) -> Job<[Job<Element>.Outcome]> where Success == [Job<Element>.Outcome] {
        let inner = Inner(jobs)
        return Job<[Job<Element>.Outcome]> { controller in
            GroupRun(
                jobs: inner.value,
                maxConcurrent: maxConcurrent,
                role: .collectOutcomes,
                queue: controller.queue,
                owner: controller.shared,
                report: { owner, outcome in Controller(owner).complete(with: outcome.map { $0.outcomes }) }
            ).start { controller.token.attach($0) }
        }
    }
}

// MARK: - race

extension Job {
    /// A job that performs `jobs` together and completes with the first
    /// outcome any of them reports, success or failure, cancelling the
    /// others at once.
    ///
    /// The losers are cancelled as the winner completes: their
    /// ``Controller/onCancel(_:)`` blocks run then, so their requests and
    /// timers end rather than run on unobserved. Cancelling the race
    /// cancels every job in it.
    ///
    /// ```swift
    /// let data = try await Job.race(mirrors.map(download)).value
    /// ```
    ///
    /// The jobs start one after another, in input order, in the work item
    /// of the race's queue that starts the race (64 of them; any more, in
    /// the work items that follow it): each job's body is expected to start
    /// its work (a request, a timer, a task) and return.
    /// So a job that completes before its body returns wins before the jobs
    /// after it start, and they never do; to race work that computes, give
    /// each job's work a queue of its own.
    ///
    /// A failure wins a race as a success does; to wait out failures, use
    /// ``firstSuccess(_:maxConcurrent:)``. To bound a job's time, prefer
    /// ``timeout(after:)``, which says so with ``JobError/timedOut``.
    ///
    /// Jobs that complete at the same instant (on a `TestQueue` that
    /// explores orderings, say) may win in either order.
    ///
    /// - Parameter jobs: The contestants, all started at once, in input
    ///   order; at least one (an empty array fails the job with
    ///   ``JobError/invalidArgument(_:)`` rather than never completing).
    /// - Returns: A job with the first outcome of `jobs`.
    public static func race(_ jobs: [Job<Success>]) -> Job<Success> {
        let inner = Inner(jobs.map { $0.boxingItsValue() })
        return Job { controller in
            GroupRun(
                jobs: inner.value,
                maxConcurrent: .max,
                role: .race,
                queue: controller.queue,
                owner: controller.shared,
                report: { owner, outcome in
                    let controller = Controller(owner)
                    switch outcome {
                    case .success(let value): controller.finish(with: unboxed(value.winner))
                    case .failure(let error): controller.fail(with: error)
                    }
                }
            ).start { controller.token.attach($0) }
        }
    }
}

extension Job {
    /// A job that performs its arguments together and completes with the
    /// first outcome any of them reports, cancelling the others at once:
    /// ``race(_:)`` of the jobs in argument order.
    ///
    /// ```swift
    /// let answer = Job.race(askingPrimary(question), askingReplica(question))
    /// ```
    public static func race(_ first: Job<Success>, _ others: Job<Success>...) -> Job<Success> {
        race([first] + others)
    }
}

// MARK: - firstSuccess

extension Job {
    /// A job that finishes with the value of the first of `jobs` to
    /// succeed, cancelling the others at once; it fails only when every
    /// one failed, with all their errors.
    ///
    /// Failures are waited out: while a job may still succeed, the others'
    /// errors are only recorded. When all failed, the job fails with
    /// ``AllFailedError``, whose ``AllFailedError/errors`` hold each job's
    /// error in input order. With `maxConcurrent: 1` the jobs are tried
    /// one after another, the next only once the previous failed:
    ///
    /// ```swift
    /// let nearest = Job.firstSuccess(mirrors.map(download), maxConcurrent: 1)
    /// ```
    ///
    /// Cancelling it cancels every running job.
    ///
    /// - Parameters:
    ///   - jobs: The candidates, started in input order; at least one (an
    ///     empty array fails the job with ``JobError/invalidArgument(_:)``).
    ///   - maxConcurrent: The most jobs running at any moment; at least 1
    ///     (a smaller value fails the job with
    ///     ``JobError/invalidArgument(_:)``). Unbounded by default.
    /// - Returns: A job with the first success of `jobs`.
    public static func firstSuccess(_ jobs: [Job<Success>], maxConcurrent: Int = .max) -> Job<Success> {
        let inner = Inner(jobs)
        return Job { controller in
            GroupRun(
                jobs: inner.value,
                maxConcurrent: maxConcurrent,
                role: .firstSuccess,
                queue: controller.queue,
                owner: controller.shared,
                report: { owner, outcome in Controller(owner).completeWithWinner(of: outcome) }
            ).start { controller.token.attach($0) }
        }
    }
}

extension Job {
    /// A job that finishes with the value of the first of its arguments to
    /// succeed, cancelling the others at once; it fails only when every
    /// one failed, with all their errors: ``firstSuccess(_:maxConcurrent:)``
    /// of the jobs in argument order.
    ///
    /// ```swift
    /// let avatar = Job.firstSuccess(loadingCachedAvatar(id), downloadingAvatar(id), maxConcurrent: 1)
    /// ```
    public static func firstSuccess(
        _ first: Job<Success>,
        _ others: Job<Success>...,
        maxConcurrent: Int = .max
    ) -> Job<Success> {
        firstSuccess([first] + others, maxConcurrent: maxConcurrent)
    }
}

extension Job.Controller {
    /// Completes the job with the winner of a race or a first success, or
    /// its error.
    fileprivate func completeWithWinner(of outcome: Result<GroupValue<Success>, any Error>) {
        switch outcome {
        case .success(let value): finish(with: value.winner)
        case .failure(let error): fail(with: error)
        }
    }
}

/// The error of a ``Job/firstSuccess(_:maxConcurrent:)`` whose jobs all
/// failed: every job's error, in input order.
///
/// ```swift
/// do {
///     return try await Job.firstSuccess(mirrors.map(download)).value
/// } catch let error as AllFailedError {
///     log(error.errors)  // one error per mirror, in the mirrors' order
///     throw error
/// }
/// ```
public struct AllFailedError: Error, Sendable {
    /// Each job's error, in the order the jobs were given.
    public var errors: [any Error]

    /// Creates the error of jobs that all failed with `errors`.
    public init(errors: [any Error]) {
        self.errors = errors
    }
}

extension AllFailedError: CustomStringConvertible {
    /// One line: how many jobs failed, and each error.
    public var description: String {
        let count = errors.count == 1 ? "the one job" : "all \(errors.count) jobs"
        return "\(count) failed: " + errors.map { "\($0)" }.joined(separator: "; ")
    }
}
