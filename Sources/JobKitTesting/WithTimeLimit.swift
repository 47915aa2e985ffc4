import JobKit

/// Thrown by ``withTimeLimit(_:operation:)`` when the operation did not
/// finish in time.
public struct TimeLimitExceeded: Error, Equatable, CustomStringConvertible, Sendable {
    /// The time the operation was given.
    public let duration: Duration

    /// Creates the error for an operation that was given `duration`.
    public init(duration: Duration) {
        self.duration = duration
    }

    /// What happened, in one line.
    public var description: String {
        "the operation did not finish within its time limit of \(duration)"
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
        outcome.fulfill(.failure(TimeLimitExceeded(duration: duration)))
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
