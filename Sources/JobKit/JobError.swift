/// The errors JobKit itself reports.
///
/// Cancellation is not among them: a cancelled job fails with Swift's own
/// `CancellationError`, so it reads the same as a cancelled Swift task.
///
/// Each case's `description` is one sentence. The core does not import
/// Foundation, so `JobError` adopts `LocalizedError` in the Uploads
/// library: where it is linked, `localizedDescription` is that sentence
/// too; elsewhere Foundation's generic text stands.
///
/// ```swift
/// job.perform(on: queue) { outcome in
///     if case .failure(JobError.timedOut) = outcome { showRetryButton() }
/// }
/// ```
public enum JobError: Error, Equatable, Sendable {
    /// The job's body released every copy of its controller without
    /// reporting an outcome: it forgot to call `finish`, `fail` or
    /// `complete`. Or the job waited for a ``JobSource`` that was released
    /// before it completed. Reported instead of waiting forever.
    case abandoned

    /// The job did not complete within the time given to
    /// ``Job/timeout(after:)``; it was cancelled.
    case timedOut

    /// A combinator was given an argument it cannot work with, such as a
    /// `maxConcurrent` or a number of attempts below 1. The string says
    /// which argument and why.
    case invalidArgument(String)
}

extension JobError: CustomStringConvertible {
    /// A one-line, human-readable account of the error.
    public var description: String {
        switch self {
        case .abandoned:
            "the job ended without an outcome: its controller, or the JobSource it waited for, was released before finish, fail or complete was called"
        case .timedOut:
            "the job timed out and was cancelled"
        case .invalidArgument(let reason):
            "invalid argument: \(reason)"
        }
    }
}
