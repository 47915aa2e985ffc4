import Dispatch
import JobKit
import JobKitTesting
import Testing

@Suite("TestQueue", .timeLimit(.minutes(1)))
struct TestQueueTests {
    @Test func enqueueDoesNotRunWork() {
        let queue = TestQueue()
        let ran = LockedValue(false)
        queue.enqueue { ran.setValue(true) }
        #expect(!ran.value)
        #expect(queue.pendingCount == 1)
        #expect(!queue.isIdle)
    }

    @Test func runRunsPendingWorkInFIFOOrder() throws {
        let queue = TestQueue()
        let log = LockedValue<[Int]>([])
        for index in 0..<5 { queue.enqueue { log.withValue { $0.append(index) } } }
        try queue.run()
        #expect(log.value == [0, 1, 2, 3, 4])
        #expect(queue.isIdle)
    }

    @Test func runPicksUpWorkEnqueuedWhileRunning() throws {
        let queue = TestQueue()
        let log = LockedValue<[String]>([])
        queue.enqueue {
            log.withValue { $0.append("a") }
            queue.enqueue {
                log.withValue { $0.append("c") }
                queue.enqueue { log.withValue { $0.append("d") } }
            }
        }
        queue.enqueue { log.withValue { $0.append("b") } }
        try queue.run()
        #expect(log.value == ["a", "b", "c", "d"])
    }

    @Test func runDoesNotRunDelayedWorkOrMoveTheClock() throws {
        let queue = TestQueue()
        let ran = LockedValue(false)
        queue.enqueue(after: .seconds(1)) { ran.setValue(true) }
        try queue.run()
        #expect(!ran.value)
        #expect(queue.now == .zero)
        #expect(queue.pendingCount == 1)
    }

    @Test func advanceRunsByDueTimeThenEnqueueOrderWithNowAtEachDueTime() throws {
        let queue = TestQueue()
        let log = LockedValue<[String]>([])
        func record(_ name: String) -> @Sendable () -> Void {
            { log.withValue { $0.append("\(name)@\(queue.now.components.seconds)") } }
        }
        queue.enqueue(after: .seconds(3), record("c"))
        queue.enqueue(after: .seconds(1), record("a1"))
        queue.enqueue(after: .seconds(2), record("b"))
        queue.enqueue(after: .seconds(1), record("a2"))
        queue.enqueue(record("now"))
        try queue.advance(by: .seconds(2))
        #expect(log.value == ["now@0", "a1@1", "a2@1", "b@2"])
        #expect(queue.now == .seconds(2))
        try queue.advance(by: .seconds(5))
        #expect(log.value.last == "c@3")
        #expect(queue.now == .seconds(7))
    }

    @Test func advanceRunsWorkThatFallsDueWhileAdvancing() throws {
        let queue = TestQueue()
        let times = LockedValue<[Duration]>([])
        @Sendable func tick() {
            times.withValue { $0.append(queue.now) }
            if times.value.count < 4 { queue.enqueue(after: .seconds(1), tick) }
        }
        queue.enqueue(tick)
        try queue.advance(by: .seconds(10))
        #expect(times.value == [.zero, .seconds(1), .seconds(2), .seconds(3)])
    }

    @Test func runNextRunsOneItemForStepByStepTests() {
        let queue = TestQueue()
        let log = LockedValue<[Int]>([])
        queue.enqueue { log.withValue { $0.append(1) } }
        queue.enqueue { log.withValue { $0.append(2) } }
        #expect(queue.runNext())
        #expect(log.value == [1])
        #expect(queue.runNext())
        #expect(!queue.runNext())
        #expect(log.value == [1, 2])
    }

    @Test func aRunawayLoopIsStoppedWithAClearError() {
        let queue = TestQueue(maxSteps: 1_000)
        @Sendable func forever() { queue.enqueue(forever) }
        queue.enqueue(forever)
        #expect {
            try queue.run()
        } throws: { error in
            guard let runaway = error as? TestQueue.RunawayError else { return false }
            return runaway.steps == 1_000 && runaway.pendingCount == 1
                && runaway.description.contains("maxSteps")
                && runaway.description.contains("TestQueue(maxSteps:)")
        }
    }

    @Test func aLongButFiniteRunIsToldHowToRaiseTheLimit() throws {
        // A 1 ms ticker over a minute: 60,000 steps, more than the limit,
        // though it ends.
        let queue = TestQueue(maxSteps: 10_000)
        let ticks = LockedValue(0)
        @Sendable func tick() {
            let count = ticks.withValue { count -> Int in
                count += 1
                return count
            }
            if count < 60_000 { queue.enqueue(after: .milliseconds(1), tick) }
        }
        queue.enqueue(after: .milliseconds(1), tick)
        let error = #expect(throws: TestQueue.RunawayError.self) { try queue.advance(by: .seconds(60)) }
        #expect(error?.steps == 10_000)
        #expect(error?.description.contains("raise it with TestQueue(maxSteps:)") == true)
        #expect(error?.description.contains("keeps enqueueing work forever") == false)
        // A queue with room for the whole run gets to the end.
        let roomy = TestQueue(maxSteps: 10)
        let count = LockedValue(0)
        @Sendable func step() {
            if count.withValue({ count -> Int in
                count += 1
                return count
            }) < 10 {
                roomy.enqueue(after: .milliseconds(1), step)
            }
        }
        roomy.enqueue(after: .milliseconds(1), step)
        try roomy.advance(by: .seconds(1))
        #expect(count.value == 10)
    }

    @Test func runsWorkOutsideItsLock() throws {
        // Work that reads the queue's state while running would deadlock
        // if the queue held its lock while running work.
        let queue = TestQueue()
        let seen = LockedValue<Int?>(nil)
        queue.enqueue { seen.setValue(queue.pendingCount) }
        queue.enqueue {}
        try queue.run()
        #expect(seen.value == 1)
    }

    @Test func enqueueingFromManyThreadsLosesNothing() throws {
        let queue = TestQueue()
        let count = LockedValue(0)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<1_000 { queue.enqueue { count.withValue { $0 += 1 } } }
        }
        #expect(queue.pendingCount == 8_000)
        try queue.run()
        #expect(count.value == 8_000)
    }

    @Test func drivesAJobStepByStep() throws {
        let queue = TestQueue()
        let log = LockedValue<[String]>([])
        let step = { (name: String) in
            Job<Void> { controller in
                log.withValue { $0.append(name) }
                controller.queue.enqueue(after: .seconds(1)) { controller.finish() }
            }
        }
        let outcome = LockedValue<Job<Void>.Outcome?>(nil)
        Job.sequence([step("one"), step("two")]).perform(on: queue) { outcome.setValue($0) }
        try queue.run()
        #expect(log.value == ["one"])
        try queue.advance(by: .seconds(1))
        #expect(log.value == ["one", "two"])
        #expect(outcome.value == nil)
        try queue.advance(by: .seconds(1))
        if case .success = outcome.value {
        } else {
            Issue.record("expected success, got \(String(describing: outcome.value))")
        }
    }
}
