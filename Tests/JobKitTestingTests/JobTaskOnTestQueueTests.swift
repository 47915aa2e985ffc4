import JobKit
import JobKitTesting
import Testing

/// A `Job.task` performed on a `TestQueue` runs its body as the queue's items,
/// so its sleeps on `queue.clock`, and the `timeout` and `retry` around it,
/// all run in virtual time. These tests read the outcome the job reported
/// right after the queue ran: had the body run on the global executor, its
/// continuation would still be on its way, and the expectation would fail
/// rather than wait.
@Suite("Job.task on a TestQueue", .timeLimit(.minutes(1)))
struct JobTaskOnTestQueueTests {
    @Test func theBodyRunsOnlyWhenTheQueueRunsIt() throws {
        let queue = TestQueue()
        let log = LockedValue<[String]>([])
        let outcome = LockedValue<Result<Int, any Error>?>(nil)
        Job.task {
            log.withValue { $0.append("started") }
            await Task.yield()
            log.withValue { $0.append("resumed") }
            return 42
        }
        .perform(on: queue) { outcome.setValue($0) }

        #expect(log.value == [])
        try queue.run()
        #expect(log.value == ["started", "resumed"])
        #expect(try outcome.value?.get() == 42)
        #expect(queue.isIdle)
    }

    @Test func aBodyAsleepOnTheQueuesClockFinishesAtItsDeadline() throws {
        let queue = TestQueue()
        let outcome = LockedValue<Result<Duration, any Error>?>(nil)
        Job.task {
            try await queue.clock.sleep(for: .seconds(3600))  // allowed: queue.clock, virtual time
            return queue.now
        }
        .perform(on: queue) { outcome.setValue($0) }

        try queue.advance(by: .seconds(3599))
        #expect(outcome.value == nil)
        try queue.advance(by: .seconds(1))
        #expect(try outcome.value?.get() == .seconds(3600))
        #expect(queue.isIdle)
    }

    @Test func aTimeoutCancelsTheBodysSleepAtTheVirtualInstant() throws {
        let queue = TestQueue()
        let outcome = LockedValue<Result<Void, any Error>?>(nil)
        let bodyEnded = LockedValue<(at: Duration, error: any Error)?>(nil)
        Job.task {
            do {
                try await queue.clock.sleep(for: .seconds(10))  // allowed: queue.clock, virtual time
            } catch {
                bodyEnded.setValue((queue.now, error))
                throw error
            }
        }
        .timeout(after: .seconds(1))
        .perform(on: queue) { outcome.setValue($0) }

        try queue.advance(by: .milliseconds(999))
        #expect(outcome.value == nil)
        try queue.advance(by: .milliseconds(1))
        #expect(throws: JobError.timedOut) { try outcome.value?.get() }
        #expect(bodyEnded.value?.at == .seconds(1))
        #expect(bodyEnded.value?.error is CancellationError)
        #expect(queue.isIdle, "the cancelled sleep left nothing on the queue")
        #expect(queue.now == .seconds(1))
    }

    @Test func retriesWaitAndRunInVirtualTime() throws {
        let queue = TestQueue()
        let attempts = LockedValue<[Duration]>([])
        let outcome = LockedValue<Result<String, any Error>?>(nil)
        Job.task {
            let count = attempts.withValue { attempts in
                attempts.append(queue.now)
                return attempts.count
            }
            try await queue.clock.sleep(for: .seconds(1))  // allowed: queue.clock, virtual time
            guard count == 3 else { throw TestError(id: count) }
            return "third time lucky"
        }
        .retry(attempts: 3, delay: .fixed(.seconds(5)))
        .perform(on: queue) { outcome.setValue($0) }

        try queue.run()
        #expect(attempts.value == [.zero])
        try queue.advance(by: .seconds(6))
        #expect(attempts.value == [.zero, .seconds(6)])
        #expect(outcome.value == nil)
        try queue.advance(by: .seconds(6))
        #expect(attempts.value == [.zero, .seconds(6), .seconds(12)])
        #expect(outcome.value == nil)
        try queue.advance(by: .seconds(1))
        #expect(try outcome.value?.get() == "third time lucky")
        #expect(queue.isIdle)
    }

    @Test func cancellingTheJobEndsTheBodysSleepWithoutMovingTime() throws {
        let queue = TestQueue()
        let outcome = LockedValue<Result<Void, any Error>?>(nil)
        let bodyError = LockedValue<(any Error)?>(nil)
        let handle = Job.task {
            do {
                try await queue.clock.sleep(for: .seconds(60))  // allowed: queue.clock, virtual time
            } catch {
                bodyError.setValue(error)
                throw error
            }
        }
        .perform(on: queue) { outcome.setValue($0) }
        try queue.run()
        #expect(bodyError.value == nil)

        handle.cancel()
        try queue.run()
        #expect(bodyError.value is CancellationError)
        #expect(throws: CancellationError.self) { try outcome.value?.get() }
        #expect(queue.isIdle)
        #expect(queue.now == .zero)
    }

    @Test func seedsInterleaveTheBodiesOfAGroupsTasks() throws {
        func finishingOrder(_ ordering: TestQueue.Ordering) throws -> [String] {
            let queue = TestQueue(ordering: ordering)
            let log = LockedValue<[String]>([])
            let children = ["a", "b"].map { name in
                Job.task {
                    await Task.yield()
                    log.withValue { $0.append(name) }
                }
            }
            let outcome = LockedValue<Result<Void, any Error>?>(nil)
            Job.group(children).perform(on: queue) { outcome.setValue($0) }
            try queue.run()
            #expect(throws: Never.self) { try outcome.value?.get() }
            return log.value
        }
        #expect(try finishingOrder(.fifo) == ["a", "b"])
        let orders = try Set((0..<50).map { try finishingOrder(.shuffled(seed: $0)) })
        #expect(orders == [["a", "b"], ["b", "a"]])
    }

    @Test func anInjectedSchedulerStillStartsTheTask() async throws {
        let queue = TestQueue()
        let scheduler = ManualTaskScheduler()
        let outcome = LockedValue<Result<Int, any Error>?>(nil)
        Job.task(scheduler: scheduler) { 7 }.perform(on: queue) { outcome.setValue($0) }

        try queue.run()
        #expect(scheduler.pendingCount == 1, "the scheduler, not the queue, holds the task")
        #expect(queue.isIdle)
        await scheduler.runAll()
        try queue.run()
        #expect(try outcome.value?.get() == 7)
    }
}
