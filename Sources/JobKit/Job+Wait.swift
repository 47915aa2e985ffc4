import Dispatch

// MARK: - A blocking wait, for scripts and tools

extension Job {
    /// Runs the job on `queue` and blocks the calling thread until it
    /// completes: its value, or the error it failed with, thrown.
    ///
    /// For command-line tools and scripts, whose top-level code is
    /// synchronous:
    ///
    /// ```swift
    /// let release = try fetchLatestRelease().performAndWait()
    /// print(release.version)
    /// ```
    ///
    /// In async code, await ``value`` instead; in an app, perform the job
    /// with a handler. A blocking wait that could never end is refused: the
    /// process stops with a message that says why (a programming error, as
    /// a `precondition` is), rather than hanging, when the wait is made
    ///
    /// - on the thread running `queue` (the main thread, for `.main`), or a
    ///   queue that runs on it: the job runs there, and that thread would
    ///   be waiting;
    /// - inside a job's body or a handler, or work an inline queue runs
    ///   (`ImmediateQueue`): the job starts after that work returns;
    /// - on a `TestQueue`, which runs work only when the test runs it;
    /// - in a Swift task, whose threads the tasks a job starts need.
    ///
    /// A job that itself waits for a queue the caller holds (its work hops
    /// to `.main` while the main thread waits) is not detected: give such a
    /// job a handler. A job that may never complete (a server that never
    /// answers) is waited for as long: bound it with ``timeout(after:)``.
    ///
    /// - Parameter queue: Where the job and its children run. Defaults to
    ///   the global concurrent dispatch queue.
    /// - Returns: The job's value.
    /// - Throws: The job's error.
    @available(*, noasync, message: "in async code, await the job's value: try await job.value")
    public func performAndWait(on queue: any JobQueue = DispatchQueue.global()) throws -> Success {
        if let refusal = WaitRefusal.reason(on: queue) {
            fatalError(refusal)
        }
        let wait = BlockingWait<Success>()
        // The handler runs on the thread that completes the job, not
        // through `queue`: the wait needs the queue for the job only.
        JobState<Success>(queue: queue, hopsToQueue: false) { outcome in wait.complete(with: outcome) }.start(body)
        return try wait.outcome().get()
    }
}

/// The outcome of a performance that a thread waits for.
final class BlockingWait<Success: Sendable>: Sendable {
    private let completed = DispatchSemaphore(value: 0)
    private let result = Lock<Result<Success, any Error>?>(nil)

    func complete(with outcome: Result<Success, any Error>) {
        result.withLock { $0 = outcome }
        completed.signal()
    }

    /// Blocks until ``complete(with:)`` was called, and returns its outcome.
    func outcome() -> Result<Success, any Error> {
        completed.wait()
        // Set before the signal, and set once.
        return result.withLock { $0! }
    }
}

/// When a thread must not wait for a job.
package enum WaitRefusal {
    /// Why a blocking wait on this thread, for a job performed on `queue`,
    /// could never end; `nil` if it can.
    package static func reason(on queue: any JobQueue) -> String? {
        let name = "performAndWait(on:)"
        if withUnsafeCurrentTask(body: { $0 != nil }) {
            return "JobKit: \(name) was called in a Swift task. Blocking its thread holds up the tasks "
                + "the job may need (the pool has one thread per core): await the job's value instead, "
                + "`try await job.value(on: queue)`."
        }
        if Trampoline.isInsideCall {
            return "JobKit: \(name) was called inside a job's body, a handler or work an inline queue runs, "
                + "where the job could start only once that work returns, and the wait would never end. "
                + "Build the next job with `then` instead, or perform it with a handler."
        }
        if let refusing = queue as? any RefusingBlockingWait {
            return "JobKit: \(name) on \(refusing.nameForRefusal): \(refusing.whyWaitingNeverEnds)"
        }
        if let dispatchQueue = queue as? DispatchQueue, isRunning(dispatchQueue) {
            let thread =
                dispatchQueue.label == DispatchQueue.main.label
                ? "the main thread, which runs the main queue"
                : "the thread running the queue \"\(dispatchQueue.label)\""
            return "JobKit: \(name) was called on \(thread), the queue the job runs on: the job would wait "
                + "for the thread, and the thread for the job, forever. Wait on another queue (the default, "
                + "`.global()`), or perform the job with a handler."
        }
        return nil
    }

    /// Whether the calling thread runs work of `queue`, or of a queue that
    /// runs on it: then `queue` runs nothing else until that work returns.
    /// A global queue has many threads, and is never held.
    private static func isRunning(_ queue: DispatchQueue) -> Bool {
        // The global queues are the only ones with this prefix, on every
        // platform; they keep no values of their own.
        if queue.label.hasPrefix("com.apple.root.") { return false }
        // Marks the queue, then asks whether the current queue or a queue
        // it runs on is marked. The key is JobKit's own: setting it again
        // changes nothing a user sees.
        queue.setSpecific(key: runningKey, value: true)
        return DispatchQueue.getSpecific(key: runningKey) == true
    }

    private static let runningKey = DispatchSpecificKey<Bool>()
}

/// A queue on which a blocking wait never ends, whatever thread waits:
/// `TestQueue`, which runs work only when the test runs it.
package protocol RefusingBlockingWait: JobQueue {
    /// The queue, as the refusal names it: "a TestQueue".
    var nameForRefusal: String { get }
    /// Why a wait would never end, and what to do instead.
    var whyWaitingNeverEnds: String { get }
}
