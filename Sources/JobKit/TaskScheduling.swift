/// Something that starts unstructured Swift tasks.
///
/// Code that must start a task from synchronous code (a button action, a
/// delegate callback, a job's body) takes a `TaskScheduling` instead of
/// calling `Task { }` itself. In production that is
/// ``DefaultTaskScheduler``, which starts real tasks; in tests it is a
/// double from `JobKitTesting`: `ManualTaskScheduler` captures the
/// operations and runs them when the test says so, and
/// `RecordingTaskScheduler` starts real tasks, records every call and
/// waits until all of them finished.
///
/// Before, a test has to guess when the task is done:
///
/// ```swift
/// func buttonTapped() {
///     Task { label = "\(try await api.loadCount())" }
/// }
/// ```
///
/// After, one injected property makes it deterministic:
///
/// ```swift
/// func buttonTapped() {
///     scheduler.schedule { @MainActor in self.label = "\(try await self.api.loadCount())" }
/// }
/// ```
///
/// and the test runs the task when it wants:
///
/// ```swift
/// let scheduler = ManualTaskScheduler()
/// let model = CounterModel(api: api, scheduler: scheduler)
/// model.buttonTapped()
/// await scheduler.runAll()
/// #expect(model.label == "42")
/// ```
///
/// Conforming types must be safe to call from any thread.
public protocol TaskScheduling: Sendable {
    /// Starts `operation` in a new unstructured task, as `Task { }` does:
    /// the task inherits the caller's task-local values and priority.
    ///
    /// - Parameters:
    ///   - name: A name for the task, shown by debuggers and tools, or `nil`.
    ///   - priority: The task's priority, or `nil` to inherit it.
    ///   - operation: The work. It runs on the actor it is isolated to
    ///     (write `{ @MainActor in ... }` for the main actor), or on the
    ///     global concurrent executor.
    /// - Returns: A handle that can cancel the task and await its result.
    @discardableResult
    func schedule<Success: Sendable>(
        name: String?,
        priority: TaskPriority?,
        operation: @escaping @Sendable @isolated(any) () async throws -> Success
    ) -> ScheduledTask<Success>

    /// Starts `operation` in a new detached task, as `Task.detached { }`
    /// does: the task inherits neither task-local values nor priority.
    ///
    /// - Parameters:
    ///   - name: A name for the task, shown by debuggers and tools, or `nil`.
    ///   - priority: The task's priority, or `nil` for the default.
    ///   - operation: The work.
    /// - Returns: A handle that can cancel the task and await its result.
    @discardableResult
    func scheduleDetached<Success: Sendable>(
        name: String?,
        priority: TaskPriority?,
        operation: @escaping @Sendable @isolated(any) () async throws -> Success
    ) -> ScheduledTask<Success>
}

extension TaskScheduling {
    /// Starts `operation` in a new unstructured task with no name and the
    /// caller's priority: the short form of
    /// ``schedule(name:priority:operation:)``.
    ///
    /// ```swift
    /// scheduler.schedule { await model.refresh() }
    /// ```
    ///
    /// - Parameter operation: The work.
    /// - Returns: A handle that can cancel the task and await its result.
    @discardableResult
    public func schedule<Success: Sendable>(
        _ operation: @escaping @Sendable @isolated(any) () async throws -> Success
    ) -> ScheduledTask<Success> {
        schedule(name: nil, priority: nil, operation: operation)
    }
}

// MARK: - DefaultTaskScheduler

/// The production ``TaskScheduling``: starts real Swift tasks.
///
/// ``schedule(name:priority:operation:)`` is `Task(name:priority:operation:)`
/// and ``scheduleDetached(name:priority:operation:)`` is `Task.detached`.
/// Where the running OS cannot name tasks (before macOS 26 / iOS 26), the
/// name is ignored.
public struct DefaultTaskScheduler: TaskScheduling {
    /// Creates the scheduler. It holds no state: every instance is the same.
    public init() {}

