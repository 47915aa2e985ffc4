// Main-actor code in virtual time: built and run with the package trait
// ExperimentalMainActorInVirtualTime (CI's Thread Sanitizer passes).
#if ExperimentalMainActorInVirtualTime && compiler(>=6.3)

@_spi(ExperimentalCustomExecutors) @_spi(ExperimentalScheduling) import _Concurrency
import Dispatch
import Foundation
import JobKit
@testable import JobKitTesting
import Testing

// MARK: - The view models of the tests, as an app writes them

/// The countdown of the docs, with what the tests look at besides: a
/// button starts a task that sleeps a second per tick, another cancels it.
@MainActor
private final class TimerModel {
    private(set) var remaining: Int
    private(set) var isRunning = false
    /// Finishes when the countdown stops, for a test that waits for it.
    let stopped = JobSource<Void>()
    private var task: Task<Void, Never>?
    private let tick: Duration

    init(from seconds: Int, tick: Duration = .seconds(1)) {
        (remaining, self.tick) = (seconds, tick)
    }

    func startTapped() {
        isRunning = true
        task = Task {
            while remaining > 0 {
                do {
                    try await Task.sleep(for: tick)  // allowed: virtual on the driving queue; 20 ms real in one test
                } catch {
                    break  // cancelled
                }
                remaining -= 1
            }
            isRunning = false
            stopped.finish()
        }
    }

    func stopTapped() {
        task?.cancel()
    }
}

/// A screen that loads a name over the network when a button is tapped,
/// and shows a spinner meanwhile.
@MainActor
private final class ProfileModel {
    enum State: Equatable {
        case idle, loading, loaded(String), failed
    }

    private(set) var state = State.idle
    private let fetchName: Job<String>
    private let queue: any JobQueue

    init(fetchName: Job<String>, queue: any JobQueue) {
        (self.fetchName, self.queue) = (fetchName, queue)
    }

    func loadTapped() {
        state = .loading
        Task {
            do {
                let name = try await fetchName.value(on: queue)
                try await Task.sleep(for: .milliseconds(300))  // allowed: virtual; the spinner's animation
                state = .loaded(name)
            } catch {
                state = .failed
            }
        }
    }
}

private struct Unavailable: Error {}

/// Works for 6 ms, then sleeps for `duration`, in one item of the queue:
/// the sleep's deadline comes 6 ms after the item started.
private func workThenSleep(for duration: Duration) async throws {
    let busyUntil = ContinuousClock.now.advanced(by: .milliseconds(6))
    while ContinuousClock.now < busyUntil {}
    try await Task.sleep(for: duration)  // allowed: virtual, on the driving queue
}

/// Appends `what` to `log` if the caller is isolated to the main actor,
/// as synchronous code that is not marked `@MainActor` checks it.
private func note(_ what: String, to log: LockedValue<[String]>) {
    MainActor.assumeIsolated { log.withValue { $0.append(what) } }
}

// MARK: - Tests

@Suite("Main-actor code in virtual time", .timeLimit(.minutes(1)))
struct MainActorInVirtualTimeTests {
    @Test @MainActor func theCountdownTicksOncePerVirtualSecondWithNoRealWait() throws {
        let started = ContinuousClock.now
        let queue = TestQueue()
        try queue.drivingMainActor {
            let model = TimerModel(from: 3)
            model.startTapped()
            #expect(model.remaining == 3 && model.isRunning)
            try queue.run()
            #expect(model.remaining == 3)  // asleep
            try queue.advance(by: .milliseconds(999))
            #expect(model.remaining == 3)
            try queue.advance(by: .milliseconds(1))
            #expect(model.remaining == 2)
            try queue.advance(by: .seconds(2))
            #expect(model.remaining == 0 && !model.isRunning)
            #expect(queue.isIdle)

            // An hour of ticks, in one call.
            let long = TimerModel(from: 3_600)
            long.startTapped()
            try queue.advance(by: .seconds(3_599))
            #expect(long.remaining == 1)
            try queue.advance(by: .seconds(1))
            #expect(long.remaining == 0 && !long.isRunning)
        }
        #expect(queue.now == .seconds(3_603))
        // Real sleeps would have taken an hour; the bound is for a busy machine.
        #expect(started.duration(to: .now) < .seconds(30))
    }

