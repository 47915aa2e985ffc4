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
/// the whole upload; an uploader of multipart or tus uploads retries each
/// request (a part, the creation, the completion) on its own, so a part
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
    /// failed on, with the wait before the retry that follows it; the last
    /// one, which no retry follows, with none.
    public var onFailedAttempt: (@Sendable (RetryPolicy.FailedAttempt) -> Void)?
    /// Whether cancelling the upload keeps what a resumable upload has
    /// stored (a multipart or tus upload: its parts and its manifest), so
    /// that a later upload of the same file to the same destination
    /// resumes it; `false` (the default) discards it. An
    /// ``Outbox`` keeps them when it pauses or closes, and discards them
    /// through ``Uploader/discardResumableUpload(of:)`` when it removes a
    /// post.
    public var keepsStoredPartsWhenCancelled = false
    /// Whether the upload first asks the storage if it already holds the
    /// media whole, where the uploader can tell (a storage whose `ETag` is
    /// the file's MD5, a tus server holding the finished upload its
    /// manifest names), and finishes without sending it if so; `false`
    /// (the default) sends it. An ``Outbox`` asks for
    /// each medium of a post it resumes from its folder: a run killed
    /// after the storage stored a medium, before its receipt was recorded,
    /// would otherwise send it again whole.
    public var checksStorageFirst = false
    /// Runs before each attempt and fails it with the error it returns:
    /// the injected faults of `FaultInjectingUploader`.
    package var fault: (@Sendable (Media) -> (any Error)?)?
    /// Admits each attempt toward its host: an ``Outbox``'s uploads go as
    /// one client.
    var gate: (any RequestGate)?
    /// What carries every request of the upload, in place of the
    /// uploader's own session: an ``Outbox``'s, when it has one; `nil`
    /// (the default) for each uploader's own.
    var transport: (any UploadTransport)?
    /// Names the upload to ``transport`` the same in every launch (an
    /// outbox's post and medium), so that a background session's task
    /// that outlived the app is found again by the upload that made it;
    /// `nil` (the default) for none.
    var uploadName: String?

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

    /// A job that performs `attempt`, an attempt at uploading `media` (the
    /// whole upload, or one of its requests), as these attempts say: each
    /// performance limited to ``timeout``, performed again as ``retry``
    /// says, each failure told to ``onFailedAttempt``, the last one with no
    /// wait.
    ///
    /// A bare `URLError` becomes ``UploadError/network(_:_:)`` naming
    /// the media's destination, and a time limit reached
    /// ``UploadError/timedOut(_:after:)``. Fewer than one attempt, or a
    /// time limit that is not above zero, fails with
    /// ``InvalidOptionError`` before anything is performed.
    ///
    /// An uploader that retries its requests itself wraps each request in
    /// this, so each request's last failure is told; any other wraps its
    /// whole upload, as the default ``Uploader/upload(_:attempts:progress:)``
    /// does.
    public func retrying<Success: Sendable>(_ attempt: Job<Success>, for media: Media) -> Job<Success> {
        retrying(attempt, for: media, request: nil, bytes: nil, givingUp: onFailedAttempt, stopping: nil)
    }

    /// `retrying(_:for:)`, with each failed attempt named after `request`
    /// when it is one request of the upload, sending `bytes` (`nil`: the
    /// whole medium), the last one, which no retry
    /// follows, told to `givingUp` rather than to ``onFailedAttempt``; and
    /// no retry, nor any report, once `stopping` says so.
    func retrying<Success: Sendable>(
        _ attempt: Job<Success>,
        for media: Media,
        request: String?,
        bytes: Int64?,
        givingUp: (@Sendable (RetryPolicy.FailedAttempt) -> Void)?,
        stopping: (@Sendable () -> Bool)?
    ) -> Job<Success> {
        do {
            try validate()
        } catch {
            return .failed(error)
        }
        let destination = media.destination
        var limited = attempt
        if let fault {
            limited = Job { controller in
                if let error = fault(media) {
                    controller.fail(with: error)
                } else {
                    controller.perform(attempt) { controller.complete(with: $0) }
                }
            }
        }
        limited = limited.mapError { error in
            (error as? URLError).map { UploadError.network(destination, $0) } ?? error
        }
        if let limit = timeout {
            limited = limited.timeout(after: limit).mapError { error in
                error as? JobError == .timedOut ? UploadError.timedOut(destination, after: limit) : error
            }
        }
        if let gate {
            limited = gate.admitting(limited, toward: destination, bytes: bytes ?? (try? media.byteCount()) ?? 0)
        }
        var policy = retry
        var onRetry = onFailedAttempt
        var givingUp = givingUp
        if let request {
            if let told = onRetry {
                onRetry = { attempt in told(attempt.naming(request)) }
            }
            if let told = givingUp {
                givingUp = { attempt in told(attempt.naming(request)) }
            }
        }
        if let stopping {
            let isRetryable = retry.isRetryable
            policy.isRetryable = { error in !stopping() && isRetryable(error) }
            if let told = onFailedAttempt {
                onRetry = { attempt in
                    if !stopping() { told(attempt) }
                }
            }
        }
        // A failure that left the host held: the gate lets the retry go
        // when the hold ends; the policy's wait on top would send it up to
        // twice the slot late.
        let held = gate.map { gate in { @Sendable in gate.holdLength(toward: destination) } }
        return limited.retry(policy, onRetry: onRetry, givingUp: givingUp, heldFor: held)
    }

    /// Whether a request toward `url`, sent now, asks the server before it
    /// sends its body (`Expect: 100-continue`), as the ``Outbox`` that
    /// made these attempts says; `false` outside an outbox.
    package func asksFirst(toward url: URL) -> Bool {
        gate?.asksFirst(toward: url) ?? false
    }

    /// Tells the ``Outbox`` that made these attempts that a request toward
    /// `url` that asked first was let send its body (the server's `100
    /// Continue`): a server that takes requests again. Nothing outside an
    /// outbox.
    package func continued(toward url: URL) {
        gate?.continued(toward: url)
    }

    /// Throws when these attempts cannot be made: fewer than one, or a
    /// time limit that is not above zero.
    func validate() throws(InvalidOptionError) {
        try InvalidOptionError.within("retry") { () throws(InvalidOptionError) in try retry.validate() }
        try InvalidOptionError.check(positive: timeout, "timeout")
    }
}

