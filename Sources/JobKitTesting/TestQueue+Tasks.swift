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
        startTask(detached: false, name: name, priority: priority, operation: operation)
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
        startTask(detached: true, name: name, priority: priority, operation: operation)
    }
}

// MARK: - Unfinished tasks

extension TestQueue {
    /// A task the queue started that has not finished, and where it waits.
    ///
    /// Read ``TestQueue/unfinishedTasks`` after ``TestQueue/run()`` or
    /// ``TestQueue/advance(by:)``: a task that is not asleep on the
    /// queue's ``TestQueue/clock`` waits for something else, and once the
    /// queue holds no work, for something the queue does not run.
    public struct UnfinishedTask: Sendable, Equatable, CustomStringConvertible {
        /// Where an unfinished task waits.
        public enum State: Sendable, Equatable, CustomStringConvertible {
            /// Not started yet: its first item is due on the queue, and
            /// ``TestQueue/run()`` starts it.
            case notStarted
            /// Asleep on the queue's clock (or one of its child tasks
            /// is): ``TestQueue/advance(by:)`` to `deadline` wakes it.
            case asleep(until: Clock.Instant)
            /// Not asleep on the clock, while the queue holds work, due
            /// or later, that may be what it waits for.
            case waiting
            /// Not asleep on the clock, and the queue holds no work:
            /// nothing the queue runs can resume it. It waits for
            /// something outside the queue: an actor with an executor of
            /// its own (the main actor), real time (`Task.sleep` on
            /// `ContinuousClock`), real I/O, a continuation nobody has
            /// resumed yet, or a task that does not prefer the queue.
            case stranded

            /// Where the task waits, in words: "asleep on queue.clock
            /// until 3.0 seconds".
            public var description: String {
                switch self {
                case .notStarted: "not started: its first item is due on the queue"
                case .asleep(let deadline): "asleep on queue.clock until \(deadline.offset)"
                case .waiting: "suspended, not on queue.clock, while the queue holds work"
                case .stranded: "suspended outside the queue: nothing left on it can resume the task"
                }
            }
        }

        /// The order in which the queue started the task, from 1.
        public let number: Int
        /// The name the task was started with, if any.
        public let name: String?
        /// Where it waits.
        public let state: State

