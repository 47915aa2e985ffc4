import JobKit

/// The retries of one upload whose requests are each retried on their
/// own (a multipart upload's, a tus upload's): every request by the upload's one
/// ``UploadAttempts``, which is told of each failure a retry follows as it
/// happens, and of the upload's own failure once, at its end.
final class RequestRetries: Sendable {
    /// The owner of the upload's retries.
    let attempts: UploadAttempts
    /// The first request that gave up (the one that fails the upload,
    /// which stops the others), and the number of its last attempt: how
    /// many attempts the failure the upload ends with took.
    private let firstGivenUp = Lock<(request: String, number: Int)?>(nil)

    init(_ attempts: UploadAttempts) {
        self.attempts = attempts
    }

    /// `call`, one request of the upload of `media`, retried as
    /// ``attempts`` says, its failed attempts named after it; neither
    /// retried nor reported once `stopping` says so (a request that
    /// outlives the upload's job).
    func retrying<Success: Sendable>(
        _ call: HTTPCall<Success>,
        for media: Media,
        stopping: (@Sendable () -> Bool)? = nil
    ) -> Job<Success> {
        let request = call.name
        return attempts.retrying(
            call.attempt, for: media, request: request, bytes: call.bytes,
            givingUp: { [self] attempt in firstGivenUp.withLock { $0 = $0 ?? (request, attempt.number) } },
            stopping: stopping
        )
    }

    /// The request that gave up was recovered from (the storage no longer
    /// had the upload, and a new one is made): its failure is not the
    /// upload's.
    func forgetFailure() {
        firstGivenUp.withLock { $0 = nil }
    }

    /// Tells ``attempts`` that the upload failed with `error`, unless it was
    /// cancelled: the failed attempt that no retry follows.
    func reportFailure(_ error: any Error) {
        guard UploadFailure(error) != .cancelled, let told = attempts.onFailedAttempt else { return }
        let givenUp = firstGivenUp.withLock { $0 }
        told(
            RetryPolicy.FailedAttempt(
                number: givenUp?.number ?? 1, error: error, nextRetryIn: nil, request: givenUp?.request))
    }
}