    @Test @MainActor func aButtonStartsATaskThatAwaitsTheNetworkAndTheStateChangesInBetween() throws {
        let queue = TestQueue()
        let requests = LockedValue(0)
        let fetchName = Job<String> { (controller: Job<String>.Controller) in
            requests.withValue { $0 += 1 }
            queue.enqueue(after: .seconds(2)) { controller.finish(with: "Ada") }
        }
        try queue.drivingMainActor {
            let model = ProfileModel(fetchName: fetchName, queue: queue)
            model.loadTapped()
            #expect(model.state == .loading && requests.value == 0)
            try queue.run()
            #expect(model.state == .loading && requests.value == 1)
            try queue.advance(by: .seconds(2))
            #expect(model.state == .loading)  // the answer is in; the animation's 300 ms are not
            try queue.advance(by: .milliseconds(300))
            #expect(model.state == .loaded("Ada"))
            #expect(queue.isIdle)
        }
    }

    @Test @MainActor func aFailedRequestShowsAtTheVirtualTimeItFails() throws {
        let queue = TestQueue()
        // allowed: virtual, the model performs it on the queue
        let fetchName = Job<Void>.sleep(for: .seconds(5)).then { _ in Job<String>.failed(Unavailable()) }
        try queue.drivingMainActor {
            let model = ProfileModel(fetchName: fetchName, queue: queue)
            model.loadTapped()
            try queue.advance(by: .seconds(4))
            #expect(model.state == .loading)
            try queue.advance(by: .seconds(1))
            #expect(model.state == .failed)
        }
    }

    @Test @MainActor func cancellingStopsTheCountdownAndTheQueueEndsIdle() throws {
        let queue = TestQueue()
        try queue.drivingMainActor {
            let model = TimerModel(from: 10)
            model.startTapped()
            try queue.advance(by: .seconds(2.5))
            #expect(model.remaining == 8)
            model.stopTapped()
            try queue.run()
            #expect(model.remaining == 8 && !model.isRunning)
            // The cancelled sleep's timer is still due at 3 s, and does nothing then.
            try queue.advance(by: .seconds(10))
            #expect(model.remaining == 8)
            #expect(queue.isIdle)
        }
    }

    @Test @MainActor func mainActorCodeOnTheQueueIsIsolatedToTheMainActor() throws {
        let queue = TestQueue()
        let checks = LockedValue<[String]>([])
        try queue.drivingMainActor {
            Task { @MainActor in
                MainActor.preconditionIsolated()
                note("main actor", to: checks)
                await Task.detached { checks.withValue { $0.append("detached") } }.value
                note("back on the main actor", to: checks)
            }
            #expect(checks.value == [])
            try queue.run()
            #expect(checks.value == ["main actor", "detached", "back on the main actor"])
        }
    }

    // The tests below that wait inside the closure hold the main actor, so
    // they wait only for a thread of their own (a Foundation `Thread`), which
    // starts in milliseconds however busy Swift's pool is, and never for it.

