import Dispatch
import Foundation
import JobKitTesting
import Testing

/// A Swift task executor that runs its jobs, one at a time, on a thread of
/// its own, until it is stopped.
///
/// A test that runs many rounds on real threads, each waiting for the
/// last, resumes after every wait: on Swift's cooperative pool, each
/// resumption waits for a thread that the suites beside it keep busy, and
/// a round that must follow a wait within seconds (another thread holds
/// on until it does) fails by timing. On a thread of its own the test
/// resumes at once and takes nothing from the pool.
public final class ThreadExecutor: TaskExecutor {
    private struct State {
        var jobs: [UnownedJob] = []
        var stopped = false
        /// The thread has returned: a job that comes later (a task that
        /// still prefers this executor) runs on a thread of its own.
        var finished = false
    }

    /// A lock that Thread Sanitizer sees, unlike `Mutex` on Linux.
    private let state = LockedValue(State())
    private let available = DispatchSemaphore(value: 0)

    /// Starts the thread.
    public init() {
        Thread.detachNewThread { [self] in run() }
    }

    /// Runs `job` on the executor's thread, after the jobs before it.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let finished = state.withValue { state in
            if !state.finished { state.jobs.append(job) }
            return state.finished
        }
        if finished {
            Thread.detachNewThread { [self] in job.runSynchronously(on: asUnownedTaskExecutor()) }
        } else {
            available.signal()
        }
    }

    /// Ends the thread once the jobs enqueued so far have run.
    public func stop() {
        state.withValue { $0.stopped = true }
        available.signal()
    }

    private func run() {
        while true {
            // allowed: this executor's own thread, idle until a job comes
            available.wait()
            let next = state.withValue { state -> UnownedJob?? in
                if !state.jobs.isEmpty { return state.jobs.removeFirst() }
                state.finished = state.stopped
                return state.stopped ? .some(nil) : nil
            }
            switch next {
            case .some(.some(let job)): job.runSynchronously(on: asUnownedTaskExecutor())
            case .some(.none): return
            case .none: continue
            }
        }
    }
}

/// Runs `body` with a ``ThreadExecutor`` of its own as its task's executor
/// preference, and stops it after.
public func onThreadOfItsOwn<T: Sendable>(_ body: () async throws -> T) async rethrows -> T {
    let executor = ThreadExecutor()
    defer { executor.stop() }
    return try await withTaskExecutorPreference(executor) { try await body() }
}

/// Runs each test it is on with a thread of its own as its executor
/// (``onThreadOfItsOwn(_:)``): for the tests that wait round after round
/// for real threads.
public struct OnThreadOfItsOwn: TestTrait, SuiteTrait, TestScoping {
    /// On a suite, its every test runs on a thread of its own.
    public var isRecursive: Bool { true }

    /// Runs the test with a thread of its own as its executor preference.
    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await TestSupport.onThreadOfItsOwn(function)
    }
}

extension Trait where Self == OnThreadOfItsOwn {
    /// Runs the test on a thread of its own (``OnThreadOfItsOwn``).
    public static var onThreadOfItsOwn: Self { OnThreadOfItsOwn() }
}
