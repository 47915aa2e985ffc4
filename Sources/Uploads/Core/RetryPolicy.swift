import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Which failed uploads are tried again, how often, and after how long.
///
/// The default policy retries only what can succeed later: the failures
/// whose ``UploadFailure`` is transient, offline or a pushback
/// (``UploadFailure/isTransient``): transport failures that can pass
/// (timed out, connection lost or refused, no network, a failed DNS
/// look-up), a time limit reached, and the statuses 408, 429, 500, 502, 503
/// and 504. Every other failure (another 4xx, a missing file, an invalid
/// destination, cancellation) fails at once: trying again would only spend
/// the user's radio and battery on the same answer.
///
/// The wait before retry *n* is drawn at random between zero and
/// `initialDelay × multiplier^(n-1)`, capped at `maximumDelay` ("full
/// jitter"), so that a thousand phones cut off by the same outage do not
/// all come back at the same instant. When a pushback asks for a wait (a
/// 429 or 503 answer's `Retry-After`, in seconds or as an HTTP date, or an
/// app's own ``UploadFailure/pushback(retryAfter:)``), the wait is what the
/// server asked for, capped at `maximumRetryAfter`, plus up to as much
/// again, drawn at random: the phones a server turned away together do not
/// come back together. In an ``Outbox``, a request toward a host the outbox
/// holds after a pushback is retried when the hold ends instead
/// (<doc:UsingTheOutbox#When-the-server-pushes-back>).
///
/// To have an app's own errors retried, say what they mean
/// (``ClassifiedUploadError``); to retry otherwise than their meaning
/// says, replace ``isRetryable``:
///
/// ```swift
/// var policy = RetryPolicy(attempts: 4, initialDelay: .seconds(1), maximumDelay: .seconds(30))
/// // A device without network fails at once, for the app to try again when
/// // the network is back, rather than being tried again in vain.
/// policy.isRetryable = { error in UploadFailure(error) != .offline && RetryPolicy.isTransient(error) }
/// let options = PublishOptions(retry: policy)
/// ```
///
/// Waits run on the job's queue, so on a `TestQueue` they pass in virtual
/// time; with a seeded generator (`RetryPolicy(random: SeededRandomNumberGenerator(seed: 7))`)
/// the jitter is the same on every run, so a test can check each wait.
///
/// ## Who retries what
///
/// Each request is retried by exactly one policy, so a server that is down
/// gets the attempts the user allowed, and no more:
///
/// - `Job.publishing` retries each upload with ``PublishOptions/retry``.
///   It hands the policy to the uploader as ``UploadAttempts`` and retries
///   nothing around it.
/// - An uploader that sends several requests per upload (a multipart or a
///   tus upload) retries each request of an upload (a part, the creation,
///   the completion) on its own, with the policy it is handed; handed none
///   (`Job.uploading(video, using: uploader)`), it tries each request
///   once, as every uploader tries its upload once. Whether an upload that
///   failed is kept to resume is judged by that same policy.
/// - Other uploaders (``URLSessionUploader``, ``DirectoryUploader``) retry
///   nothing themselves: publishing retries their whole upload.
/// - Outside publishing, hand the uploader the policy, and it retries as
///   publishing would have it:
///
/// ```swift
/// let attempts = UploadAttempts(retry: RetryPolicy(attempts: 5))
/// let receipt = try await Job.uploading(video, using: uploader, attempts: attempts).value
/// ```
///
/// Wrapping the job of an uploader that retries inside in
/// `retry(_:onFailedAttempt:)` instead makes a second owner: each failing
/// request is then sent `attempts × attempts` times.
public struct RetryPolicy: Sendable {
    /// The most attempts per upload, the first one included; at least 1.
    public var attempts: Int
    /// The ceiling of the first retry's wait.
    public var initialDelay: Duration
    /// How much the ceiling grows from one retry to the next.
    public var multiplier: Double
    /// The largest ceiling of a wait.
    public var maximumDelay: Duration
    /// The longest wait a server's `Retry-After` can ask for between
    /// attempts; a longer one is cut to this, before the jitter on top of
    /// it. An outbox's holds have their own limit
    /// (`Outbox.Options.maxRetryAfter`).
    public var maximumRetryAfter: Duration
    /// Decides whether an attempt's error is worth another attempt; by
    /// default, whether its ``UploadFailure`` can pass (``isTransient(_:)``).
    /// A cancellation is never retried.
    public var isRetryable: @Sendable (any Error) -> Bool
    private let random: RandomSource