    @Test @MainActor func tasksStartedOnAnotherThreadRunForReal() async throws {
        let queue = TestQueue()
        let ran = JobSource<String>()
        try queue.drivingMainActor {
            let started = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                Task { @MainActor in _ = ran.finish(with: "on the real main actor") }
                started.signal()
            }
            #expect(started.wait(timeout: .now() + 30) == .success)  // allowed: the main thread, bounded
            #expect(queue.pendingCount == 0)
        }
        let said = try await withTimeLimit(.seconds(45)) { try await ran.job.value }
        #expect(said == "on the real main actor")
    }

    @available(macOS 26.4, iOS 26.4, tvOS 26.4, watchOS 26.4, visionOS 26.4, *)
    @Test @MainActor func theEndOfASleepIsRoutedByTheThreadThatStartsIt() async throws {
        let queue = TestQueue()
        let ended = LockedValue<[String]>([])
        let real = JobSource<Void>()
        try queue.drivingMainActor {
            // Read here, once the first call installed JobKitTesting's executors.
            let scheduling = try #require(Task.defaultExecutor as? any SchedulingExecutor)
            let end = _swift_createJobForTestingOnly { ended.withValue { $0.append("on the driving thread") } }
            scheduling.enqueue(end, after: .milliseconds(10), clock: .continuous)
            let started = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                let end = _swift_createJobForTestingOnly { _ = real.finish() }
                scheduling.enqueue(end, after: .milliseconds(10), clock: .continuous)
                started.signal()
            }
            #expect(started.wait(timeout: .now() + 30) == .success)  // allowed: the main thread, bounded
            #expect(queue.pendingCount == 1)  // this thread's sleep
            try queue.advance(by: .milliseconds(10))
            #expect(ended.value == ["on the driving thread"])
        }
        try await withTimeLimit(.seconds(45)) { try await real.job.value }  // ended for real
    }

    @Test @MainActor func workLeftOnTheQueueWhenTheClosureReturnsGoesOnForReal() async throws {
        let queue = TestQueue()
        let ran = JobSource<String>()
        let model = try queue.drivingMainActor {
            let model = TimerModel(from: 2, tick: .milliseconds(20))
            model.startTapped()
            try queue.advance(by: .milliseconds(20))
            #expect(model.remaining == 1)  // asleep, with a tick to go
            Task { @MainActor in ran.finish(with: "on the real main actor") }  // not run on the queue
            return model
        }
        #expect(queue.isIdle)  // both handed back
        #expect(model.remaining == 1 && !ran.isCompleted)  // the main actor is the test's until it suspends
        let said = try await withTimeLimit(.seconds(45)) { try await ran.job.value }
        #expect(said == "on the real main actor")
        try await withTimeLimit(.seconds(45)) { try await model.stopped.job.value }  // a real 20 ms sleep
        #expect(model.remaining == 0)
    }

    @Test @MainActor func aQueueRunOnAnotherThreadLeavesMainActorJobsForTheRealMainActor() async throws {
        let queue = TestQueue()
        let ran = JobSource<Bool>()
        try queue.drivingMainActor {
            Task { @MainActor in ran.finish(with: true) }
            #expect(queue.pendingCount == 1)
            let done = DispatchSemaphore(value: 0)
            Thread.detachNewThread {
                try? queue.run()  // takes the item, and leaves its job: the main actor is not that thread's
                done.signal()
            }
            #expect(done.wait(timeout: .now() + 30) == .success)  // allowed: the main thread, bounded
            #expect(queue.isIdle && !ran.isCompleted)
        }
        let ranOnTheMainActor = try await withTimeLimit(.seconds(45)) { try await ran.job.value }
        #expect(ranOnTheMainActor)
    }

    @Test @MainActor func aSleepStartedAfterBusyWorkLastsWhatItSays() throws {
        let queue = TestQueue()
        let woke = LockedValue(false)
        try queue.drivingMainActor {
            Task { @MainActor in
                try await workThenSleep(for: .milliseconds(995))
                woke.setValue(true)
            }
            try queue.advance(by: .milliseconds(994))
            #expect(!woke.value)
            try queue.advance(by: .milliseconds(1))
            #expect(woke.value)
        }
    }

    @Test @MainActor func oneQueueAtATimeDrivesTheMainActor() throws {
        let queue = TestQueue()
        let other = TestQueue()
        try queue.drivingMainActor {
            #expect(throws: MainActorDrivingError.drivingAnotherQueue) {
                try other.drivingMainActor { Issue.record("ran while another queue drove the main actor") }
            }
            let depth = try queue.drivingMainActor { "again, on the same queue" }
            #expect(depth == "again, on the same queue")
            Task { @MainActor in }
            #expect(queue.pendingCount == 1)  // still driving after the inner call returned
            try queue.run()
        }
        let after = try other.drivingMainActor { 1 }
        #expect(after == 1)
    }

    @Test func executorsReplacedBeforeAreAnErrorThatNamesThem() throws {
        let platform = (main: PlatformExecutorFactory.mainExecutor, global: PlatformExecutorFactory.defaultExecutor)
        #expect(RoutingExecutors.problem(main: platform.main, default: platform.global) == nil)
        let problem = RoutingExecutors.problem(main: UnimplementedMainExecutor(), default: platform.global)
        #expect(
            problem
                == .executorsReplacedElsewhere(
                    mainExecutor: "UnimplementedMainExecutor",
                    defaultExecutor: String(describing: type(of: platform.global))))
        #expect(problem?.description.contains("replace them once") == true)
        #expect(RoutingExecutors.problem(main: platform.main, default: UnimplementedTaskExecutor()) != nil)
    }

    @Test func aSleepOnARealClockLastsTheRoundestDurationItCanHave() {
        typealias R = RoutingExecutors
        let second = Duration.seconds(1)
        // What is left when the queue sees it, and the time since its item started.
        #expect(R.roundest(from: second - .microseconds(3), to: second + .microseconds(40)) == second)
        #expect(R.roundest(from: .milliseconds(999), to: .microseconds(1_000_500)) == second)  // held up 1 ms
        #expect(R.roundest(from: .milliseconds(2_499), to: .milliseconds(2_501)) == .milliseconds(2_500))
        #expect(R.roundest(from: .microseconds(9), to: .microseconds(15)) == .microseconds(10))
        #expect(R.roundest(from: .microseconds(-5), to: .microseconds(3)) == .zero)  // already due
        #expect(R.roundest(from: .nanoseconds(5), to: .nanoseconds(4)) == .nanoseconds(5))
        let millennium = Duration.seconds(86_400 * 365_000)
        #expect(R.roundest(from: millennium, to: millennium + .seconds(86_400)) == millennium)  // as it is
        #expect(R.roundest(from: .seconds(-7), to: .seconds(-5)) == .seconds(-7))  // all past: due now
        // A clock of the queue's own is exact.
        let clock = TestQueue().clock
        #expect(R.delay(until: clock.now.advanced(by: .microseconds(10)), on: clock) == .microseconds(10))
    }

    /// Beside the tests above (Swift Testing runs them in parallel), real
    /// sleeps and hops to the main actor stay real.
    @Test func testsThatDoNotDriveTheMainActorAreUnaffected() async throws {
        let clock = ContinuousClock()
        try await withTimeLimit(.seconds(45)) {
            for _ in 0..<20 {
                let before = clock.now
                try await Task.sleep(for: .milliseconds(2))
                #expect(before.duration(to: clock.now) >= .milliseconds(2))
                let isolated = await MainActor.run { MainActor.assumeIsolated { true } }
                #expect(isolated)
            }
        }
    }
}

