import JobKit
import Synchronization

/// A queue that runs nothing until the test says so, with a virtual clock:
/// the *test* double of a `DispatchQueue`.
///
/// Work waits until ``run()`` (everything due now) or ``advance(by:)``
/// (move the clock and run what falls due), so a test can stop between two
/// steps of a job and assert the state in between. Delays pass in virtual
/// time: a 30-second timeout takes microseconds.
///
/// ```swift
/// let queue = TestQueue()
/// let outcome = LockedValue<Job<Data>.Outcome?>(nil)
/// download.timeout(after: .seconds(30)).perform(on: queue) { outcome.setValue($0) }
/// try queue.run()
/// #expect(outcome.value == nil)   // started, not finished
/// try queue.advance(by: .seconds(30))
/// #expect(throws: JobError.timedOut) { try outcome.value?.get() }
/// ```
///
/// Work runs in order of due time, and in enqueue order among work due at
/// the same time: the order of a serial queue. `TestQueue(ordering:
/// .shuffled(seed:))` models a concurrent queue instead: work due at the
/// same time runs in an order drawn from the seed, the same order for the
/// same seed on every run and machine as long as the work is enqueued in
/// the same order, which work enqueued from other threads may not be
/// (``exploreOrderings(seeds:maxSteps:_:)`` tries many seeds). ``now`` is
/// set to each item's due time before it runs.
/// Work enqueued while running is picked up by the same call if it falls
/// due. One call stops after ``maxSteps`` items with ``RunawayError``
/// instead of hanging the test: work that keeps enqueueing work, or a run
/// longer than the limit (raise it with `TestQueue(maxSteps:)`).
///
/// It drives async code the same way: the queue is a `TaskExecutor`, and
/// tasks that prefer it (started with
/// ``schedule(name:priority:operation:)``, for one) run as its items; the
/// sleeps of its ``clock`` end when ``advance(by:)`` reaches them, and
/// ``unfinishedTasks`` says where the tasks it started still wait.
///
/// Thread-safe: work can be enqueued from any thread. Work runs on the
/// thread that calls ``run()`` or ``advance(by:)``, outside the queue's lock.
public final class TestQueue: JobQueue, Sendable {
    /// Thrown when one call to ``run()`` or ``advance(by:)`` reached
    /// ``TestQueue/maxSteps`` items with more still due: work that
    /// re-enqueues itself forever, or a long but finite run (a 1 ms ticker
    /// over an hour) that needs a higher limit.
    public struct RunawayError: Error, CustomStringConvertible, Sendable {
        /// The number of items run before the call gave up.
        public let steps: Int
        /// The virtual time when it gave up.
        public let now: Duration
        /// The number of items still waiting.
        public let pendingCount: Int
        /// The tasks the queue started that had not finished: the one
        /// that keeps the queue busy, if a task does, is among them.
        public internal(set) var unfinishedTasks: [UnfinishedTask] = []

        /// What happened, in one line: what is known, and how to go on;
        /// then the unfinished tasks, one per line.
        public var description: String {
            "TestQueue stopped after running \(steps) items in one call, its step limit (maxSteps), with work "
                + "still due (now \(now), \(pendingCount) pending): either some work keeps enqueueing work, "
                + "or the run is longer than the limit; raise it with TestQueue(maxSteps:)"
                + unfinishedTasks.map { "\n  \($0)" }.joined()
        }
    }

    /// The order in which a test queue runs the work due at the same
    /// time.
    public enum Ordering: Sendable, Hashable, CustomStringConvertible {
        /// Enqueue order, as a serial queue runs work. The default.
        case fifo
        /// An order drawn from `seed`, as a concurrent queue may run work:
        /// each item to run is drawn, evenly, from every item due at that
        /// instant, work enqueued while running included. The same seed
        /// gives the same order every time, as long as the work is
        /// enqueued in the same order.
        case shuffled(seed: UInt64)

        /// The ordering as it is written in Swift: `.fifo` or
        /// `.shuffled(seed: 42)`.
        public var description: String {
            switch self {
            case .fifo: ".fifo"
            case .shuffled(let seed): ".shuffled(seed: \(seed))"
            }
        }
    }

    private struct State: Sendable {
        var now: Duration = .zero
        /// Draws which of the items due at the same time runs next; `nil`
        /// in FIFO order.
        var generator: SeededRandomNumberGenerator?
        /// Every item waiting, with its work.
        var items = ItemStore()

        /// Removes and returns the next item due by `time`, or `nil` if
        /// none is due. Throws instead, leaving every item as it was, once
        /// `steps` reached `maxSteps`.
        mutating func removeNext(
            dueBy time: Duration,
            steps: Int = 0,
            maxSteps: Int = .max
        ) throws(RunawayError) -> ItemStore.Item? {
            guard let due = items.nextDue, due <= time else { return nil }
            if steps >= maxSteps {
                throw RunawayError(steps: steps, now: now, pendingCount: items.count)
            }
            return items.removeNext(drawingWith: &generator)
        }
    }

    private let lock: Lock<State>

    /// The tasks the queue started that have not finished.
    let tasks = Lock(TaskRegistry())

    /// Tells this queue's tasks from another's, in their task-local tags:
    /// unlike an `ObjectIdentifier`, never reused by a later queue.
    let id = TestQueue.lastID.add(1, ordering: .relaxed).newValue
    private static let lastID = Atomic<Int>(0)

