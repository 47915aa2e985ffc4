import JobKit

/// A `TaskScheduling` that captures operations without running them,
/// until the test says so: the *test* double of `DefaultTaskScheduler`.
///
/// With it a test can stop between "the task was started" and "the task
/// ran", and assert both states:
///
/// ```swift
/// let scheduler = ManualTaskScheduler()
/// let model = CounterModel(scheduler: scheduler)
/// model.buttonTapped()                  // schedules the load
/// #expect(model.label == "")            // not yet
/// await scheduler.runAll()
/// #expect(model.label == "42")
/// ```
///
/// ``runAll()`` runs what was captured, in the order it was scheduled,
/// each operation to completion before the next one starts. Each runs in a
/// real task started with `DefaultTaskScheduler` (so names, priorities,
/// actor isolation and detachment behave as in production), which
/// `ScheduledTask.cancel()` cancels. A handle cancelled before its
/// operation ran means the operation never runs; awaiting it throws
/// `CancellationError`. One difference with production: a non-detached
/// operation inherits the task-local values of the task that calls
/// ``runAll()``, not of the code that scheduled it.
///
/// Thread-safe: operations can be scheduled from any thread.
public final class ManualTaskScheduler: TaskScheduling, Sendable {
    /// Thrown by ``runUntilIdle(maxRounds:)`` when it reached its round
    /// limit with operations still waiting: operations that keep scheduling
    /// operations forever, or a chain longer than the limit.
    public struct RunawayError: Error, Equatable, CustomStringConvertible, Sendable {
        /// How many rounds of ``ManualTaskScheduler/runAll()`` ran.
        public let rounds: Int
        /// How many operations were still waiting.
        public let pendingCount: Int

        /// What happened, in one line: what is known, and how to go on.
        public var description: String {
            "ManualTaskScheduler.runUntilIdle stopped after \(rounds) rounds, its limit (maxRounds), with "
                + "\(pendingCount) operations still pending: either some operation keeps scheduling operations, "
                + "or the chain is longer than the limit; raise it with runUntilIdle(maxRounds:)"
        }
    }

    private struct State: Sendable {
        var calls: [TaskSchedulingCall] = []
        var captured: [any CapturedOperationProtocol] = []
    }

    private let state = Lock(State())

    /// Creates a scheduler with nothing captured.
    public init() {}

    /// Every call made so far, in order.
    public var calls: [TaskSchedulingCall] {
        state.withLock { $0.calls }
    }

    /// The number of captured operations waiting to run (cancelled ones
    /// excluded).
    public var pendingCount: Int {
        let captured = state.withLock { $0.captured }
        return captured.count { !$0.isCancelled }
    }

    /// Whether no operation is waiting to run.
    public var isIdle: Bool {
        pendingCount == 0
    }

    /// Records the call and captures `operation`, to run in a
    /// `Task(name:priority:)` on the next ``runAll()``.
    @discardableResult
    public func schedule<Success: Sendable>(
        name: String?,
        priority: TaskPriority?,
        operation: @escaping @Sendable @isolated(any) () async throws -> Success
    ) -> ScheduledTask<Success> {
        capture(.scheduled(name: name, priority: priority), operation)
    }

    /// Records the call and captures `operation`, to run in a
    /// `Task.detached(name:priority:)` on the next ``runAll()``.
    @discardableResult
    public func scheduleDetached<Success: Sendable>(
        name: String?,
        priority: TaskPriority?,
        operation: @escaping @Sendable @isolated(any) () async throws -> Success
    ) -> ScheduledTask<Success> {
        capture(.detached(name: name, priority: priority), operation)
    }

    /// Runs every operation captured so far, in the order it was scheduled,
    /// awaiting each one before starting the next.
    ///
    /// Operations scheduled while this runs (by the operations themselves,
    /// say) are kept for the next call; cancelled ones are skipped. If the
    /// calling task is cancelled, the running operation is cancelled and
    /// the rest stay captured.
    public func runAll() async {
        let batch = state.withLock { state in
            defer { state.captured = [] }
            return state.captured
        }
        for (index, operation) in batch.enumerated() {
            if Task.isCancelled {
                let rest = batch[index...]
                state.withLock { $0.captured.insert(contentsOf: rest, at: 0) }
                return
            }
            await operation.run()
        }
    }

