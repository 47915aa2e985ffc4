import JobKit

/// How `Job.publishing(_:using:options:progress:)` uploads a
/// post's media: how many at once, how many attempts, how long each may
/// take.
public struct PublishOptions: Sendable, Equatable {
    /// The most media uploads running at any moment; at least 1.
    public var maxConcurrentUploads: Int
    /// The most attempts per upload, the first one included; at least 1.
    /// A failed attempt is retried after ``retryDelay``.
    public var attempts: Int
    /// The wait before each retry of a failed upload.
    public var retryDelay: RetryDelay
    /// How long one attempt of one upload may take before it fails with
    /// `JobError.timedOut`; no limit when `nil`.
    public var uploadTimeout: Duration?

    /// Creates options.
    /// - Parameters:
    ///   - maxConcurrentUploads: The most media uploads at once; 4 by
    ///     default.
    ///   - attempts: The most attempts per upload; 1 (no retry) by default.
    ///   - retryDelay: The wait before each retry; exponential from half a
    ///     second up to 8 seconds by default.
    ///   - uploadTimeout: The time limit for one attempt; none by default.
    public init(
        maxConcurrentUploads: Int = 4,
        attempts: Int = 1,
        retryDelay: RetryDelay = .exponential(initial: .milliseconds(500), maximum: .seconds(8)),
        uploadTimeout: Duration? = nil
    ) {
        self.maxConcurrentUploads = maxConcurrentUploads
        self.attempts = attempts
        self.retryDelay = retryDelay
        self.uploadTimeout = uploadTimeout
    }

    /// `upload` with this timeout per attempt and these retries.
    func applied(to upload: Job<Void>) -> Job<Void> {
        let limited = uploadTimeout.map { upload.timeout(after: $0) } ?? upload
        return attempts == 1 ? limited : limited.retry(attempts: attempts, delay: retryDelay)
    }
}
