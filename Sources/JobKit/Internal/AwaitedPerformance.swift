/// One performance of a job awaited by a Swift task, for
/// `Job.value(on:isolation:)`.
///
/// The cancellation handler of the awaiting task and the start of the job
/// race; this state decides who came first, under the lock:
/// - cancelled first: the job never starts, the continuation is resumed
///   with `CancellationError`;
/// - started first: a later cancellation cancels the running job (its
///   `onCancel` blocks run once, the continuation gets `CancellationError`).
///
/// Not generic (the job's state is held as `any JobCancelling`): `value`
/// is on the hot path, and every generic type costs a metadata lookup per
/// call from unspecialized code.
final class AwaitedPerformance: Sendable {
    private enum Phase: Sendable {
        case idle
        case cancelled
        case running(any JobCancelling)
    }

    private let phase = Lock<Phase>(.idle)

    /// Performs `body` on `queue` and resumes `continuation` once with the
    /// outcome, on the thread that completes the job (no queue hop: the
    /// awaiting task resumes on its own executor anyway).
    func start<Success>(
        _ body: @escaping @Sendable (Job<Success>.Controller) -> Void,
        on queue: any JobQueue,
        resuming continuation: UnsafeContinuation<Success, any Error>
    ) {
        let state = JobState<Success>(queue: queue, hopsToQueue: false) { outcome in
            continuation.resume(with: outcome)
        }
        let wasCancelled = phase.withLock { phase -> Bool in
            guard case .idle = phase else { return true }
            phase = .running(state)
            return false
        }
        if wasCancelled {
            state.cancel()  // resumes with CancellationError; the body never runs
        } else {
            state.start(body)
        }
    }

    /// Cancels the job if it started, or makes sure it never starts.
    func cancel() {
        let running = phase.withLock { phase -> (any JobCancelling)? in
            if case .running(let state) = phase { return state }
            phase = .cancelled
            return nil
        }
        running?.cancel()
    }
}
