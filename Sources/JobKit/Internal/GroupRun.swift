/// One performance of a group: the storage of its state machine.
///
/// Each event (start, a ticket runs, a child completes, cancel) is decided
/// by ``GroupStateMachine`` under the lock and acted on after unlocking:
/// enqueue tickets, start a child, cancel children, report.
///
/// A ticket is a closure that captures the run alone (so the run is its
/// context and it allocates nothing, like the block of a hand-written
/// `DispatchGroup` loop). When it runs, on the queue, it makes the next
/// child's state and runs the child's body right there, so a child's
/// bookkeeping exists only while it runs: a million queued children cost a
/// million queued blocks and nothing more.
///
/// There is one code path whatever the queue: a completion that frees room
/// enqueues the next ticket through ``Trampoline``, so children that
/// complete synchronously never recurse, even on a queue that runs work
/// inline.
///
/// The counting is `DispatchGroup`'s (enter per ticket, leave per
/// completion, notify at zero), kept in this run's lock rather than in a
/// `DispatchGroup` object: `DispatchGroup.notify` can only target a
/// `DispatchQueue`, so with an injected `TestQueue` or `ImmediateQueue` the
/// group would finish on a real thread, after the test had looked, and the
/// lock is needed anyway for the failure policy and the collected values.
final class GroupRun<Element: Sendable>: Sendable {
    private typealias StateMachine = GroupStateMachine<Element, JobState<Element>>

    private let jobs: [Job<Element>]
    private let queue: any JobQueue
    private let report: @Sendable (Result<[Element], any Error>) -> Void
    private let lock: Lock<StateMachine>

    init(
        jobs: [Job<Element>],
        maxConcurrent: Int,
        failurePolicy: FailurePolicy,
        collectsValues: Bool,
        queue: any JobQueue,
        report: @escaping @Sendable (Result<[Element], any Error>) -> Void
    ) {
        self.jobs = jobs
        self.queue = queue
        self.report = report
        self.lock = Lock(
            StateMachine(
                count: jobs.count,
                maxConcurrent: maxConcurrent,
                failurePolicy: failurePolicy,
                collectsValues: collectsValues
            )
        )
    }

    /// Starts the group. `registerCancel` hooks ``cancel()`` to the parent.
    func start(registerCancel: (@escaping @Sendable () -> Void) -> Void) {
        switch lock.withLock({ $0.start() }) {
        case .none:
            break
        case .finish(let result):
            report(result)
        case .enqueueTickets(let count):
            registerCancel { [self] in cancel() }
            for _ in 0..<count { enqueueTicket() }
        }
    }

    private func enqueueTicket() {
        // Captures the run alone: no allocation for the closure.
        Trampoline.enqueue({ [self] in ticketRan() }, on: queue)
    }

    /// A ticket runs: starts the next child here, unless the group is over.
    private func ticketRan() {
        let next = lock.withLock { machine in
            machine.ticketRan { slot in
                JobState<Element>(queue: queue, index: slot) { [self] slot, outcome in
                    childCompleted(slot, outcome)
                }
            }
        }
        guard let (index, child) = next else { return }
        child.run(jobs[index].body)
    }

    private func childCompleted(_ slot: Int, _ outcome: Result<Element, any Error>) {
        switch lock.withLock({ $0.childCompleted(slot: slot, outcome: outcome) }) {
        case .none:
            break
        case .enqueueTicket:
            enqueueTicket()
        case .finish(let result, let cancelling):
            for child in cancelling { child.cancel() }
            report(result)
        }
    }

    /// Cancels every running child; children not started never start.
    func cancel() {
        for child in lock.withLock({ $0.cancel() }) { child.cancel() }
    }
}
