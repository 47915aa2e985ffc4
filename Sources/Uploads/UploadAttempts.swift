import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The one owner of an upload's retries: which policy retries its
/// attempts, how long each attempt may take, and who is told when one
/// fails.
///
/// An upload is retried in exactly one place. `Job.publishing` hands its
/// ``PublishOptions/retry`` to the uploader as `UploadAttempts`
/// (``Uploader/upload(_:attempts:progress:)``) and does not retry the
/// upload again around it. The uploader decides what an attempt is: for
/// ``URLSessionUploader``, ``DirectoryUploader`` and most uploaders, it is
/// the whole upload; ``S3Uploader`` retries each request of a multipart
/// upload (a part, the creation, the completion) on its own, so a part
/// that fails is the only one sent again.
///
/// ```swift
/// let attempts = UploadAttempts(retry: RetryPolicy(attempts: 4), timeout: .seconds(60))
/// let receipt = try await uploader.upload(video.media, attempts: attempts).value
/// ```
public struct UploadAttempts: Sendable {
    /// Which failed attempts are tried again, how often, after how long.
    public var retry: RetryPolicy
    /// How long one attempt may take before it is cancelled and fails with
    /// ``UploadError/timedOut(_:after:)`` (which ``retry`` retries by
    /// default); no limit when `nil`.
    public var timeout: Duration?
    /// Told of each failed attempt but a cancelled one, from the thread it
    /// failed on: with the wait before the retry that follows it, and once
    /// more, with no wait, when the upload fails.
    public var onFailedAttempt: (@Sendable (RetryPolicy.FailedAttempt) -> Void)?
    /// Runs before each attempt and fails it with the error it returns:
    /// the injected faults of `FaultInjectingUploader`.
    package var fault: (@Sendable (Media) -> (any Error)?)?

    /// Creates the owner of an upload's retries.
    /// - Parameters:
    ///   - retry: Which failed attempts are tried again; by default up to 3
    ///     attempts, for transient failures only.
    ///   - timeout: The time limit of one attempt; none by default.
    ///   - onFailedAttempt: Told of each failed attempt; nothing by
    ///     default.
    public init(
        retry: RetryPolicy = RetryPolicy(),
        timeout: Duration? = nil,
        onFailedAttempt: (@Sendable (RetryPolicy.FailedAttempt) -> Void)? = nil
    ) {
        self.retry = retry
        self.timeout = timeout
        self.onFailedAttempt = onFailedAttempt
    }

    /// One attempt, no time limit, nobody told: for requests that are sent
    /// once whatever happens.
    static var once: UploadAttempts { UploadAttempts(retry: .never) }

    /// A job that performs `attempt`, an attempt at uploading `media` (the
    /// whole upload, or one of its requests), as these attempts say: each
    /// performance limited to ``timeout``, performed again as ``retry``
    /// says, each failure told to ``onFailedAttempt``.
    ///
    /// A bare `URLError` becomes ``UploadError/network(_:_:)`` naming
    /// the media's destination, and a time limit reached
    /// ``UploadError/timedOut(_:after:)``. An uploader that retries its
    /// requests itself wraps each request in this; any other wraps its
    /// whole upload, as the default ``Uploader/upload(_:attempts:progress:)``
    /// does.
    public func retrying<Success: Sendable>(_ attempt: Job<Success>, for media: Media) -> Job<Success> {
        retrying(attempt, for: media, givingUp: onFailedAttempt)
    }

    /// `retrying(_:for:)`, with the last failed attempt, the one no retry
    /// follows, told to `givingUp` rather than to ``onFailedAttempt``.
    func retrying<Success: Sendable>(
        _ attempt: Job<Success>,
        for media: Media,
        givingUp: (@Sendable (RetryPolicy.FailedAttempt) -> Void)?
    ) -> Job<Success> {
        let destination = media.destination
        var limited = attempt.mapError { error in
            (error as? URLError).map { UploadError.network(destination, $0) } ?? error
        }
        if let limit = timeout {
            limited = limited.timeout(after: limit).mapError { error in
                error as? JobError == .timedOut ? UploadError.timedOut(destination, after: limit) : error
            }
        }
        if let fault {
            let unfaulted = limited
            limited = Job { controller in
                if let error = fault(media) {
                    controller.fail(with: error)
                } else {
                    controller.perform(unfaulted) { controller.complete(with: $0) }
                }
            }
        }
        return limited.retry(retry, onRetry: onFailedAttempt, givingUp: givingUp)
    }
}

extension PublishOptions {
    /// The attempts of the upload to `destination`: these retries and
    /// this time limit, failures told with the destination.
    func attempts(for destination: URL) -> UploadAttempts {
        var attempts = UploadAttempts(retry: retry, timeout: uploadTimeout)
        if let told = onFailedAttempt {
            attempts.onFailedAttempt = { told(destination, $0) }
        }
        return attempts
    }
}
