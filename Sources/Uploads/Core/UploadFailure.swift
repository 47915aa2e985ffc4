import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a failed upload's error means for trying it again: the one reading
/// of an error that ``RetryPolicy``, ``UploadAttempts``, publishing and the
/// ``Outbox`` share.
///
/// Every policy decides from this, and from nothing else:
///
/// | Failure | ``RetryPolicy`` (default) | ``Outbox`` | The outbox toward the host |
/// |---|---|---|---|
/// | ``transient`` | retried after a jittered wait | waits, tried again later | three in a row hold it |
/// | ``offline`` | retried after a jittered wait | waits for the network | one request probes it |
/// | ``pushback(retryAfter:)`` | retried after the server's wait, if it asks for one | waits for the host | holds it, halves the requests in flight |
/// | ``permanent`` | fails at once | fails, until ``Outbox/retry(_:)`` | ends a run of transient failures |
/// | ``cancelled`` | never retried | waits, unless the app cancelled | nothing |
///
/// ``UploadError`` says what each of its cases means (``UploadError/failure``).
/// An app's own uploader says what its errors mean by adopting
/// ``ClassifiedUploadError``:
///
/// ```swift
/// struct QuotaError: ClassifiedUploadError {
///     var resetsIn: Duration?
///     var failure: UploadFailure { resetsIn.map { .pushback(retryAfter: $0) } ?? .permanent }
/// }
/// ```
public enum UploadFailure: Sendable, Hashable {
    /// It can pass by itself: a connection that timed out, was lost or
    /// refused, a server name not found, a time limit reached, a server
    /// answering `408`, `500`, `502` or `504`.
    case transient
    /// The device has no network: not connected, cellular data off or not
    /// allowed while roaming, a call in progress. It says nothing of the
    /// server.
    case offline
    /// The server is overloaded and asks its clients to slow down: a `429`
    /// or a `503`, with the wait its `Retry-After` asks for, if any.
    case pushback(retryAfter: Duration?)
    /// Trying again sends the same request to the same answer: another
    /// `4xx`, a missing file, an invalid destination, an answer that could
    /// not be understood, and any error that says nothing of itself.
    case permanent
    /// The work was cancelled: not a failure of the upload or the server.
    case cancelled

    /// Reads `error`: what a ``ClassifiedUploadError`` (an ``UploadError``
    /// among them) says of itself; ``cancelled`` for a `CancellationError`;
    /// a bare `URLError` as ``UploadError/network(_:_:)`` reads it;
    /// ``transient`` for JobKit's `JobError.timedOut`; ``permanent`` for
    /// any other error.
    public init(_ error: any Error) {
        switch error {
        case let error as any ClassifiedUploadError:
            self = error.failure
        case is CancellationError:
            self = .cancelled
        case let error as URLError:
            self = Self(networkCode: error.code)
        case let error as JobError where error == .timedOut:
            self = .transient
        default:
            self = .permanent
        }
    }

    /// Whether the same upload may succeed later without anything being
    /// changed: ``transient``, ``offline`` or ``pushback(retryAfter:)``.
    /// What ``RetryPolicy`` retries by default.
    public var isTransient: Bool {
        switch self {
        case .transient, .offline, .pushback: true
        case .permanent, .cancelled: false
        }
    }

    /// What a connection failing with `code` means.
    init(networkCode code: URLError.Code) {
        self =
            if Self.offlineCodes.contains(code) {
                .offline
            } else if Self.transientCodes.contains(code) {
                .transient
            } else {
                .permanent
            }
    }

    /// What an answer with `status` means, when its status alone says.
    init?(status: Int, retryAfter: @autoclosure () -> Duration?) {
        switch status {
        case 429, 503: self = .pushback(retryAfter: retryAfter())
        case 408, 500, 502, 504: self = .transient
        default: return nil
        }
    }

    /// The failures of a device without network.
    private static let offlineCodes: Set<URLError.Code> = [
        .notConnectedToInternet, .dataNotAllowed, .internationalRoamingOff, .callIsActive,
    ]

    /// The failures of a connection that can pass.
    private static let transientCodes: Set<URLError.Code> = [
        .timedOut, .networkConnectionLost, .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed,
    ]
}

/// An error that says what it means for trying again (``UploadFailure``),
/// so that retries and the ``Outbox`` treat it as they treat an
/// ``UploadError`` of the same meaning.
///
/// Adopt it in the errors of an app's own ``Uploader``. An error that does
/// not adopt it is ``UploadFailure/permanent``, and fails at once rather
/// than being retried blindly: all but a `CancellationError`, a `URLError`
/// (read as ``UploadError/network(_:_:)`` reads it) and JobKit's
/// `JobError.timedOut` (transient).
public protocol ClassifiedUploadError: Error {
    /// What this error means for trying again.
    var failure: UploadFailure { get }
}
