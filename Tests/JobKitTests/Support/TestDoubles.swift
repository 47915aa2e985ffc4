import Dispatch
import JobKit
import JobKitTesting
import TestSupport

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

struct TestError: Error, Equatable {
    var id = 0
}

/// Performs `job` on an `ImmediateQueue` (or another queue that runs work
/// inline) and returns its outcome, which is known when `perform` returns.
func outcome<T>(of job: Job<T>, on queue: any JobQueue = ImmediateQueue()) -> Job<T>.Outcome? {
    let box = LockedValue<Job<T>.Outcome?>(nil)
    job.perform(on: queue) { box.setValue($0) }
    return box.value
}

/// Runs `first` and `second` at once, on two threads, and returns when
/// both returned: one round of a race test.
func race(_ first: @Sendable () -> Void, _ second: @Sendable () -> Void) {
    DispatchQueue.concurrentPerform(iterations: 2) { index in
        if index == 0 { first() } else { second() }
    }
}

/// Races `handle.cancel()` with a first `onCancel` of `controller`'s job,
/// and returns how many times that block ran: once, whichever came first.
func runsOfAnOnCancelRacing(withCancelOf handle: JobHandle, _ controller: Job<Void>.Controller) -> Int {
    let runs = LockedValue(0)
    race {
        handle.cancel()
    } _: {
        controller.onCancel { runs.withValue { $0 += 1 } }
    }
    return runs.value
}

/// A job that finishes with `value`, or fails with `error`, `delay` after
/// it starts, in its queue's time; cancelling it stops its timer. `ran`
/// counts its starts; `started`, `finished` and `cancelled` record its
/// value as it starts, completes of its own, or is cancelled.
func finishing<T: Sendable>(
    _ value: T,
    failing error: (any Error)? = nil,
    after delay: Duration,
    ran: LockedValue<Int>? = nil,
    started: LockedValue<[T]>? = nil,
    finished: LockedValue<[T]>? = nil,
    cancelled: LockedValue<[T]>? = nil
) -> Job<T> {
    Job { controller in
        ran?.withValue { $0 += 1 }
        started?.withValue { $0.append(value) }
        let timer = controller.queue.enqueue(after: delay) {
            finished?.withValue { $0.append(value) }
            if let error { controller.fail(with: error) } else { controller.finish(with: value) }
        }
        controller.onCancel {
            cancelled?.withValue { $0.append(value) }
            timer.cancel()
        }
    }
}

/// Records the outcomes a handler receives, in order.
final class Recorder<T: Sendable>: Sendable {
    private let box = LockedValue<[Job<T>.Outcome]>([])

    var outcomes: [Job<T>.Outcome] { box.value }
    var count: Int { outcomes.count }
    var last: Job<T>.Outcome? { outcomes.last }
    /// The values of the outcomes, `nil` for a failure.
    var values: [T?] { outcomes.map { try? $0.get() } }

    var handler: @Sendable (Job<T>.Outcome) -> Void {
        { outcome in self.box.withValue { $0.append(outcome) } }
    }
}

/// A job that counts its starts and keeps its controllers, so a test can
/// complete each performance when it wants.
final class ManualJob<T: Sendable>: Sendable {
    private let controllers = LockedValue<[Job<T>.Controller]>([])
    private let cancels = LockedValue(0)

    var job: Job<T> {
        Job { controller in
            controller.onCancel { self.cancels.withValue { $0 += 1 } }
            self.controllers.withValue { $0.append(controller) }
        }
    }

    var startCount: Int { controllers.value.count }
    var cancelCount: Int { cancels.value }
    var controller: Job<T>.Controller? { controllers.value.last }

    @discardableResult
    func finish(with value: T) -> Bool {
        controllers.value.last?.finish(with: value) ?? false
    }

    @discardableResult
    func fail(with error: any Error) -> Bool {
        controllers.value.last?.fail(with: error) ?? false
    }

