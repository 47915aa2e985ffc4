import Dispatch
import Synchronization

/// What `try await job.value` keeps per await, written by hand around an
/// unsafe continuation: case 3's model of the floor that JobKit's
/// guarantees allow, to show what the rest of its path costs.
///
/// Like `job.value`, each await makes a state that holds the continuation
/// and an outcome latch, and a token for the work that completes it, whose
/// deinit fails the await if the work was dropped unrun; the continuation
/// goes to the winner of the latch through the same sequentially
/// consistent hand-over; the work calls a body closure, kept by the state
/// until then, with the token, as a job's work calls its body with a
/// controller. What it leaves out: the queue as `any JobQueue`,
/// `Trampoline`, and the completion path shared with handlers and
/// attachments.
enum AwaitModel {
    /// One await's state.
    ///
    /// Unchecked: `continuation` is written by the awaiting task before it
    /// publishes it through `arrivals` (acquiring and releasing), and taken
    /// by the latch's winner only after `arrivals` showed it published;
    /// `body` is set before the work that takes it is enqueued, and that
    /// work runs once; the atomics are the rest.
    final class State: @unchecked Sendable {
        private var continuation: UnsafeContinuation<Void, any Error>?
        /// Set before the one work item is enqueued, taken when it runs.
        fileprivate var body: (@Sendable (Token) -> Void)?
        /// 0 pending, 1 completed.
        private let latch = Atomic<UInt8>(0)
        /// 0 nobody, 1 the continuation came, 2 the outcome came.
        private let arrivals = Atomic<UInt8>(0)

        /// Whether the await completed.
        var isCompleted: Bool {
            latch.load(ordering: .acquiring) != 0
        }

        /// Hands the continuation over; `false` if the outcome came first.
        func handOver(_ continuation: UnsafeContinuation<Void, any Error>) -> Bool {
            self.continuation = continuation
            let cameFirst = arrivals.compareExchange(expected: 0, desired: 1, ordering: .acquiringAndReleasing)
                .exchanged
            if !cameFirst { self.continuation = nil }
            return cameFirst
        }

        /// Completes the await with `outcome` if nothing completed it first.
        func finish(_ outcome: Result<Void, any Error>) {
            guard latch.compareExchange(expected: 0, desired: 1, ordering: .sequentiallyConsistent).exchanged
            else { return }
            if arrivals.exchange(2, ordering: .acquiringAndReleasing) == 1 {
                continuation.take()?.resume(with: outcome)
            }
        }
    }

    /// What the work holds; fails the await if the work is dropped unrun.
    final class Token: Sendable {
        let state: State

        init(_ state: State) {
            self.state = state
        }

        /// Calls the body with this token, once.
        func run() {
            state.body.take()?(self)
        }

        /// Completes the await with success.
        func finish() {
            state.finish(.success(()))
        }

        deinit {
            // Checked first, as `job.value` does, so that the common case
            // makes no error.
            if !state.isCompleted { state.finish(.failure(BenchmarkFailure("the work was dropped"))) }
        }
    }

    /// Awaits `body`, run on `queue`, cancellable like `job.value`.
    @inline(__always)
    static func value(on queue: DispatchQueue, _ body: @escaping @Sendable (Token) -> Void) async throws {
        let state = State()
        try await withTaskCancellationHandler {
            try await withUnsafeThrowingContinuation { continuation in
                guard state.handOver(continuation) else {
                    continuation.resume(throwing: CancellationError())
                    return
                }
                state.body = body
                let token = Token(state)
                queue.async { token.run() }
            }
        } onCancel: {
            state.finish(.failure(CancellationError()))
        }
    }
}
