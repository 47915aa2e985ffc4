import Dispatch

/// A lazy unit of asynchronous work that reports one outcome.
///
/// A job wraps a closure that is handed a ``Controller`` and reports back
/// through it: a value with ``Controller/finish(with:)``, an error with
/// ``Controller/fail(with:)``. Creating a job runs nothing. A job is a
/// recipe: each call to ``perform(on:then:)`` runs the closure again, with
/// fresh state, independently of any other performance.
///
/// ```swift
/// let thumbnail = Job<Data> { controller in
///     renderer.render(photo) { result in controller.complete(with: result) }
/// }
/// thumbnail.perform(on: .main) { outcome in
///     imageView.show(outcome)
/// }
/// ```
///
/// ## Threading
///
/// The closure runs on the queue passed to ``perform(on:then:)``, and the
/// handler is called on that same queue, even when the closure reports its
/// outcome from another thread (a URLSession delegate queue, say). Children
/// started by combinators run on the same queue, so injecting one queue at
/// the top (`ImmediateQueue` or `TestQueue` in tests) drives a whole tree.
///
/// ## Guarantees
///
/// - Exactly once: the first outcome wins; later reports are dropped, from
///   any number of threads, and the handler runs once.
/// - Abandonment: a closure that releases its controller without reporting
///   fails the job with ``JobError/abandoned`` instead of hanging.
/// - Cancellation: ``JobHandle/cancel()`` completes the job at once with
///   `CancellationError`, runs its ``Controller/onCancel(_:)`` blocks and
///   cancels its children.
/// - Memory: once the job completes, every closure it held for that
///   performance is released.
/// - Depth: jobs nest through the combinators to any depth, a million
///   deep as well as two: a job's start, its outcome on its way to the job
///   that holds it and a cancel on its way to the jobs it holds keep a
///   thread's stack flat, on any queue. So does the release of a job built
///   of groups, races, zips or sequences a million deep, and of any mix
///   with them; a job built of one-job combinators alone (`map` of `map`
///   …) is released one level inside the next, which a thread of 512 KiB
///   holds for a few thousand levels.
public struct Job<Success: Sendable>: Sendable {
    /// The result a job reports: its value, or the error it failed with.
    public typealias Outcome = Result<Success, any Error>

    @usableFromInline let body: @Sendable (Controller) -> Void

    /// Creates a job from the closure that does its work.
    ///
    /// The closure runs each time the job is performed, on the queue it is
    /// performed on, and must eventually report through the controller it
    /// is given (or release it, which fails the job with
    /// ``JobError/abandoned``).
    ///
    /// - Parameter body: The work. It may report synchronously or later,
    ///   from any thread.
    public init(_ body: @escaping @Sendable (Controller) -> Void) {
        self.body = body
    }

    /// Runs the job on `queue` and calls `handler` once with its outcome.
    ///
    /// The job's closure is enqueued on `queue`; `handler` is called on
    /// `queue` too, exactly once, whatever thread the outcome is reported
    /// from, and never before the closure returns. A job that completes
    /// in its closure (a cached value, a `zip` of jobs that finish at once)
    /// has `handler` called as soon as the closure returns, in the same
    /// turn of `queue` rather than a turn of its own: on a `DispatchQueue`
    /// or a `TestQueue`, before work the closure enqueued there. A job that
    /// completes later has `handler` called in a turn of its own.
    ///
    /// Cancelling the returned handle completes the job at once with
    /// `CancellationError`; if the closure had not started yet, it never
    /// starts. A queue that drops the closure without running it (one torn
    /// down first) fails the job with ``JobError/abandoned``, and the
    /// handle says it completed.
    ///
    /// - Parameters:
    ///   - queue: Where the job and its children run. Defaults to the
    ///     global concurrent dispatch queue.
    ///   - handler: Called once with the job's outcome.
    /// - Returns: A handle that can cancel this performance.
    @discardableResult
    @inlinable
    public func perform(
        on queue: any JobQueue = DispatchQueue.global(),
        then handler: @escaping @Sendable (Outcome) -> Void
    ) -> JobHandle {
        // Inlinable, so that the caller's module, which knows `Success`,
        // makes the state and its token: made in generic code, each looks
        // up its type's metadata at run time.
        let state = JobState<Success>(queue: queue, hopsToQueue: true, handler: handler)
        let token = StateToken(state, callsWithSuccess: { handler, value in handler(.success(value)) })
        return state.performance(of: body, controlledBy: token)
    }
}

// MARK: - Constructors

extension Job {
    /// A job that finishes at once with `value`.
    public static func succeeded(_ value: Success) -> Job {
        Job { $0.finish(with: value) }
    }

    /// A job that fails at once with `error`.
    public static func failed(_ error: any Error) -> Job {
        Job { $0.fail(with: error) }
    }

    /// A job that never completes unless it is cancelled.
    ///
    /// Useful in tests of timeouts and cancellation. It is not reported as
    /// abandoned: it holds on to its controller until it is cancelled.
    public static var never: Job {
        Job { controller in
            // The cancel handler keeps the controller alive; cancellation
            // releases it, and with it the job's state.
            controller.onCancel { withExtendedLifetime(controller) {} }
        }
    }
}

extension Job where Success == Void {
    /// A job that finishes at once.
    public static var succeeded: Job { Job { $0.finish() } }
}