    /// Finishes every performance started so far that has not completed,
    /// for a test on real threads, where the last to start need not be
    /// the one still running.
    /// - Returns: How many it finished.
    func finishAll(with value: T) -> Int {
        controllers.value.filter { $0.finish(with: value) }.count
    }

    /// Drops the controllers it kept (the job is then abandoned unless it
    /// completed).
    func release() {
        controllers.setValue([])
    }
}

extension ManualJob where T == Void {
    @discardableResult
    func finish() -> Bool { finish(with: ()) }
}

extension Result {
    var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }

    var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}

/// Whether `error` is a `CancellationError`.
func isCancellation(_ error: (any Error)?) -> Bool {
    error is CancellationError
}

/// The address of a local variable: how deep the stack is right now.
@inline(never)
func currentStackAddress() -> UInt {
    var marker = 0
    return withUnsafeMutablePointer(to: &marker) { UInt(bitPattern: $0) }
}

final class Tracked: Sendable {}

/// A value, or an error, that runs `onDeinit` when it goes: it says where a
/// combinator releases what its jobs reported.
final class Probe: Error, Sendable {
    let onDeinit: @Sendable () -> Void

    init(onDeinit: @escaping @Sendable () -> Void) {
        self.onDeinit = onDeinit
    }

    deinit { onDeinit() }

    /// A probe that takes a snapshot of the job `handle` holds when it goes,
    /// and counts it in `snapshotsTaken`: released under that job's lock,
    /// it would take the lock again.
    static func snapshotting(_ handle: LockedValue<JobHandle?>, counting snapshotsTaken: LockedValue<Int>) -> Probe {
        Probe {
            _ = handle.value?.snapshot()
            snapshotsTaken.withValue { $0 += 1 }
        }
    }
}

/// A queue that runs work inline, at once, nested in the call that
/// enqueues it (it breaks `JobQueue`'s advice on purpose): combinators must
/// still loop instead of recursing on it.
struct NestingQueue: JobQueue {
    func enqueue(_ work: @escaping @Sendable () -> Void) { work() }
    func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork {
        work()
        return DelayedWork {}
    }
}

/// A queue that runs work inline, like ``NestingQueue``, and counts the
/// work it was given: how many queue turns a combinator takes.
final class CountingQueue: JobQueue {
    private let count = LockedValue(0)

    /// The work enqueued so far.
    var enqueued: Int { count.value }

    func enqueue(_ work: @escaping @Sendable () -> Void) {
        count.withValue { $0 += 1 }
        work()
    }

    func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork {
        enqueue(work)
        return DelayedWork {}
    }
}

/// A queue that drops every work item it is given, unrun: a queue torn
/// down before it ran what it held.
struct DiscardingQueue: JobQueue {
    func enqueue(_ work: @escaping @Sendable () -> Void) {}
    func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork {
        DelayedWork {}
    }
}

/// Enqueues other work on `queue` that re-enqueues itself until
/// `progress()` reaches `total`, and returns, filled in as the queue runs,
/// how far `progress` moved between two of its turns: how long the code
/// under test held the queue.
func gapsBetweenOtherWork(
    on queue: TestQueue,
    until total: Int,
    progress: @escaping @Sendable () -> Int
) -> LockedValue<[Int]> {
    let gaps = LockedValue<[Int]>([])
    let lastSeen = LockedValue(0)
    @Sendable func otherWork() {
        let now = progress()
        gaps.withValue { $0.append(now - lastSeen.value) }
        lastSeen.setValue(now)
        if now < total { queue.enqueue(otherWork) }
    }
    queue.enqueue(otherWork)
    return gaps
}

/// A million, or a hundred thousand under Thread Sanitizer.
let aMillion = isThreadSanitized ? 100_000 : 1_000_000

/// Counts its instances alive in `live`.
final class Canary: Sendable {
    private let live: LockedValue<Int>

    init(_ live: LockedValue<Int>) {
        self.live = live
        live.withValue { $0 += 1 }
    }

    deinit {
        live.withValue { $0 -= 1 }
    }
}