    /// Creates a policy.
    /// - Parameters:
    ///   - attempts: The most attempts per upload, the first one included;
    ///     3 by default.
    ///   - initialDelay: The ceiling of the first retry's wait; half a
    ///     second by default.
    ///   - multiplier: How much the ceiling grows per retry; 2 by default.
    ///   - maximumDelay: The largest ceiling; 30 seconds by default.
    ///   - maximumRetryAfter: The longest wait a `Retry-After` can ask
    ///     for; 2 minutes by default.
    ///   - random: Where the jitter comes from; the system's generator by
    ///     default. Pass a seeded one for waits that are the same on every
    ///     run. Copies of the policy draw from this one generator, in the
    ///     order their retries ask.
    public init(
        attempts: Int = 3,
        initialDelay: Duration = .milliseconds(500),
        multiplier: Double = 2,
        maximumDelay: Duration = .seconds(30),
        maximumRetryAfter: Duration = .seconds(120),
        random: some RandomNumberGenerator & Sendable = SystemRandomNumberGenerator()
    ) {
        self.attempts = attempts
        self.initialDelay = initialDelay
        self.multiplier = multiplier
        self.maximumDelay = maximumDelay
        self.maximumRetryAfter = maximumRetryAfter
        self.isRetryable = RetryPolicy.isTransient
        self.random = RandomSource(random)
    }

    /// No retries: every failure fails at once.
    public static var never: RetryPolicy { RetryPolicy(attempts: 1) }

    /// Whether `error` can go away by itself: its ``UploadFailure`` is
    /// transient, offline or a pushback (``UploadFailure/isTransient``).
    public static func isTransient(_ error: any Error) -> Bool {
        UploadFailure(error).isTransient
    }

    /// The wait before retry number `retry` (1 for the second attempt)
    /// after `error`, or `nil` when `error` is not retried.
    ///
    /// Each call draws a new jitter from the policy's generator.
    public func delay(beforeRetry retry: Int, after error: any Error) -> Duration? {
        retries(retry, after: error) ? wait(beforeRetry: retry, after: error) : nil
    }
}

extension RetryPolicy {
    /// Whether retry number `retry` follows `error`: the error is
    /// retryable, and an attempt is left. Draws nothing.
    func retries(_ retry: Int, after error: any Error) -> Bool {
        retry < attempts && UploadFailure(error) != .cancelled && isRetryable(error)
    }

    /// The wait before retry number `retry` after `error`, which
    /// ``retries(_:after:)`` said is retried. Draws a new jitter.
    func wait(beforeRetry retry: Int, after error: any Error) -> Duration {
        if case .pushback(let asked?) = UploadFailure(error) {
            let wait = min(asked, maximumRetryAfter)
            return wait + wait * random.fraction()
        }
        let ceiling = RetryDelay.exponential(initial: initialDelay, multiplier: multiplier, maximum: maximumDelay)
            .delay(beforeRetry: retry)
        return ceiling * random.fraction()
    }

    /// A number in 0..<1 from the policy's generator: the jitter of the
    /// waits an ``Outbox`` adds to the policy's.
    func jitter() -> Double {
        random.fraction()
    }

    /// Throws when the policy cannot work: fewer than one attempt.
    func validate() throws(InvalidOptionError) {
        try InvalidOptionError.check(attempts >= 1, "attempts", "must be at least 1, got \(attempts)")
    }
}

/// The policy's generator, shared by its copies, drawn from under a lock.
private final class RandomSource: Sendable {
    private let generator: Lock<any RandomNumberGenerator & Sendable>

    init(_ generator: some RandomNumberGenerator & Sendable) {
        self.generator = Lock(generator)
    }

    /// A number in 0..<1: the top 53 bits of the next number over 2^53,
    /// so a generator that returns `1 << 63` gives exactly one half.
    func fraction() -> Double {
        Double(generator.withLock { $0.next() } >> 11) * 0x1p-53
    }
}

