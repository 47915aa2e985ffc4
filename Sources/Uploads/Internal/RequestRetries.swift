import JobKit

/// The retries of one upload whose requests are each retried on their
/// own (an ``S3Uploader``'s): every request by the upload's one
/// ``UploadAttempts``, which is told of each failure a retry follows as it
/// happens, and of the upload's own failure once, at its end.
final class RequestRetries: Sendable {
    /// The owner of the upload's retries.
    let attempts: UploadAttempts
    /// The number of the last attempt of the latest request that gave up:
    /// how many attempts the failure the upload ends with took.
    private let lastGivenUp = Lock(1)
    /// The upload was cancelled: a request that goes on (its creation)
    /// is no longer retried, nor reported.
    private let isCancelled = Lock(false)

    init(_ attempts: UploadAttempts) {
        self.attempts = attempts
    }

    /// `request`, an attempt at one request of the upload of `media`,
    /// retried as ``attempts`` says.
    func retrying<Success: Sendable>(_ request: Job<Success>, for media: Media) -> Job<Success> {
        attempts.retrying(
            request, for: media,
            givingUp: { [self] attempt in lastGivenUp.withLock { $0 = attempt.number } },
            stopping: { [self] in isCancelled.withLock { $0 } }
        )
    }

    /// The upload was cancelled: from now on, no request is retried or
    /// reported.
    func cancel() {
        isCancelled.withLock { $0 = true }
    }

    /// Tells ``attempts`` that the upload failed with `error`, unless it was
    /// cancelled: the failed attempt that no retry follows.
    func reportFailure(_ error: any Error) {
        guard !(error is CancellationError), let told = attempts.onFailedAttempt else { return }
        told(RetryPolicy.FailedAttempt(number: lastGivenUp.withLock { $0 }, error: error, nextRetryIn: nil))
    }
}
