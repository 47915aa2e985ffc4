import Dispatch
import JobKit
import JobKitTesting
import TestSupport
import Testing

/// Schedules `operation` on `queue`, and returns its handle and where its
/// outcome lands when it ends. The test reads the outcome after running the
/// queue instead of awaiting the task, so a sleep that never ends fails the
/// test rather than hanging it.
private func scheduleRecordingOutcome(
    on queue: TestQueue,
    _ operation: @escaping @Sendable () async throws -> Void
) -> (ScheduledTask<Void>, LockedValue<Result<Void, any Error>?>) {
    let outcome = LockedValue<Result<Void, any Error>?>(nil)
    let task = queue.schedule {
        do {
            try await operation()
            outcome.setValue(.success(()))
        } catch {
            outcome.setValue(.failure(error))
        }
    }
    return (task, outcome)
}

@Suite("TestQueue.Clock", .timeLimit(.minutes(1)))
struct TestClockTests {
    /// (The doc example shows an hour's sleep ending at its deadline.)
    @Test func aSleepDoesNotEndAnInstantBeforeItsDeadline() throws {
        let queue = TestQueue()
        let woke = LockedValue(false)
        queue.schedule {
            try await queue.clock.sleep(until: .init(offset: .seconds(3600)))  // allowed: queue.clock, virtual time
            woke.setValue(true)
        }
        try queue.advance(by: .seconds(3600) - .nanoseconds(1))
        #expect(!woke.value)
        try queue.advance(by: .nanoseconds(1))
        #expect(woke.value)
        #expect(queue.isIdle)
    }

    @Test func nowIsTheQueuesVirtualTime() throws {
        let queue = TestQueue()
        let clock = queue.clock
        #expect(clock.now == TestQueue.Clock.Instant(offset: .zero))
        try queue.advance(by: .milliseconds(1500))
        #expect(clock.now.offset == .milliseconds(1500))
        #expect(clock.now == .init(offset: .zero).advanced(by: .milliseconds(1500)))
        #expect(clock.now.duration(to: .init(offset: .seconds(2))) == .milliseconds(500))
        #expect(clock.now < .init(offset: .seconds(2)))
        #expect(clock.minimumResolution == .zero)
        #expect("\(TestQueue.Clock.Instant(offset: .seconds(3)))" == "TestQueue.Clock.Instant(offset: 3.0 seconds)")
    }

    @Test func sleepersWakeInDeadlineOrderWithNowAtTheirDeadline() throws {
        let queue = TestQueue()
        let clock = queue.clock
        let log = LockedValue<[String]>([])
        for seconds in [3, 1, 2] {
            queue.schedule {
                try await clock.sleep(for: .seconds(seconds))  // allowed: queue.clock, virtual time
                log.withValue { $0.append("\(seconds)s at \(queue.now)") }
            }
        }
        try queue.run()
        try queue.advance(by: .seconds(10))
        #expect(log.value == ["1s at 1.0 seconds", "2s at 2.0 seconds", "3s at 3.0 seconds"])
        #expect(queue.now == .seconds(10))
    }

    @Test func sleepersWithOneDeadlineWakeInTheQueuesOrdering() throws {
        func wakeOrder(_ queue: TestQueue) throws -> [Int] {
            let log = LockedValue<[Int]>([])
            for index in 0..<4 {
                queue.schedule {
                    try await Task.sleep(for: .seconds(1), clock: queue.clock)  // allowed: queue.clock, virtual time
                    log.withValue { $0.append(index) }
                }
            }
            try queue.run()
            try queue.advance(by: .seconds(1))
            return log.value
        }
        #expect(try wakeOrder(TestQueue()) == [0, 1, 2, 3])
        let orders = try Set((0..<30 as Range<UInt64>).map { try wakeOrder(TestQueue(ordering: .shuffled(seed: $0))) })
        #expect(orders.count > 3)
        #expect(orders.allSatisfy { $0.sorted() == [0, 1, 2, 3] })
    }

    @Test func runDoesNotWakeASleeperOrMoveTime() throws {
        let queue = TestQueue()
        let woke = LockedValue(false)
        queue.schedule {
            try await queue.clock.sleep(for: .nanoseconds(1))  // allowed: queue.clock, virtual time
            woke.setValue(true)
        }
        try queue.run()
        try queue.run()
        #expect(!woke.value)
        #expect(queue.now == .zero)
        #expect(queue.pendingCount == 1)  // the sleep
    }

