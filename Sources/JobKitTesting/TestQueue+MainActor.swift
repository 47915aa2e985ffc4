// The main actor in virtual time: compiled only with the package trait
// `ExperimentalMainActorInVirtualTime`, so the default build imports no SPI.
//
// Swift 6.3 lets a program replace both of its executors once, through the
// experimental `_createExecutors(factory:)`. The executors installed here
// route: a job enqueued on the thread that is inside
// `TestQueue.drivingMainActor(_:)` (the test's main-actor code, and every
// item the queue runs inside it) becomes an item of that queue, and every
// other job goes to the executor that was there before. A test that does
// not drive the main actor, even one running at the same time, never
// meets the queue.
#if ExperimentalMainActorInVirtualTime

import Dispatch
import JobKit
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

#if compiler(>=6.3)
@_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency
#endif

/// Why ``TestQueue/drivingMainActor(_:)`` cannot run the main actor on a
/// queue; it throws this before running any of its closure.
public enum MainActorDrivingError: Error, Equatable, CustomStringConvertible {
    /// The running Swift cannot have its executors replaced here: an OS
    /// before 26.4 on Apple platforms, a compiler before Swift 6.3, or a
    /// default executor that cannot schedule the end of a sleep.
    case unsupported(String)
    /// Something other than JobKitTesting replaced the main or the
    /// default executor first, and only one replacement is possible.
    case executorsReplacedElsewhere(mainExecutor: String, defaultExecutor: String)
    /// The closure of a call driving another queue is still running:
    /// one queue at a time drives the main actor.
    case drivingAnotherQueue

    /// The message a test failure shows.
    public var description: String {
        switch self {
        case .unsupported(let what):
            "the main actor cannot run on a TestQueue here: \(what)"
        case .executorsReplacedElsewhere(let main, let global):
            "the main actor cannot run on a TestQueue: the process's executors were replaced "
                + "before (main: \(main), default: \(global)), and Swift lets a process replace them once"
        case .drivingAnotherQueue:
            "the main actor cannot run on this TestQueue: a call of drivingMainActor on another "
                + "queue is running; drive one queue at a time"
        }
    }
}

extension TestQueue {
    /// Runs `body` with the main actor's code on this queue: every
    /// `@MainActor` job that `body` and the queue's items start, the
    /// tasks they start, and the sleeps of those tasks
    /// (`Task.sleep(for:)`) become items of the queue, run by ``run()``
    /// and ``advance(by:)`` in virtual time.
    ///
    /// Available with the package trait
    /// `ExperimentalMainActorInVirtualTime`: it rests on Swift 6.3's
    /// experimental custom executors, which the first call installs for
    /// the whole process. They route by thread: a job enqueued on the
    /// thread running `body` (`body` itself, and the queue's items that
    /// it runs) goes to the queue, and any other job to the executor that
    /// was there before.
    ///
    /// ```swift
    /// @Test @MainActor func theCountdownTicksOncePerSecond() throws {
    ///     let queue = TestQueue()
    ///     try queue.drivingMainActor {
    ///         let model = CountdownModel(from: 3)
    ///         model.startTapped()  // starts a Task that sleeps a second per tick
    ///         try queue.advance(by: .seconds(1))
    ///         #expect(model.remaining == 2)
    ///         try queue.advance(by: .seconds(2))
    ///         #expect(model.remaining == 0)
    ///     }
    /// }
    /// ```
    ///
    /// `body` is synchronous and runs on the main actor, so two calls
    /// never overlap: tests that drive the main actor wait for each
    /// other, as any two pieces of main-actor code do. When it returns,
    /// what it left on the queue goes on for real: each job goes where
    /// it would have gone, and a sleep ends at its real deadline.
    ///
    /// A sleep's deadline on `ContinuousClock` or `SuspendingClock` is a
    /// real instant, taken a moment before the queue sees it; the queue
    /// gives the sleep the roundest duration in the millisecond from what
    /// is left of it, so `Task.sleep(for: .seconds(1))` ends after exactly
    /// one virtual second. A sleep on another clock measured in
    /// `Duration` lasts what is left of it; one on a clock that is not
    /// runs for real, as do `DispatchQueue.main` and work started from
    /// other threads.
    ///
    /// - Parameter body: The test's code: it makes the model, acts on
    ///   it, advances the queue and checks the state in between.
    /// - Returns: What `body` returns.
    /// - Throws: ``MainActorDrivingError`` if the executors cannot be
    ///   installed (before `body` runs), or what `body` throws.
    @MainActor
    public func drivingMainActor<Result>(_ body: @MainActor () throws -> Result) throws -> Result {
        #if compiler(>=6.3)
        guard #available(macOS 26.4, iOS 26.4, tvOS 26.4, watchOS 26.4, visionOS 26.4, *) else {
            throw MainActorDrivingError.unsupported("it needs OS 26.4 or later")
        }
        try RoutingExecutors.install()
        try MainActorDriving.begin(self)
        defer { MainActorDriving.end(self) }
        return try body()
        #else
        throw MainActorDrivingError.unsupported("it needs Swift 6.3 or later")
        #endif
    }
}