    /// Starts `operation` with `Task(name:priority:operation:)`.
    @discardableResult
    public func schedule<Success: Sendable>(
        name: String?,
        priority: TaskPriority?,
        operation: @escaping @Sendable @isolated(any) () async throws -> Success
    ) -> ScheduledTask<Success> {
        start(detached: false, name: name, priority: priority, operation: operation)
    }

    /// Starts `operation` with `Task.detached(name:priority:operation:)`.
    @discardableResult
    public func scheduleDetached<Success: Sendable>(
        name: String?,
        priority: TaskPriority?,
        operation: @escaping @Sendable @isolated(any) () async throws -> Success
    ) -> ScheduledTask<Success> {
        start(detached: true, name: name, priority: priority, operation: operation)
    }

    /// Starts the task, named where the OS supports task names (the name
    /// is dropped elsewhere). Called synchronously by the caller's task, so
    /// a non-detached task still inherits its priority and task-local
    /// values.
    private func start<Success: Sendable>(
        detached: Bool,
        name: String?,
        priority: TaskPriority?,
        operation: @escaping @Sendable @isolated(any) () async throws -> Success
    ) -> ScheduledTask<Success> {
        ScheduledTask(
            detached
                ? Task.detached(name: name, priority: priority, operation: operation)
                : Task(name: name, priority: priority, operation: operation)
        )
    }
}

// MARK: - ScheduledTask

/// A handle on a task started by a ``TaskScheduling``: it can cancel the
/// task and await its result.
///
/// Like `Task`, dropping the handle does not cancel the task, and awaiting
/// ``value`` or ``result`` waits for the task to finish even if the
/// awaiting task is cancelled.
public struct ScheduledTask<Success: Sendable>: Sendable {
    private enum Storage: Sendable {
        case task(Task<Success, any Error>)
        case custom(cancel: @Sendable () -> Void, result: @Sendable () async -> Result<Success, any Error>)
    }

    private let storage: Storage

    /// Where the task is, in words that follow "its task" ("is asleep on
    /// queue.clock until 3.0 seconds"), for the snapshots of the job that
    /// started it; `nil` when the scheduler cannot tell.
    package let status: (@Sendable () -> String)?

    /// Wraps a real task.
    /// - Parameter task: The task this handle cancels and awaits.
    public init(_ task: Task<Success, any Error>) {
        storage = .task(task)
        status = nil
    }

    /// Wraps a real task whose scheduler can say where it is.
    package init(_ task: Task<Success, any Error>, status: @escaping @Sendable () -> String) {
        storage = .task(task)
        self.status = status
    }

    /// Creates a handle from two closures, for schedulers that do not start
    /// a `Task` at once (test doubles, custom executors).
    ///
    /// - Parameters:
    ///   - cancel: Cancels the work. It may be called any number of times,
    ///     from any thread, before or after the work finished.
    ///   - result: Waits for the work to finish and returns its outcome;
    ///     work cancelled before it started reports `CancellationError`.
    public init(
        cancel: @escaping @Sendable () -> Void,
        result: @escaping @Sendable () async -> Result<Success, any Error>
    ) {
        storage = .custom(cancel: cancel, result: result)
        status = nil
    }

    /// Cancels the task. An operation that has not started yet never
    /// starts, if the scheduler can prevent it; a running one sees
    /// `Task.isCancelled`. Cancelling a finished task does nothing.
    public func cancel() {
        switch storage {
        case .task(let task): task.cancel()
        case .custom(let cancel, _): cancel()
        }
    }

    /// Waits for the task to finish and returns its value, or throws the
    /// error it threw.
    public var value: Success {
        get async throws {
            try await result.get()
        }
    }

    /// Waits for the task to finish and returns its outcome.
    public var result: Result<Success, any Error> {
        get async {
            switch storage {
            case .task(let task): await task.result
            case .custom(_, let result): await result()
            }
        }
    }
}