extension RetryPolicy {
    /// One failed attempt of a job retried by a policy.
    public struct FailedAttempt: Sendable {
        /// Which attempt failed: 1 for the first.
        public var number: Int
        /// Why it failed.
        public var error: any Error
        /// The wait before the next attempt, or `nil` when none follows:
        /// the error is not retryable, or this was the last attempt. When an
        /// ``Outbox`` holds the host of the upload's destination, the
        /// length the hold was armed for: the retry waits in the outbox
        /// until the hold ends (less than that for an attempt that failed
        /// after the hold began; zero while the hold is being armed), and
        /// while the host is probed, until its turn.
        public var nextRetryIn: Duration?
        /// The request that failed, when the attempt was one request of an
        /// upload whose uploader retries each on its own: "part 2",
        /// "complete upload" for a multipart upload. `nil` when the attempt
        /// was the whole upload, or a job that is not an upload.
        public var request: String?

        /// Creates a report of a failed attempt.
        public init(number: Int, error: any Error, nextRetryIn: Duration?, request: String? = nil) {
            self.number = number
            self.error = error
            self.nextRetryIn = nextRetryIn
            self.request = request
        }
    }
}

extension Job {
    /// A job that performs this job and retries it as `policy` says: only
    /// errors it finds retryable, with its waits between attempts.
    ///
    /// For a job that is not an upload, such as a call to the app's own
    /// backend. An upload is retried by its uploader, handed the policy as
    /// ``UploadAttempts`` (see "Who retries what" above): the job of an
    /// uploader that retries each request, wrapped in this, would send each
    /// failing request again as many times over.
    ///
    /// ```swift
    /// let token = try await Job.task { try await api.uploadToken() }.retry(RetryPolicy(attempts: 3)).value
    /// ```
    ///
    /// - Parameters:
    ///   - policy: Which errors to retry, how often, after how long.
    ///   - onFailedAttempt: Told of each failed attempt (but a cancelled
    ///     one) before the wait that follows it, from the thread the
    ///     attempt failed on.
    public func retry(
        _ policy: RetryPolicy,
        onFailedAttempt: (@Sendable (RetryPolicy.FailedAttempt) -> Void)? = nil
    ) -> Job<Success> {
        retry(policy, onRetry: onFailedAttempt, givingUp: onFailedAttempt)
    }

    /// `retry(_:onFailedAttempt:)`, telling `onRetry` of each failed
    /// attempt a retry follows, and `givingUp` of the one none follows.
    /// When `heldFor` says, after a failure, that a gate holds the
    /// attempts' host, the retry goes to the gate at once, which lets it
    /// go when the hold ends: the wait told is the hold's.
    func retry(
        _ policy: RetryPolicy,
        onRetry: (@Sendable (RetryPolicy.FailedAttempt) -> Void)?,
        givingUp: (@Sendable (RetryPolicy.FailedAttempt) -> Void)?,
        heldFor: (@Sendable () -> Duration?)? = nil
    ) -> Job<Success> {
        Job { controller in
            let started = Lock(0)
            let counted = Job { attempt in
                started.withLock { $0 += 1 }
                attempt.perform(self) { attempt.complete(with: $0) }
            }
            let retried = counted.retry(attempts: policy.attempts) { retry, error in
                guard policy.retries(retry, after: error) else { return nil }
                // Held: the gate lets the retry go when the hold ends.
                let hold = heldFor?()
                let wait = hold ?? policy.wait(beforeRetry: retry, after: error)
                onRetry?(RetryPolicy.FailedAttempt(number: retry, error: error, nextRetryIn: wait))
                return hold == nil ? wait : .zero
            }
            controller.perform(retried) { outcome in
                // The error no retry follows, whichever attempt it came from.
                if case .failure(let error) = outcome, UploadFailure(error) != .cancelled, !controller.isCompleted {
                    let number = started.withLock { $0 }
                    givingUp?(RetryPolicy.FailedAttempt(number: number, error: error, nextRetryIn: nil))
                }
                controller.complete(with: outcome)
            }
        }
    }
}
