import JobKit

// MARK: - TaskExecutor

extension TestQueue: TaskExecutor {
    /// Queues a piece of a task that prefers this queue (its code up to its
    /// next suspension) as an item due now, like any other work.
    ///
    /// Tasks prefer the queue when they are started with
    /// `Task(executorPreference: queue)` or through the queue's own
    /// ``schedule(name:priority:operation:)``. Their nonisolated code, the
    /// child tasks they start with `async let` or a task group, and the
    /// default actors they call, then run only when the test calls
    /// ``run()``, ``advance(by:)`` or ``runNext()``, ordered with the
    /// queue's other work: in FIFO order, or drawn from the seed of
    /// ``Ordering/shuffled(seed:)``. The continuation after
    /// `await Task.yield()`, after a sleep on ``clock``, or after a
    /// continuation is resumed from another thread is one more item.
    ///
    /// ```swift
    /// let queue = TestQueue()
    /// let log = LockedValue<[String]>([])
    /// Task(executorPreference: queue) {
    ///     log.withValue { $0.append("started") }
    ///     await Task.yield()
    ///     log.withValue { $0.append("resumed") }
    /// }
    /// #expect(log.value == [])  // nothing runs until the test says so
    /// queue.runNext()
    /// #expect(log.value == ["started"])
    /// try queue.run()
    /// #expect(log.value == ["started", "resumed"])
    /// ```
    ///
    /// Code isolated to an actor with an executor of its own, the main
    /// actor among them, runs there and not on the queue; so do tasks
    /// started with `Task { }` or `Task.detached { }`, which do not inherit
    /// the preference.
    ///
    /// - Parameter job: The piece of the task to run.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        // Unowned: only this queue runs its items, so it outlives the call.
        let executor = asUnownedTaskExecutor()
        enqueue { job.runSynchronously(on: executor) }
    }
}

// MARK: - TaskScheduling

extension TestQueue: TaskScheduling {
    /// Starts `operation` in a new task that prefers this queue, as
    /// `Task(name:executorPreference:priority:operation:)` does: its code
    /// runs when the test runs the queue, starting with the next call to
    /// ``run()``. The task inherits the caller's task-local values and
    /// priority.
    ///
    /// Inject the queue where production code takes a `TaskScheduling`,
    /// and one object drives the tasks the code starts, the jobs it
    /// performs on the queue and the sleeps on its ``clock``.
    ///
    /// - Parameters:
    ///   - name: A name for the task, shown by debuggers and tools, or `nil`.
    ///   - priority: The task's priority, or `nil` to inherit it.
    ///   - operation: The work. An operation isolated to an actor with an
    ///     executor of its own (`{ @MainActor in ... }`) starts on the
    ///     queue and then runs on that actor.
    /// - Returns: A handle that can cancel the task and await its result.
    @discardableResult
    public func schedule<Success: Sendable>(
        name: String?,
        priority: TaskPriority?,
        operation: @escaping @Sendable @isolated(any) () async throws -> Success
    ) -> ScheduledTask<Success> {
        ScheduledTask(Task(name: name, executorPreference: self, priority: priority) { try await operation() })
    }

    /// Starts `operation` in a new detached task that prefers this queue,
    /// as `Task.detached(name:executorPreference:priority:operation:)`
    /// does: the task inherits neither task-local values nor priority, and
    /// its code runs when the test runs the queue.
    ///
    /// - Parameters:
    ///   - name: A name for the task, shown by debuggers and tools, or `nil`.
    ///   - priority: The task's priority, or `nil` for the default.
    ///   - operation: The work.
    /// - Returns: A handle that can cancel the task and await its result.
    @discardableResult
    public func scheduleDetached<Success: Sendable>(
        name: String?,
        priority: TaskPriority?,
        operation: @escaping @Sendable @isolated(any) () async throws -> Success
    ) -> ScheduledTask<Success> {
        ScheduledTask(Task.detached(name: name, executorPreference: self, priority: priority) { try await operation() })
    }
}