    /// Calls ``runAll()`` until no operation is waiting, so operations
    /// scheduled by operations run too.
    ///
    /// - Parameter maxRounds: The most calls to ``runAll()`` before it
    ///   gives up, so that operations that keep scheduling operations
    ///   forever cannot hang the test. A thousand by default.
    /// - Throws: ``RunawayError`` if operations are still waiting after
    ///   `maxRounds` rounds; `CancellationError` if the calling task is
    ///   cancelled.
    public func runUntilIdle(maxRounds: Int = 1000) async throws {
        var rounds = 0
        while !isIdle {
            try Task.checkCancellation()
            guard rounds < maxRounds else {
                throw RunawayError(rounds: rounds, pendingCount: pendingCount)
            }
            rounds += 1
            await runAll()
        }
    }

    private func capture<Success: Sendable>(
        _ call: TaskSchedulingCall,
        _ operation: @escaping @Sendable @isolated(any) () async throws -> Success
    ) -> ScheduledTask<Success> {
        let captured = CapturedOperation(call, operation)
        state.withLock { state in
            state.calls.append(call)
            state.captured.append(captured)
        }
        return ScheduledTask(cancel: captured.cancel, result: { await captured.result })
    }
}

// MARK: - Captured operations

/// What ``ManualTaskScheduler`` needs of a captured operation, whatever its
/// value type.
private protocol CapturedOperationProtocol: Sendable {
    var isCancelled: Bool { get }
    func run() async
}

/// One captured operation: waiting, running in its task, or done.
private final class CapturedOperation<Success: Sendable>: CapturedOperationProtocol {
    typealias Operation = @Sendable @isolated(any) () async throws -> Success

    private enum Phase: Sendable {
        case waiting(Operation)
        case starting(isCancelled: Bool)
        case running(ScheduledTask<Success>)
        case cancelledBeforeRunning
        case done
    }

    private let call: TaskSchedulingCall
    private let phase: Lock<Phase>
    private let outcome = Promise<Result<Success, any Error>>()

    init(_ call: TaskSchedulingCall, _ operation: @escaping Operation) {
        self.call = call
        self.phase = Lock(.waiting(operation))
    }

    var isCancelled: Bool {
        phase.withLock { phase in
            if case .cancelledBeforeRunning = phase { return true }
            return false
        }
    }

    /// The operation's outcome, once it ran or was cancelled.
    var result: Result<Success, any Error> {
        get async { await outcome.value }
    }

    /// Cancels the operation: it never runs if it has not started, and its
    /// task is cancelled if it has.
    @Sendable func cancel() {
        let action = phase.withLock { phase -> CancelAction in
            switch phase {
            case .waiting:
                phase = .cancelledBeforeRunning
                return .reportCancelled
            case .starting:
                phase = .starting(isCancelled: true)
                return .none
            case .running(let task):
                return .cancel(task)
            case .cancelledBeforeRunning, .done:
                return .none
            }
        }
        switch action {
        case .reportCancelled: outcome.fulfill(.failure(CancellationError()))
        case .cancel(let task): task.cancel()
        case .none: break
        }
    }

    private enum CancelAction {
        case reportCancelled
        case cancel(ScheduledTask<Success>)
        case none
    }

    /// Runs the operation in its own task and waits for it, unless it was
    /// cancelled. If the calling task is cancelled meanwhile, so is the
    /// operation's task.
    func run() async {
        let operation = phase.withLock { phase -> Operation? in
            guard case .waiting(let operation) = phase else { return nil }
            phase = .starting(isCancelled: false)
            return operation
        }
        guard let operation else { return }
        let scheduler = DefaultTaskScheduler()
        let task =
            call.isDetached
            ? scheduler.scheduleDetached(name: call.name, priority: call.priority, operation: operation)
            : scheduler.schedule(name: call.name, priority: call.priority, operation: operation)
        let cancelledWhileStarting = phase.withLock { phase -> Bool in
            guard case .starting(let isCancelled) = phase else {
                preconditionFailure("Internal inconsistency: captured operation started twice")
            }
            phase = .running(task)
            return isCancelled
        }
        if cancelledWhileStarting { task.cancel() }
        let result = await withTaskCancellationHandler {
            await task.result
        } onCancel: {
            task.cancel()
        }
        phase.withLock { $0 = .done }
        outcome.fulfill(result)
    }
}
