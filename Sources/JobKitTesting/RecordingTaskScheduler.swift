import JobKit

/// A `TaskScheduling` that starts real tasks, records every call, and
/// can wait until all the tasks it started have finished.
///
/// Use it when the code under test should really run concurrently, and the
/// test only needs to know when it is done and how the tasks were started:
///
/// ```swift
/// let scheduler = RecordingTaskScheduler()
/// let store = Store(scheduler: scheduler)
/// store.save(note)                       // starts a background task
/// try await scheduler.waitForTasks()
/// #expect(store.savedNotes == [note])
/// #expect(scheduler.calls == [.scheduled(priority: .background)])
/// ```
///
/// Tasks start exactly as with `DefaultTaskScheduler` (names, priorities,
/// detached or not), except that each operation runs inside a wrapper that
/// counts it, so an operation isolated to an actor hops to it from the
/// global executor instead of starting there.
public final class RecordingTaskScheduler: TaskScheduling, Sendable {
    /// Thrown by ``waitForTasks(timeout:)`` when tasks are still running
    /// once the timeout has passed.
    public struct WaitTimeout: Error, Equatable, CustomStringConvertible, Sendable {
        /// How many tasks were still running.
        public let runningCount: Int
        /// How long the wait lasted.
        public let timeout: Duration

        /// What happened, in one line, naming how many tasks still run.
        public var description: String {
            "\(runningCount) task\(runningCount == 1 ? "" : "s") still running after \(timeout)"
        }
    }

    private struct State: Sendable {
        var calls: [TaskSchedulingCall] = []
        var runningCount = 0
        var idleWaiters: [Promise<Void>] = []
    }

    private let state = Lock(State())
    private let base = DefaultTaskScheduler()

    /// Creates a scheduler that has started nothing yet.
    public init() {}

    /// Every call made so far, in order.
    public var calls: [TaskSchedulingCall] {
        state.withLock { $0.calls }
    }

    /// The number of tasks started and not finished yet.
    public var runningCount: Int {
        state.withLock { $0.runningCount }
    }

    /// Records the call and starts `operation` with `Task(name:priority:)`.
    @discardableResult
    public func schedule<Success: Sendable>(
        name: String?,
        priority: TaskPriority?,
        operation: @escaping @Sendable @isolated(any) () async throws -> Success
    ) -> ScheduledTask<Success> {
        willStart(.scheduled(name: name, priority: priority))
        return base.schedule(name: name, priority: priority, operation: counted(operation))
    }

    /// Records the call and starts `operation` with `Task.detached`.
    @discardableResult
    public func scheduleDetached<Success: Sendable>(
        name: String?,
        priority: TaskPriority?,
        operation: @escaping @Sendable @isolated(any) () async throws -> Success
    ) -> ScheduledTask<Success> {
        willStart(.detached(name: name, priority: priority))
        return base.scheduleDetached(name: name, priority: priority, operation: counted(operation))
    }

    /// Waits until every task this scheduler started has finished,
    /// including tasks started through it by those tasks while they ran.
    ///
    /// Returns at once if none is running. Otherwise it suspends until the
    /// last one finishes (no polling). Don't call it from one of the
    /// scheduler's own tasks: that task is running, so it would time out.
    ///
    /// - Parameter timeout: How long to wait, in real time. Five seconds by
    ///   default.
    /// - Throws: ``WaitTimeout``, naming how many tasks are still running,
    ///   if they have not all finished by then; `CancellationError` if the
    ///   waiting task is cancelled.
    public func waitForTasks(timeout: Duration = .seconds(5)) async throws {
        let idle = state.withLock { state -> Promise<Void>? in
            guard state.runningCount > 0 else { return nil }
            let idle = Promise<Void>()
            state.idleWaiters.append(idle)
            return idle
        }
        guard let idle else { return }
        do {
            try await withTimeLimit(timeout) { try await idle.cancellableValue() }
        } catch is TimeLimitExceeded {
            throw WaitTimeout(runningCount: runningCount, timeout: timeout)
        }
    }

    private func willStart(_ call: TaskSchedulingCall) {
        state.withLock { state in
            state.calls.append(call)
            state.runningCount += 1
        }
    }

    private func didFinish() {
        let waiters = state.withLock { state -> [Promise<Void>] in
            state.runningCount -= 1
            guard state.runningCount == 0 else { return [] }
            defer { state.idleWaiters = [] }
            return state.idleWaiters
        }
        for waiter in waiters { waiter.fulfill(()) }
    }

    private func counted<Success: Sendable>(
        _ operation: @escaping @Sendable @isolated(any) () async throws -> Success
    ) -> @Sendable () async throws -> Success {
        { [self] in
            defer { didFinish() }
            return try await operation()
        }
    }
}
