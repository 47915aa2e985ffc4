import JobKit

/// One request of an upload, not yet made: its name, and a job that makes
/// one attempt at it. Whoever makes a call decides whether it is retried
/// (``RequestRetries/retrying(_:for:stopping:)``, which names its failed
/// attempts after it: "part 2", "PATCH at 1048576") or made once (an
/// abort).
struct HTTPCall<Answer: Sendable>: Sendable {
    /// The request's name in failure reports.
    var name: String
    /// A job that makes one attempt.
    var attempt: Job<Answer>
    /// The bytes its body sends: an outbox probing a host sends its
    /// smallest request first.
    var bytes: Int64 = 0
}
