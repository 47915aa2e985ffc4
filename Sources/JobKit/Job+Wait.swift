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
    ///   queue that targets it: the job runs there, and that thread would be
    ///   waiting (a concurrent queue of your own is refused too);
    /// - inside work that an inline queue (`ImmediateQueue`) runs, a job's
    ///   body or handler there included: the job starts after that work
    ///   returns;
    /// - on a `TestQueue`, which runs work only when the test runs it;
    /// - in a Swift task, whose thread the tasks that share it need (the
    ///   main actor's, or the cooperative pool's, one thread per core).
    ///
    /// A wait on a global queue, from any thread but a task's, is allowed.
    /// A wait that could never end for a reason these checks cannot see is
    /// not refused: a job whose work hops to a queue the caller holds (to
    /// `.main`, while the main thread waits), a wait inside a `sync` onto
    /// another queue. A job that may never complete (a server that never
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
            return "JobKit: \(name) was called in a Swift task. Blocking its thread holds up the tasks that "
                + "share it (the main actor's, or the cooperative pool's, one thread per core), and the job "
                + "may need them: await the job's value instead, `try await job.value(on: queue)`."
        }
        if Trampoline.isInsideCall {
            return "JobKit: \(name) was called inside work that an inline queue (ImmediateQueue) runs, a job's "
                + "body or handler there included, where the job could start only once that work returns: the "
                + "wait would never end. Build the next job with `then` instead, or perform it with a handler."
        }
        if let refusing = queue as? any RefusingBlockingWait {
            return "JobKit: \(name) on \(refusing.whyWaitingNeverEnds)"
        }
        if let dispatchQueue = queue as? DispatchQueue, isRunning(dispatchQueue) {
            let isMain = dispatchQueue.label == DispatchQueue.main.label
            let thread =
                isMain
                ? "the main thread, which runs the main queue"
                : "the thread running the queue \"\(dispatchQueue.label)\""
            let concurrent = isMain ? "" : " (a concurrent queue's thread waiting for its queue is refused too)"
            return "JobKit: \(name) was called on \(thread), the queue the job runs on: the job would wait "
                + "for the thread, and the thread for the job, forever\(concurrent). Wait on another queue "
                + "(the default, `.global()`), or perform the job with a handler."
        }
        return nil
    }

    /// Whether the calling thread runs work of `queue`, or of a queue that
    /// targets it: then `queue` runs nothing else until that work returns,
    /// if it is serial. A global queue has many threads, and is never held.
    private static func isRunning(_ queue: DispatchQueue) -> Bool {
        if isGlobal(queue) { return false }
        // The queue is marked once, with JobKit's own key, and the mark is
        // never replaced: libdispatch releases a replaced value while a
        // thread running the queue may be reading it.
        marking.withLock { _ in
            if queue.getSpecific(key: runningKey) == nil {
                queue.setSpecific(key: runningKey, value: true)
            }
        }
        // Whether the current queue, or a queue it targets, is marked.
        return DispatchQueue.getSpecific(key: runningKey) == true
    }

    /// Whether `queue` is one of the global queues, which keep no values of
    /// their own (Apple's libdispatch stops the process that sets one).
    /// They are the only queues whose labels start with `com.apple.root.`,
    /// on every platform; on Apple platforms `global(qos:)` gives the same
    /// object each time, too.
    private static func isGlobal(_ queue: DispatchQueue) -> Bool {
        let classes: [DispatchQoS.QoSClass] = [
            .background, .utility, .default, .userInitiated, .userInteractive, .unspecified,
        ]
        return queue.label.hasPrefix("com.apple.root.") || classes.contains { queue === DispatchQueue.global(qos: $0) }
    }

    private static let runningKey = DispatchSpecificKey<Bool>()

    /// Taken while a queue is marked: one mark per queue, set once.
    private static let marking = Lock(())
}

/// A queue on which a blocking wait never ends, whatever thread waits:
/// `TestQueue`, which runs work only when the test runs it.
package protocol RefusingBlockingWait: JobQueue {
    /// The queue, why a wait would never end, and what to do instead: "a
    /// TestQueue: it runs work only when …".
    var whyWaitingNeverEnds: String { get }
}