/// The queue driving the main actor, and the thread it does so on.
enum MainActorDriving {
    struct Driving {
        let queue: TestQueue
        let thread: pthread_t
        var depth: Int
        /// The jobs on the queue that have not run, by number.
        var routed: [Int: Routed] = [:]
    }

    /// A job routed to the driving queue: it runs there, or goes where it
    /// would have gone when the driving ends, whichever comes first.
    struct Routed {
        let job: UnownedJob
        let elsewhere: @Sendable (UnownedJob) -> Void
        /// Removes its item from the queue; `nil` until it is there.
        var removal: DelayedWork?
    }

    /// The last number given to a routed job; numbers are never reused, so
    /// an item left from an earlier driving finds nothing to run.
    private static let lastNumber = Atomic<Int>(0)

    /// Two calls never overlap (each is a synchronous piece of main-actor
    /// code); the lock is for the enqueues of other threads that read it,
    /// and one that Thread Sanitizer sees, as it does not see `Mutex`.
    private static let current = Lock<Driving?>(nil)

    /// Whether `current` holds a queue, written inside its lock: a job
    /// enqueued while no queue drives (every job of the other tests, most
    /// of the time) takes one load, not the lock.
    private static let isDriving = Atomic<Bool>(false)

    /// Starts driving `queue` on this thread, or goes one call deeper.
    static func begin(_ queue: TestQueue) throws(MainActorDrivingError) {
        try current.withLock { (current) throws(MainActorDrivingError) in
            if var driving = current {
                guard driving.queue === queue else { throw .drivingAnotherQueue }
                driving.depth += 1
                current = driving
            } else {
                current = Driving(queue: queue, thread: pthread_self(), depth: 1)
                isDriving.store(true, ordering: .releasing)
            }
        }
    }

    /// Ends a call; the outermost hands every job still on the queue back
    /// to where it would have gone, in the order they came.
    static func end(_ queue: TestQueue) {
        let left = current.withLock { current -> [Routed] in
            guard var driving = current, driving.queue === queue else { return [] }
            driving.depth -= 1
            guard driving.depth == 0 else {
                current = driving
                return []
            }
            current = nil
            isDriving.store(false, ordering: .releasing)
            return driving.routed.sorted { $0.key < $1.key }.map(\.value)
        }
        for routed in left {
            routed.removal?.cancel()
            routed.elsewhere(routed.job)
        }
    }

    /// Puts `job` on the queue driving on this thread, due after `delay`,
    /// to be `run` there; if the driving ends first, or no queue drives on
    /// this thread, sends it `elsewhere`: where it would have gone.
    static func route(
        _ job: UnownedJob,
        after delay: Duration = .zero,
        run: @escaping @Sendable (UnownedJob) -> Void,
        elsewhere: @escaping @Sendable (UnownedJob) -> Void
    ) {
        guard let queue = queueOfThisThread else { return elsewhere(job) }
        let number = lastNumber.add(1, ordering: .relaxed).newValue
        // In the registry before it is on the queue, so that whoever runs
        // the queue finds it there.
        current.withLock { $0?.routed[number] = Routed(job: job, elsewhere: elsewhere) }
        let removal = queue.enqueue(after: delay) {
            if let job = claim(number) { run(job) }
        }
        current.withLock { $0?.routed[number]?.removal = removal }
    }

