/// One performance of a group: starts children up to the concurrency
/// limit, records their outcomes, and reports once.
///
/// Every decision (which child starts next, whether the group is done) is
/// taken under the lock and acted on after unlocking.
///
/// A child starts in two steps. The group enqueues a *ticket*, a closure
/// that captures the run alone (so the run is its context and it allocates
/// nothing, like the block of a hand-written `DispatchGroup` loop). When a
/// ticket runs, on the queue, it takes the next child in input order,
/// makes the child's state and runs the child's body right there. So a
/// child's bookkeeping exists only while it runs: a million queued children
/// cost a million queued blocks and nothing more.
///
/// A single "launcher" loop enqueues tickets. A completion that frees room
/// in a bounded group while the loop runs only counts one more ticket for
/// the loop to enqueue, so children that complete synchronously, even on a
/// queue that runs work inline, never cause recursion. On an
/// ``AsynchronousJobQueue`` that cannot happen, and a completion enqueues
/// its ticket itself.
///
/// The counting is `DispatchGroup`'s (enter per ticket, leave per
/// completion, notify at zero), kept in this run's lock rather than in a
/// `DispatchGroup` object: `DispatchGroup.notify` can only target a
/// `DispatchQueue`, so with an injected `TestQueue` or `ImmediateQueue` the
/// group would finish on a real thread, after the test had looked, and the
/// lock is needed anyway for the failure policy and the collected values.
final class GroupRun<Element: Sendable>: Sendable {
    private struct Inner: Sendable {
        /// The child the next ticket starts.
        var nextIndex = 0
        /// Tickets enqueued so far.
        var ticketCount = 0
        /// Tickets enqueued whose child has not completed yet: the children
        /// running or about to.
        var activeCount = 0
        var completedCount = 0
        /// Whether a launcher loop is enqueueing tickets.
        var isLaunching = false
        /// Tickets counted for the running launcher loop to enqueue.
        var pendingTickets = 0
        var isFinished = false
        var firstError: (any Error)?
        var values: [Element?]
        /// The running children with their input index, for cancellation.
        /// A child's slot is its state's `index`.
        var running = Slots<(index: Int, state: JobState<Element>)>()
    }

    private enum Completion: Sendable {
        case none
        case launch
        case enqueueTicket
        case finish(Result<[Element], any Error>, cancelling: [JobState<Element>])
    }

    private let jobs: [Job<Element>]
    private let maxConcurrent: Int
    private let failurePolicy: FailurePolicy
    private let collectsValues: Bool
    private let queue: any JobQueue
    /// Whether `queue` may run work inline, so tickets must be enqueued by
    /// a launcher loop to keep the stack flat.
    private let needsLoop: Bool
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
        self.needsLoop = !(queue is any AsynchronousJobQueue)
        self.report = report
        self.lock = Lock(Inner(values: collectsValues ? Array(repeating: nil, count: jobs.count) : []))
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
        let tickets = lock.withLock { inner -> Int in
            guard !inner.isFinished else { return 0 }
            inner.ticketCount = min(maxConcurrent, jobs.count)
            inner.activeCount = inner.ticketCount
            inner.isLaunching = needsLoop
            return inner.ticketCount
        }
        if needsLoop {
            launch(tickets)
        } else {
            for _ in 0..<tickets { enqueueTicket() }
        }
    }

    private func enqueueTicket() {
        // Captures the run alone: no allocation for the closure.
        queue.enqueue { [self] in startNext() }
    }

    /// Enqueues `count` tickets, then those counted meanwhile, until none is
    /// left. Runs with `isLaunching` set, and clears it, under the lock,
    /// when it returns.
    private func launch(_ count: Int) {
        var count = count
        while true {
            for _ in 0..<count { enqueueTicket() }
            count = lock.withLock { inner in
                defer { inner.pendingTickets = 0 }
                if inner.pendingTickets == 0 { inner.isLaunching = false }
                return inner.pendingTickets
            }
            if count == 0 { return }
        }
    }

    /// A ticket runs: starts the next child here, unless the group finished.
    private func startNext() {
        let next = lock.withLock { inner -> (Int, JobState<Element>)? in
            guard !inner.isFinished else { return nil }
            let index = inner.nextIndex
            inner.nextIndex += 1
            let child = JobState<Element>(queue: queue, index: inner.running.nextSlot) { [self] slot, outcome in
                childCompleted(slot, outcome)
            }
            let slot = inner.running.insert((index, child))
            assert(slot == child.index, "Internal inconsistency: a child's slot moved")
            return (index, child)
        }
        guard let (index, child) = next else { return }
        child.run(jobs[index].body)
    }

    private func childCompleted(_ slot: Int, _ outcome: Result<Element, any Error>) {
        let completion = lock.withLock { inner -> Completion in
            let entry = inner.running.remove(at: slot)
            inner.activeCount -= 1
            inner.completedCount += 1
            guard !inner.isFinished else { return .none }
            guard let (index, _) = entry else {
                preconditionFailure("Internal inconsistency: a running child had no slot")
            }
            switch outcome {
            case .success(let value):
                if collectsValues { inner.values[index] = value }
            case .failure(let error):
                if failurePolicy == .failFast {
                    inner.isFinished = true
                    return .finish(.failure(error), cancelling: inner.running.removeAll().map(\.state))
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
            if inner.ticketCount < jobs.count && inner.activeCount < maxConcurrent {
                inner.ticketCount += 1
                inner.activeCount += 1
                if !needsLoop { return .enqueueTicket }
                if inner.isLaunching {
                    inner.pendingTickets += 1
                    return .none
                }
                inner.isLaunching = true
                return .launch
            }
            return .none
        }
        switch completion {
        case .none:
            break
        case .launch:
            launch(1)
        case .enqueueTicket:
            enqueueTicket()
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
            return inner.running.removeAll().map(\.state)
        }
        for child in cancelling { child.cancel() }
    }
}