        /// The task and where it waits, in one line:
        /// `task 2 "search": asleep on queue.clock until 0.3 seconds`.
        public var description: String {
            "task \(number)\(name.map { " \"\($0)\"" } ?? ""): \(state)"
        }
    }

    /// The tasks this queue started (through
    /// ``schedule(name:priority:operation:)``, ``scheduleDetached(name:priority:operation:)``
    /// or a `Job.task` performed on it) that have not finished, in the
    /// order they were started.
    ///
    /// Work that escapes the queue is silent otherwise: ``run()`` returns,
    /// ``isIdle`` is `true`, and a task is still suspended on something the
    /// queue does not run. Expect none at the end of a test:
    ///
    /// ```swift
    /// try queue.advance(by: .seconds(1))
    /// #expect(queue.unfinishedTasks.isEmpty)
    /// ```
    ///
    /// and a failure says which task waits where:
    /// `task 1 "refresh": suspended outside the queue: nothing left on it
    /// can resume the task`. Tasks started with `Task(executorPreference:)`
    /// are not known to the queue, nor are the child tasks of those it
    /// started, nor the tasks those start with `Task { }`: their sleeps
    /// count as the started task's.
    public var unfinishedTasks: [UnfinishedTask] {
        let records = tasks.withLock { $0.unfinished }
        let holdsWork = !isIdle
        return records.map { record in
            UnfinishedTask(number: record.number, name: record.name, state: state(of: record, holdsWork: holdsWork))
        }
    }

    private func state(of record: TaskRegistry.Record, holdsWork: Bool) -> UnfinishedTask.State {
        if !record.started {
            .notStarted
        } else if let deadline = record.asleepUntil {
            .asleep(until: Clock.Instant(offset: deadline))
        } else if holdsWork {
            .waiting
        } else {
            .stranded
        }
    }

    /// Where the task numbered `number` waits, for the snapshots of the
    /// job that started it: words that follow "its task".
    private func status(ofTask number: Int) -> String {
        guard let record = tasks.withLock({ $0.record(number) }) else { return "has finished" }
        return "is \(state(of: record, holdsWork: !isIdle))"
    }

    /// Starts a task that prefers this queue, known to it until it
    /// finishes.
    func startTask<Success: Sendable>(
        detached: Bool,
        name: String?,
        priority: TaskPriority?,
        operation: @escaping @Sendable @isolated(any) () async throws -> Success
    ) -> ScheduledTask<Success> {
        let number = tasks.withLock { $0.start(name: name) }
        let tag = TaskTag(queue: id, number: number)
        let run: @Sendable () async throws -> Success = { [self] in
            tasks.withLock { $0.markStarted(number) }
            defer { tasks.withLock { $0.finish(number) } }
            return try await TestQueue.$currentTask.withValue(tag) { try await operation() }
        }
        let task =
            detached
            ? Task.detached(name: name, executorPreference: self, priority: priority, operation: run)
            : Task(name: name, executorPreference: self, priority: priority, operation: run)
        return ScheduledTask(task) { [weak self] in self?.status(ofTask: number) ?? "has finished" }
    }

    /// Notes that the current task, if the queue started it (or it is a
    /// child of one it started), is asleep on the clock until `deadline`.
    /// - Returns: What ends the note, or `nil` if there is nothing to note.
    func noteSleep(until deadline: Duration) -> (number: Int, sleep: Int)? {
        guard let tag = TestQueue.currentTask, tag.queue == id else { return nil }
        return tasks.withLock { $0.beginSleep(of: tag.number, until: deadline) }.map { (tag.number, $0) }
    }

    /// Ends a note of ``noteSleep(until:)``; ending it again does nothing.
    func endSleep(_ note: (number: Int, sleep: Int)) {
        tasks.withLock { $0.endSleep(note.sleep, of: note.number) }
    }

    /// The task of a queue that the current task is, or is a child of, or
    /// was started by with `Task { }` (which copies task-local values).
    @TaskLocal static var currentTask: TaskTag?
}

/// A task a test queue started, as its task-local value.
struct TaskTag: Sendable {
    /// The ``TestQueue/id`` of the queue that started it.
    let queue: Int
    /// Its number on that queue.
    let number: Int
}

/// The tasks a test queue started that have not finished, with the sleeps
/// on its clock that they (or their child tasks) are in.
struct TaskRegistry: Sendable {
    struct Record: Sendable {
        var number: Int
        var name: String?
        /// Whether its first item ran.
        var started = false
        /// The sleeps going on, by their number, with their deadlines.
        var sleeps: [(sleep: Int, deadline: Duration)] = []

        /// The earliest deadline of the sleeps going on, if any.
        var asleepUntil: Duration? { sleeps.lazy.map(\.deadline).min() }
    }

    private var records: [Int: Record] = [:]
    private var lastNumber = 0
    private var lastSleep = 0

    /// Records a task starting, and returns its number.
    mutating func start(name: String?) -> Int {
        lastNumber += 1
        records[lastNumber] = Record(number: lastNumber, name: name)
        return lastNumber
    }

    mutating func markStarted(_ number: Int) {
        records[number]?.started = true
    }

    mutating func finish(_ number: Int) {
        records[number] = nil
    }

    func record(_ number: Int) -> Record? {
        records[number]
    }

    /// The unfinished tasks, in the order they started.
    var unfinished: [Record] {
        records.values.sorted { $0.number < $1.number }
    }

    /// Records a sleep of the task `number`, if it has not finished, and
    /// returns the sleep's number.
    mutating func beginSleep(of number: Int, until deadline: Duration) -> Int? {
        guard records[number] != nil else { return nil }
        lastSleep += 1
        records[number]?.sleeps.append((lastSleep, deadline))
        return lastSleep
    }

    mutating func endSleep(_ sleep: Int, of number: Int) {
        records[number]?.sleeps.removeAll { $0.sleep == sleep }
    }
}