// MARK: - The examples of the docs

extension MainActorInVirtualTimeTests {
    // BEGIN DOC
    @MainActor
    final class CountdownModel {
        private(set) var remaining: Int
        private var task: Task<Void, Never>?

        init(from seconds: Int) {
            remaining = seconds
        }

        func startTapped() {
            task = Task {
                while remaining > 0 {
                    do {
                        try await Task.sleep(for: .seconds(1))
                    } catch {
                        return  // stopped
                    }
                    remaining -= 1
                }
            }
        }

        func stopTapped() {
            task?.cancel()
        }
    }

    @Test @MainActor func theCountdownTicksOncePerSecond() throws {
        let queue = TestQueue()
        try queue.drivingMainActor {
            let model = CountdownModel(from: 3)
            model.startTapped()  // starts a Task that sleeps a second per tick
            try queue.advance(by: .seconds(1))
            #expect(model.remaining == 2)
            try queue.advance(by: .seconds(2))
            #expect(model.remaining == 0)
        }
    }

    @Test @MainActor func stopEndsTheCountdown() throws {
        let queue = TestQueue()
        try queue.drivingMainActor {
            let model = CountdownModel(from: 10)
            model.startTapped()
            try queue.advance(by: .seconds(2.5))
            model.stopTapped()
            try queue.advance(by: .seconds(60))
            #expect(model.remaining == 8)
        }
    }
    // END DOC
}

#endif