    /// The most items one call to ``run()`` or ``advance(by:)`` runs before
    /// it throws ``RunawayError``.
    public let maxSteps: Int

    /// The default of ``maxSteps``: a million.
    @usableFromInline static let defaultMaxSteps = 1_000_000

    /// The order in which work due at the same time runs.
    public let ordering: Ordering

    /// Creates a test queue whose clock starts at zero.
    /// - Parameters:
    ///   - ordering: The order of work due at the same time: enqueue order
    ///     (``Ordering/fifo``, a serial queue) by default, or an order drawn
    ///     from a seed (``Ordering/shuffled(seed:)``, a concurrent queue).
    ///   - maxSteps: The most items one call runs before it decides the
    ///     work is a runaway loop. A million by default.
    public init(ordering: Ordering = .fifo, maxSteps: Int = defaultMaxSteps) {
        self.ordering = ordering
        self.maxSteps = maxSteps
        var state = State()
        if case .shuffled(let seed) = ordering { state.generator = SeededRandomNumberGenerator(seed: seed) }
        lock = Lock(state)
    }

    /// The virtual time: how far the clock has been advanced since the
    /// queue was created.
    public var now: Duration {
        lock.withLock { $0.now }
    }

    /// The number of items waiting, due or not. Cancelled delayed work is
    /// not waiting.
    public var pendingCount: Int {
        lock.withLock { $0.items.count }
    }

    /// What is inconsistent in the queue's store of items, for the tests of
    /// `TestQueue` itself; empty when it is sound.
    var inconsistencies: [String] {
        lock.withLock { $0.items.inconsistencies() }
    }

    /// Whether no work is waiting: every job performed on this queue that
    /// completed left nothing behind (a timeout's timer or a retry's wait
    /// is cancelled with its job).
    public var isIdle: Bool {
        pendingCount == 0
    }

    /// Queues `work` to run at the current virtual time.
    public func enqueue(_ work: @escaping @Sendable () -> Void) {
        lock.withLock { state in
            state.items.insert(due: state.now, work: work)
        }
    }

    /// Queues `work` to run once the clock reaches now + `delay`.
    ///
    /// - Returns: A handle that cancels `work`: it is no longer pending
    ///   (``pendingCount`` drops), and it is released at once.
    @discardableResult
    public func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork {
        enqueueCancellable(work) { now in now + max(delay, .zero) }
    }

    /// Queues `work` to run once the clock reaches `instant`, or now if it
    /// already has: after every item already due by then.
    /// - Returns: A handle that removes `work` from the queue.
    func enqueue(at instant: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork {
        enqueueCancellable(work) { now in max(instant, now) }
    }

    /// Queues `work` to run at the time `due` gives for the clock's current
    /// time, and returns the handle that cancels it.
    @inline(__always)
    private func enqueueCancellable(
        _ work: @escaping @Sendable () -> Void,
        due: (Duration) -> Duration
    ) -> DelayedWork {
        let ticket = lock.withLock { state in
            state.items.insertCancellable(due: due(state.now), work: work)
        }
        return DelayedWork { [weak self] in self?.cancelDelayedWork(ticket) }
    }

    private func cancelDelayedWork(_ ticket: ItemStore.Ticket) {
        let work = lock.withLock { $0.items.remove(ticket) }
        _ = work  // released here, outside the lock
    }

    /// Runs every item that is due now, in order, including items enqueued
    /// meanwhile that are due now, until none is due. The clock does not
    /// move.
    /// - Throws: ``RunawayError`` after ``maxSteps`` items.
    public func run() throws(RunawayError) {
        try runItems(until: nil)
    }

    /// Moves the clock forward by `duration`, running each item that falls
    /// due on the way, in order of due time, with ``now`` set to its due
    /// time; then sets ``now`` to the target.
    /// - Throws: ``RunawayError`` after ``maxSteps`` items.
    public func advance(by duration: Duration) throws(RunawayError) {
        let target = lock.withLock { $0.now + max(duration, .zero) }
        try runItems(until: target)
    }

    /// Runs the single next item that is due now, if any.
    /// - Returns: Whether an item ran.
    @discardableResult
    public func runNext() -> Bool {
        guard let item = lock.withLock({ try? $0.removeNext(dueBy: $0.now) }) else { return false }
        item.work()
        return true
    }

    private func runItems(until target: Duration?) throws(RunawayError) {
        var steps = 0
        while true {
            let item: ItemStore.Item?
            do {
                item = try lock.withLock { (state) throws(RunawayError) -> ItemStore.Item? in
                    guard let item = try state.removeNext(dueBy: target ?? state.now, steps: steps, maxSteps: maxSteps)
                    else {
                        if let target { state.now = max(state.now, target) }
                        return nil
                    }
                    state.now = max(state.now, item.due)
                    return item
                }
            } catch {
                var runaway = error
                runaway.unfinishedTasks = unfinishedTasks  // outside the lock, which reading them takes
                throw runaway
            }
            guard let item else { return }
            steps += 1
            item.work()
        }
    }
}

extension TestQueue: RefusingBlockingWait {
    package var whyWaitingNeverEnds: String {
        "a TestQueue: a TestQueue runs work only when the test calls run(), runNext() or advance(by:), so a blocking "
            + "wait for a job on it would never end. Perform the job with a handler, run the queue, then "
            + "look at the outcome."
    }
}