    /// Takes the routed job `number` out of the registry to run it, if it
    /// is there and this is the driving thread (elsewhere, the main actor
    /// is not this code's: the job waits to be handed back).
    private static func claim(_ number: Int) -> UnownedJob? {
        current.withLock { driving in
            guard driving != nil, pthread_equal(driving!.thread, pthread_self()) != 0 else { return nil }
            return driving!.routed.removeValue(forKey: number)?.job
        }
    }

    /// The queue that takes a job enqueued now, on this thread: the
    /// driving queue if this is its thread, else `nil`.
    static var queueOfThisThread: TestQueue? {
        guard isDriving.load(ordering: .acquiring) else { return nil }
        return current.withLock { driving in
            guard let driving, pthread_equal(driving.thread, pthread_self()) != 0 else { return nil }
            return driving.queue
        }
    }
}

#if compiler(>=6.3)
/// The executors JobKitTesting installs: each routes a job to the
/// driving queue, on its thread, and to the executor it replaced
/// otherwise.
@available(macOS 26.4, iOS 26.4, tvOS 26.4, watchOS 26.4, visionOS 26.4, *)
struct RoutingExecutors: ExecutorFactory {
    static let mainExecutor: any MainExecutor = RoutingMainExecutor(replacing: MainActor.executor)
    static let defaultExecutor: any TaskExecutor = RoutingTaskExecutor(
        // The installation checked that it can schedule.
        replacing: Task.defaultExecutor as! any TaskExecutor & SchedulingExecutor)

    /// Installs the executors on first use; fails if another
    /// replacement came first.
    static let installation: Result<Void, MainActorDrivingError> = {
        if let problem = problem(main: MainActor.executor, default: Task.defaultExecutor) {
            return .failure(problem)
        }
        _ = (mainExecutor, defaultExecutor)  // made before they replace what they wrap
        _createExecutors(factory: RoutingExecutors.self)
        return .success(())
    }()

    /// Installs the executors on first use, and checks that they are still
    /// the process's: nothing replaced them since.
    static func install() throws(MainActorDrivingError) {
        try installation.get()
        let (main, global) = (MainActor.executor, Task.defaultExecutor)
        guard main === mainExecutor, global === defaultExecutor else {
            throw .executorsReplacedElsewhere(
                mainExecutor: String(describing: type(of: main)), defaultExecutor: String(describing: type(of: global)))
        }
    }

    /// What stops the installation when these are the executors in
    /// place, or `nil` if they are the platform's.
    static func problem(main: any MainExecutor, default global: any TaskExecutor) -> MainActorDrivingError? {
        let platform = (
            main: ObjectIdentifier(type(of: PlatformExecutorFactory.mainExecutor)),
            global: ObjectIdentifier(type(of: PlatformExecutorFactory.defaultExecutor))
        )
        guard
            ObjectIdentifier(type(of: main)) != platform.main
                || ObjectIdentifier(type(of: global)) != platform.global
        else {
            return global is any SchedulingExecutor
                ? nil : .unsupported("its default executor cannot schedule the end of a sleep")
        }
        return .executorsReplacedElsewhere(
            mainExecutor: String(describing: type(of: main)), defaultExecutor: String(describing: type(of: global)))
    }

    /// How long until `instant` on `clock`, as the queue's delay, or
    /// `nil` for a clock whose durations are not `Duration`.
    ///
    /// On a real clock the deadline is a real instant, computed a moment
    /// before the queue sees it: the sleep's duration is taken to be the
    /// roundest in the millisecond from what is left of it now, so
    /// `Task.sleep(for: .seconds(1))` is one second though the thread went
    /// on a few microseconds in between, or was held up for less than a
    /// millisecond. Any other clock's delay is exactly what is left.
    static func delay<C: Clock>(until instant: C.Instant, on clock: C) -> Duration? {
        guard let left = clock.now.duration(to: instant) as? Duration else { return nil }
        guard C.self == ContinuousClock.self || C.self == SuspendingClock.self else { return left }
        return roundest(from: left, to: left + .milliseconds(1))
    }