    /// Cancelling a sleeping task ends its sleep at once, at the same
    /// virtual instant, with `CancellationError`, and takes the sleep off
    /// the queue: advancing past its deadline runs nothing.
    @Test func cancellingASleepingTaskEndsItsSleepAndLeavesNothingQueued() throws {
        let queue = TestQueue()
        let (task, outcome) = scheduleRecordingOutcome(on: queue) {
            try await queue.clock.sleep(for: .seconds(60))  // allowed: queue.clock, virtual time
        }
        try queue.run()
        #expect(queue.pendingCount == 1)
        task.cancel()
        #expect(queue.pendingCount == 1)  // the task going on, not the sleep
        try queue.run()
        #expect(queue.isIdle)
        #expect(queue.now == .zero)
        #expect(throws: CancellationError.self) { try #require(outcome.value).get() }
        try queue.advance(by: .seconds(120))
        #expect(queue.isIdle)
    }

    @Test func aTaskCancelledBeforeItSleepsThrowsWithoutSuspending() throws {
        let queue = TestQueue()
        let (task, outcome) = scheduleRecordingOutcome(on: queue) {
            try await queue.clock.sleep(for: .seconds(60))  // allowed: queue.clock, virtual time
        }
        task.cancel()
        #expect(queue.runNext())
        #expect(queue.isIdle)
        #expect(throws: CancellationError.self) { try #require(outcome.value).get() }
    }

    /// A deadline already reached still suspends: the task goes on as an
    /// item due now, after the work already due.
    @Test func aDeadlineAlreadyReachedGoesOnAfterTheWorkDue() throws {
        let queue = TestQueue()
        let log = LockedValue<[String]>([])
        queue.schedule {
            queue.enqueue { log.withValue { $0.append("work due") } }
            let passed = queue.clock.now.advanced(by: .seconds(-1))
            try await queue.clock.sleep(until: passed)  // allowed: queue.clock, virtual time
            log.withValue { $0.append("after the sleep") }
        }
        #expect(queue.runNext())
        #expect(queue.pendingCount == 2)
        try queue.run()
        #expect(log.value == ["work due", "after the sleep"])
        #expect(queue.now == .zero)
    }

    /// Each sleep ends once, woken or cancelled, however its cancellation
    /// on another thread races the advance that wakes it, and leaves the
    /// queue idle.
    @Test(.onThreadOfItsOwn) func aCancellationRacingTheWakeEndsTheSleepOnce() async throws {
        var outcomes: [String: Int] = [:]
        for _ in 0..<300 {
            let queue = TestQueue()
            let (task, outcome) = scheduleRecordingOutcome(on: queue) {
                try await queue.clock.sleep(for: .seconds(1))  // allowed: queue.clock, virtual time
            }
            try queue.run()
            let cancelled = DispatchGroup()
            DispatchQueue.global().async(group: cancelled) { task.cancel() }
            try queue.advance(by: .seconds(1))
            #expect(await cancelled.completed(within: 10))
            try queue.run()
            #expect(queue.isIdle)
            switch try #require(outcome.value) {
            case .success: outcomes["woken", default: 0] += 1
            case .failure(let error):
                #expect(error is CancellationError)
                outcomes["cancelled", default: 0] += 1
            }
        }
        #expect(outcomes.values.reduce(0, +) == 300)
    }

    /// A cancellation on another thread that races the start of the sleep
    /// (before the task checks, while it registers, or once it sleeps)
    /// ends it with `CancellationError` and leaves no sleep queued.
    @Test(.onThreadOfItsOwn) func aCancellationRacingTheStartOfASleepLeavesNothingQueued() async throws {
        for _ in 0..<300 {
            let queue = TestQueue()
            let (task, outcome) = scheduleRecordingOutcome(on: queue) {
                try await queue.clock.sleep(for: .seconds(1))  // allowed: queue.clock, virtual time
            }
            let cancelled = DispatchGroup()
            DispatchQueue.global().async(group: cancelled) { task.cancel() }
            try queue.run()
            #expect(await cancelled.completed(within: 10))
            try queue.run()
            #expect(queue.isIdle)
            #expect(throws: CancellationError.self) { try #require(outcome.value).get() }
        }
    }
}
