import Dispatch
import JobKit

/// Thrown by ``withTimeLimit(_:operation:)`` when the operation did not
/// finish in time.
public struct TimeLimitExceeded: Error, Equatable, CustomStringConvertible, Sendable {
    /// The time the operation was given.
    public let duration: Duration

    /// Where the job the operation waited for was stuck when the time was
    /// up (`JobHandle.stallReport()`); `nil` if no job was given, or if it
    /// had completed.
    public let stallReport: String?

    /// Creates the error for an operation that was given `duration`, and
    /// the stall report of the job it waited for, if any.
    public init(duration: Duration, stallReport: String? = nil) {
        self.duration = duration
        self.stallReport = stallReport
    }

    /// What happened, in one line, then the stall report if there is one.
    public var description: String {
        let summary = "the operation did not finish within its time limit of \(duration)"
        return stallReport.map { "\(summary)\n\($0)" } ?? summary
    }
}

/// Runs `operation` and returns its value, or throws ``TimeLimitExceeded``
/// if it has not finished after `duration`: a test of async code fails
/// instead of hanging.
///
/// (Not `withTimeout`: swift-async-algorithms and many other packages a test
/// target may import declare a function of that name, and two would make
/// every call in the test file ambiguous.)
///
/// ```swift
/// @Test func loadsTheProfile() async throws {
///     let profile = try await withTimeLimit(.seconds(5)) { try await client.profile() }
///     #expect(profile.name == "Ada")
/// }
/// ```
///
/// - If `operation` returns or throws first, this returns its value or
///   rethrows its error at once, and the timer is cancelled.
/// - If the time passes first, this throws ``TimeLimitExceeded`` at once and
///   cancels `operation`'s task. It does not wait for `operation` to
///   notice: an operation that ignores cancellation cannot make the test
///   hang.
/// - If the calling task is cancelled, this throws `CancellationError`
///   and cancels both; if it is already cancelled, `operation` never
///   starts.
///
/// Exactly one of the three outcomes is reported, however close together
/// they happen. `operation` runs in a new task with the caller's priority
/// and task-local values. The time is real time (`ContinuousClock`): to
/// test timeouts of jobs in virtual time, use `Job.timeout(after:)` on a
/// `TestQueue` instead.
///
/// - Parameters:
///   - duration: How long `operation` may take.
///   - operation: The work to run.
/// - Returns: The value `operation` returned.
/// - Throws: The error `operation` threw, ``TimeLimitExceeded``, or
///   `CancellationError`.
public func withTimeLimit<Success: Sendable>(
    _ duration: Duration,
    operation: @escaping @Sendable () async throws -> Success
) async throws -> Success {
    try await timeLimited(duration, explaining: nil, operation: operation)
}

/// Runs `operation` as ``withTimeLimit(_:operation:)`` does, and when the
/// time is up, throws ``TimeLimitExceeded`` with the stall report of the
/// job behind `handle`: where it was stuck.
///
/// Use it when the test waits for what a job does rather than for the job
/// itself, here a model that publishes with a job and says when it is
/// done:
///
/// ```swift
/// let handle = model.publish()  // performs the job, returns its handle
/// try await withTimeLimit(.seconds(10), explaining: handle) {
///     await model.waitUntilPublished()
/// }
/// ```
///
/// The report is taken when the time is up, before `operation` is
/// cancelled. The job is not cancelled: cancel it with `handle` if the
/// test goes on.
///
/// - Parameters:
///   - duration: How long `operation` may take.
///   - handle: The job to explain if the time is up.
///   - operation: The work to run.
/// - Returns: The value `operation` returned.
/// - Throws: The error `operation` threw, ``TimeLimitExceeded`` with the
///   job's stall report, or `CancellationError`.
public func withTimeLimit<Success: Sendable>(
    _ duration: Duration,
    explaining handle: JobHandle,
    operation: @escaping @Sendable () async throws -> Success
) async throws -> Success {
    try await timeLimited(duration, explaining: handle, operation: operation)
}

/// Performs `job` on `queue` and returns its value, or throws
/// ``TimeLimitExceeded`` with the job's stall report and cancels the job
/// if it has not completed after `duration`.
///
/// ```swift
/// @Test func loadsTheProfileJob() async throws {
///     let profile = try await withTimeLimit(.seconds(5), performing: client.profileJob())
///     #expect(profile.name == "Ada")
/// }
/// ```
///
/// When the time is up, the error's description says which jobs the job
/// still waited for:
///
/// ```text
/// the operation did not finish within its time limit of 5.0 seconds
/// 1 job has not completed:
///   publish ▸ group 2/3 ▸ upload video-2.mp4 (running, 0 of 18 MB sent)
/// ```
///
/// Cancelling the calling task cancels the job and throws
/// `CancellationError`.
///
/// - Parameters:
///   - duration: How long the job may take, in real time.
///   - job: The job to perform.
///   - queue: Where it runs; the global concurrent dispatch queue by
///     default.
/// - Returns: The job's value.
/// - Throws: The job's error, ``TimeLimitExceeded``, or
///   `CancellationError`.
public func withTimeLimit<Success: Sendable>(
    _ duration: Duration,
    performing job: Job<Success>,
    on queue: any JobQueue = DispatchQueue.global()
) async throws -> Success {
    try Task.checkCancellation()
    let outcome = Promise<Job<Success>.Outcome>()
    let handle = job.perform(on: queue) { outcome.fulfill($0) }
    do {
        return try await timeLimited(duration, explaining: handle) { try await outcome.value.get() }
    } catch {
        handle.cancel()  // after the time limit or the caller's cancellation; nothing if it completed
        throw error
    }
}

private func timeLimited<Success: Sendable>(
    _ duration: Duration,
    explaining handle: JobHandle?,
    operation: @escaping @Sendable () async throws -> Success
) async throws -> Success {
    try Task.checkCancellation()
    let outcome = Promise<Result<Success, any Error>>()
    let work = Task {
        let result: Result<Success, any Error>
        do {
            result = .success(try await operation())
        } catch {
            result = .failure(error)
        }
        outcome.fulfill(result)
    }
    let timer = Task {
        do {
            try await Task.sleep(for: duration)
        } catch {
            return  // cancelled: the operation finished first
        }
        outcome.fulfill(.failure(TimeLimitExceeded(duration: duration, stallReport: handle?.stallReport())))
    }
    let result = await withTaskCancellationHandler {
        await outcome.value
    } onCancel: {
        outcome.fulfill(.failure(CancellationError()))
    }
    work.cancel()
    timer.cancel()
    return try result.get()
}