extension RetryPolicy.FailedAttempt {
    /// This report, of an attempt at `request`.
    fileprivate func naming(_ request: String) -> Self {
        var named = self
        named.request = request
        return named
    }
}

/// What admits each attempt of an upload toward its host, before it is
/// sent: the pacing of an ``Outbox``, whose uploads go to each host as one
/// client.
protocol RequestGate: Sendable {
    /// A job that performs `attempt`, one request toward `url`'s host
    /// sending `bytes`, once the host admits it, and learns from its
    /// outcome.
    func admitting<Success: Sendable>(_ attempt: Job<Success>, toward url: URL, bytes: Int64) -> Job<Success>

    /// Whether a request toward `url`'s host, sent now, asks the server
    /// before it sends its body (`Expect: 100-continue`): the host turned
    /// the outbox away lately, or the phone's network failed.
    func asksFirst(toward url: URL) -> Bool

    /// Told that a request toward `url`'s host that asked first was let
    /// send its body: the server's `100 Continue`, seen as its first body
    /// bytes going.
    func continued(toward url: URL)

    /// How long `url`'s host is held now, if it is: no request goes
    /// toward it until the hold ends, when the gate lets the waiting ones
    /// go. `nil` when it takes requests.
    func holdLength(toward url: URL) -> Duration?
}

/// What carries the requests of an upload in place of its uploader's own
/// session: the transport of an ``Outbox``, handed to each upload it starts.
///
/// Core holds it without knowing HTTP: the HTTP uploaders take it as the
/// `HTTPTransport` it is (`HTTP/`), and an uploader that sends no HTTP
/// request (a folder, memory) has no use for it.
protocol UploadTransport: Sendable {}
