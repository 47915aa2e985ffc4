/// One performance of a group: starts children up to the concurrency
/// limit, records their outcomes, and reports once.
///
/// Every decision (which child starts next, whether the group is done) is
/// taken under the lock and acted on after unlocking. A single "launcher"
/// loop starts children; a child that completes while the loop runs only
/// frees a slot that the loop then fills, so children that complete
/// synchronously never cause recursion.
///
/// The counting is `DispatchGroup`'s (enter per start, leave per
/// completion, notify at zero), kept in this run's lock rather than in a
/// `DispatchGroup` object: `DispatchGroup.notify` can only target a
/// `DispatchQueue`, so with an injected `TestQueue` or `ImmediateQueue` the
/// group would finish on a real thread, after the test had looked, and the
/// lock is needed anyway for the failure policy and the collected values.
final class GroupRun<Element: Sendable>: Sendable {
    private struct Inner: Sendable {
        var nextIndex = 0
        var runningCount = 0
        var completedCount = 0
        var isLaunching = false
        var isFinished = false
        var firstError: (any Error)?
        var values: [Element?]
        /// The states of running children, by index, for cancellation.
        var running: [JobState<Element>?]
    }

    private enum Completion: Sendable {
        case none
        case relaunch
        case finish(Result<[Element], any Error>, cancelling: [JobState<Element>])
    }

    private let jobs: [Job<Element>]
    private let maxConcurrent: Int
    private let failurePolicy: FailurePolicy
    private let collectsValues: Bool
    private let queue: any JobQueue
    private let report: @Sendable (Result<[Element], any Error>) -> Void
    private let lock: Lock<Inner>

    init(
        jobs: [Job<Element>],
        maxConcurrent: Int,
        failurePolicy: FailurePolicy,
        collectsValues: Bool,
        queue: any JobQueue,
        report: @escaping @Sendable (Result<[Element], any Error>) -> Void
    ) {
        self.jobs = jobs
        self.maxConcurrent = maxConcurrent
        self.failurePolicy = failurePolicy
        self.collectsValues = collectsValues
        self.queue = queue
        self.report = report
        self.lock = Lock(
            Inner(
                values: collectsValues ? Array(repeating: nil, count: jobs.count) : [],
                running: Array(repeating: nil, count: jobs.count)
            )
        )
    }

    /// Starts the group. `registerCancel` hooks ``cancel()`` to the parent.
    func start(registerCancel: (@escaping @Sendable () -> Void) -> Void) {
        guard maxConcurrent >= 1 else {
            report(.failure(JobError.invalidArgument("maxConcurrent must be at least 1, got \(maxConcurrent)")))
            return
        }
        guard !jobs.isEmpty else {
            report(.success([]))
            return
        }
        registerCancel { [self] in cancel() }
        lock.withLock { $0.isLaunching = true }
        launch()
    }

    /// Starts children while there is room. Runs with `isLaunching` set,
    /// and clears it, under the lock, when there is nothing left to start.
    private func launch() {
        while true {
            let next = lock.withLock { inner -> (Int, JobState<Element>)? in
                guard !inner.isFinished, inner.nextIndex < jobs.count, inner.runningCount < maxConcurrent else {
                    inner.isLaunching = false
                    return nil
                }
                let index = inner.nextIndex
                inner.nextIndex += 1
                inner.runningCount += 1
                let child = JobState<Element>(queue: queue, hopsToQueue: false) { [self] outcome in
                    childCompleted(index, outcome)
                }
                inner.running[index] = child
                return (index, child)
            }
            guard let (index, child) = next else { return }
            child.start(jobs[index].body)
        }
    }

    private func childCompleted(_ index: Int, _ outcome: Result<Element, any Error>) {
        let completion = lock.withLock { inner -> Completion in
            if !inner.running.isEmpty { inner.running[index] = nil }
            inner.runningCount -= 1
            inner.completedCount += 1
            guard !inner.isFinished else { return .none }
            switch outcome {
            case .success(let value):
                if collectsValues { inner.values[index] = value }
            case .failure(let error):
                if failurePolicy == .failFast {
                    inner.isFinished = true
                    return .finish(.failure(error), cancelling: takeRunning(&inner))
                }
                if inner.firstError == nil { inner.firstError = error }
            }
            if inner.completedCount == jobs.count {
                inner.isFinished = true
                if let error = inner.firstError { return .finish(.failure(error), cancelling: []) }
                let values = collectsValues ? inner.values.map { $0! } : []
                inner.values = []
                return .finish(.success(values), cancelling: [])
            }
            if !inner.isLaunching && inner.nextIndex < jobs.count {
                inner.isLaunching = true
                return .relaunch
            }
            return .none
        }
        switch completion {
        case .none:
            break
        case .relaunch:
            launch()
        case .finish(let result, let cancelling):
            for child in cancelling { child.cancel() }
            report(result)
        }
    }

    /// Cancels every running child; children not started never start.
    func cancel() {
        let cancelling = lock.withLock { inner -> [JobState<Element>] in
            guard !inner.isFinished else { return [] }
            inner.isFinished = true
            return takeRunning(&inner)
        }
        for child in cancelling { child.cancel() }
    }

    private func takeRunning(_ inner: inout Inner) -> [JobState<Element>] {
        let running = inner.running.compactMap { $0 }
        inner.running = []
        return running
    }
}