    /// The duration in `lower...upper` that is a multiple of the largest
    /// power of ten nanoseconds, up to 1,000 seconds; `lower` if the span
    /// holds no whole nanosecond, lies all in the past (it is due now), or
    /// goes beyond a century either way.
    static func roundest(from lower: Duration, to upper: Duration) -> Duration {
        let century = Duration.seconds(100 * 365 * 86_400)
        guard lower >= .zero - century, upper <= century else { return lower }
        let (low, high) = (nanoseconds(lower, .up), nanoseconds(upper, .down))
        guard low <= high else { return lower }
        var power: Int64 = 1_000_000_000_000
        while power > 1 {
            let multiple = low <= 0 ? 0 : ((low - 1) / power + 1) * power
            if multiple >= low, multiple <= high { return .nanoseconds(multiple) }
            power /= 10
        }
        return .nanoseconds(low)
    }

    /// `duration` in whole nanoseconds, rounded by `rule`; within a
    /// century, it fits in `Int64` many times over.
    private static func nanoseconds(_ duration: Duration, _ rule: FloatingPointRoundingRule) -> Int64 {
        let (seconds, attoseconds) = duration.components
        let whole = (Double(attoseconds) / 1e9).rounded(rule)
        return seconds * 1_000_000_000 + Int64(whole)
    }
}

/// The main actor's executor while JobKitTesting's are installed.
@available(macOS 26.4, iOS 26.4, tvOS 26.4, watchOS 26.4, visionOS 26.4, *)
final class RoutingMainExecutor: MainExecutor {
    /// The executor it replaced: the real main actor.
    let replaced: any MainExecutor

    init(replacing replaced: any MainExecutor) {
        self.replaced = replaced
    }

    func enqueue(_ job: consuming ExecutorJob) {
        MainActorDriving.route(UnownedJob(job)) { [self] in
            $0.runSynchronously(on: asUnownedSerialExecutor())
        } elsewhere: { [replaced] in
            replaced.enqueue(ExecutorJob($0))
        }
    }

    func run() throws { try replaced.run() }
    func stop() { replaced.stop() }
    var isMainExecutor: Bool { true }
    func checkIsolated() { replaced.checkIsolated() }
    func isIsolatingCurrentContext() -> Bool? { replaced.isIsolatingCurrentContext() }
}

/// The default executor while JobKitTesting's are installed: it runs
/// nonisolated task code and the ends of sleeps.
@available(macOS 26.4, iOS 26.4, tvOS 26.4, watchOS 26.4, visionOS 26.4, *)
final class RoutingTaskExecutor: TaskExecutor, SchedulingExecutor {
    /// The executor it replaced: the global concurrent executor, which
    /// the installation checked can schedule.
    let replaced: any TaskExecutor & SchedulingExecutor

    init(replacing replaced: any TaskExecutor & SchedulingExecutor) {
        self.replaced = replaced
    }

    func enqueue(_ job: consuming ExecutorJob) {
        MainActorDriving.route(UnownedJob(job)) { [self] in
            $0.runSynchronously(on: asUnownedTaskExecutor())
        } elsewhere: { [replaced] in
            replaced.enqueue(ExecutorJob($0))
        }
    }

    func enqueue<C: Clock>(_ job: consuming ExecutorJob, after delay: C.Duration, tolerance: C.Duration?, clock: C) {
        let deadline = clock.now.advanced(by: delay)
        wake(UnownedJob(job), after: delay as? Duration, at: deadline, tolerance: tolerance, on: clock)
    }

    func enqueue<C: Clock>(_ job: consuming ExecutorJob, at instant: C.Instant, tolerance: C.Duration?, clock: C) {
        let delay = RoutingExecutors.delay(until: instant, on: clock)
        wake(UnownedJob(job), after: delay, at: instant, tolerance: tolerance, on: clock)
    }

    /// Ends a sleep: on the driving queue after `delay` of virtual time,
    /// or, with no delay (a clock not measured in `Duration`), elsewhere,
    /// or handed back, at its real deadline.
    private func wake<C: Clock>(
        _ job: UnownedJob, after delay: Duration?, at deadline: C.Instant, tolerance: C.Duration?, on clock: C
    ) {
        let elsewhere: @Sendable (UnownedJob) -> Void = { [replaced] in
            replaced.enqueue(ExecutorJob($0), at: deadline, tolerance: tolerance, clock: clock)
        }
        guard let delay else { return elsewhere(job) }
        MainActorDriving.route(
            job, after: delay, run: { [self] in $0.runSynchronously(on: asUnownedTaskExecutor()) }, elsewhere: elsewhere
        )
    }
}
#endif

#endif
