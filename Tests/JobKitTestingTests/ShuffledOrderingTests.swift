import JobKit
import JobKitTesting
import Testing

@Suite("TestQueue: shuffled ordering", .timeLimit(.minutes(1)))
struct ShuffledOrderingTests {
    /// Enqueues `count` items that log their index, runs the queue, and
    /// returns the log.
    private func order(of count: Int, on queue: TestQueue) throws -> [Int] {
        let log = LockedValue<[Int]>([])
        for index in 0..<count { queue.enqueue { log.withValue { $0.append(index) } } }
        try queue.run()
        return log.value
    }

    @Test func fifoIsTheDefault() throws {
        #expect(TestQueue().ordering == .fifo)
        #expect(try order(of: 8, on: TestQueue()) == Array(0..<8))
        #expect(try order(of: 8, on: TestQueue(ordering: .fifo)) == Array(0..<8))
    }

    @Test func theSameSeedGivesTheSameOrder() throws {
        let first = try order(of: 20, on: TestQueue(ordering: .shuffled(seed: 7)))
        #expect(first.sorted() == Array(0..<20))
        #expect(first != Array(0..<20))
        for _ in 0..<5 {
            #expect(try order(of: 20, on: TestQueue(ordering: .shuffled(seed: 7))) == first)
        }
        #expect(try order(of: 20, on: TestQueue(ordering: .shuffled(seed: 8))) != first)
    }

    /// Pinned: the order of a seed is part of the API (a seed written into
    /// a test must reproduce the same order after an upgrade and on every
    /// machine), so the draw may not change silently. (Worked out apart
    /// from the queue: SplitMix64 from the seed; at each step, of the k
    /// items due, the one at index (k × draw) >> 64 runs, and the last
    /// takes its place.)
    @Test func theOrderOfASeedIsPinned() throws {
        #expect(try order(of: 6, on: TestQueue(ordering: .shuffled(seed: 1))) == [3, 5, 4, 1, 0, 2])
        #expect(try order(of: 6, on: TestQueue(ordering: .shuffled(seed: 2))) == [3, 5, 2, 4, 0, 1])
    }

    @Test func seedsReachEveryOrderOfThreeItems() throws {
        let orders = try Set(
            (0..<100 as Range<UInt64>).map { try order(of: 3, on: TestQueue(ordering: .shuffled(seed: $0))) })
        #expect(orders.count == 6)
    }

    @Test func workEnqueuedWhileRunningMayRunBeforeOlderWork() throws {
        var orders = Set<[String]>()
        for seed in 0..<50 as Range<UInt64> {
            let queue = TestQueue(ordering: .shuffled(seed: seed))
            let log = LockedValue<[String]>([])
            queue.enqueue {
                log.withValue { $0.append("a") }
                queue.enqueue { log.withValue { $0.append("c") } }
            }
            queue.enqueue { log.withValue { $0.append("b") } }
            try queue.run()
            orders.insert(log.value)
        }
        #expect(orders == [["a", "b", "c"], ["a", "c", "b"], ["b", "a", "c"]])
    }

    /// Each step draws evenly from every item due, so work that keeps
    /// enqueueing work at the same instant (a spin on a flag) does not hold
    /// back an item that was waiting: it runs within a few steps.
    @Test func workThatKeepsEnqueueingDoesNotHoldBackWaitingWork() throws {
        var longestSpin = 0
        for seed in 0..<200 as Range<UInt64> {
            let queue = TestQueue(ordering: .shuffled(seed: seed), maxSteps: 1000)
            let isSet = LockedValue(false)
            let spins = LockedValue(0)
            @Sendable func spin() {
                guard !isSet.value else { return }
                spins.withValue { $0 += 1 }
                queue.enqueue(spin)
            }
            queue.enqueue(spin)
            queue.enqueue { isSet.setValue(true) }
            try queue.run()
            longestSpin = max(longestSpin, spins.value)
        }
        #expect(longestSpin > 1)
        #expect(longestSpin < 20)
    }

    @Test func workDueEarlierStillRunsFirst() throws {
        for seed in 0..<20 as Range<UInt64> {
            let queue = TestQueue(ordering: .shuffled(seed: seed))
            let log = LockedValue<[(name: String, at: Duration)]>([])
            for second in [3, 1, 2, 1, 3, 2] as [Int64] {
                queue.enqueue(after: .seconds(second)) {
                    log.withValue { $0.append(("\(second)s", queue.now)) }
                }
            }
            try queue.advance(by: .seconds(3))
            #expect(log.value.map(\.name) == ["1s", "1s", "2s", "2s", "3s", "3s"])
            #expect(log.value.allSatisfy { $0.name == "\($0.at.components.seconds)s" })
        }
    }

    @Test func runNextTakesTheSameOrderAsRun() throws {
        let expected = try order(of: 10, on: TestQueue(ordering: .shuffled(seed: 3)))
        let queue = TestQueue(ordering: .shuffled(seed: 3))
        let log = LockedValue<[Int]>([])
        for index in 0..<10 { queue.enqueue { log.withValue { $0.append(index) } } }
        while queue.runNext() {}
        #expect(log.value == expected)
    }

    @Test func cancelledDelayedWorkDoesNotRun() throws {
        let queue = TestQueue(ordering: .shuffled(seed: 11))
        let log = LockedValue<[Int]>([])
        let work = (0..<6).map { index in queue.enqueue(after: .seconds(1)) { log.withValue { $0.append(index) } } }
        work[2].cancel()
        work[4].cancel()
        #expect(queue.pendingCount == 4)
        try queue.advance(by: .seconds(1))
        #expect(log.value.sorted() == [0, 1, 3, 5])
        #expect(queue.isIdle)
    }

    @Test func theStepLimitHolds() {
        let queue = TestQueue(ordering: .shuffled(seed: 5), maxSteps: 10)
        @Sendable func again() { queue.enqueue(again) }
        queue.enqueue(again)
        #expect(throws: TestQueue.RunawayError.self) { try queue.run() }
        #expect(queue.pendingCount == 1)
    }

    /// A call that stops at its step limit leaves the queue as it was: the
    /// work it had not run yet keeps its due time, and work due earlier
    /// still runs first, with `now` at its due time.
    @Test func aCallStoppedAtItsStepLimitLeavesTheOrderOfDueTimes() throws {
        let queue = TestQueue(ordering: .shuffled(seed: 3), maxSteps: 1)
        let log = LockedValue<[String]>([])
        func record(_ name: String) -> @Sendable () -> Void {
            { log.withValue { $0.append("\(name)@\(queue.now.components.seconds)") } }
        }
        queue.enqueue(after: .seconds(5), record("a"))
        queue.enqueue(after: .seconds(7), record("c1"))
        queue.enqueue(after: .seconds(7), record("c2"))
        #expect(throws: TestQueue.RunawayError.self) { try queue.advance(by: .seconds(10)) }
        #expect(log.value == ["a@5"])
        #expect(queue.now == .seconds(5))
        #expect(queue.pendingCount == 2)

        queue.enqueue(record("now"))
        queue.enqueue(after: .seconds(1), record("b"))
        try queue.run()
        try queue.advance(by: .seconds(1))
        #expect(log.value == ["a@5", "now@5", "b@6"])
        #expect(queue.pendingCount == 2)
    }

    @Test func anOrderingReadsAsSwift() {
        #expect(TestQueue.Ordering.fifo.description == ".fifo")
        #expect(TestQueue.Ordering.shuffled(seed: 42).description == ".shuffled(seed: 42)")
    }

    /// Jobs keep their guarantees in any order: a group of jobs that finish
    /// on later turns completes once, after all of them, with every value.
    @Test func aGroupCompletesOnceAfterEveryChildInEveryOrder() throws {
        for seed in 0..<100 as Range<UInt64> {
            let queue = TestQueue(ordering: .shuffled(seed: seed))
            let finished = LockedValue<[Int]>([])
            let jobs = (0..<4).map { index in
                Job<Int> { controller in
                    controller.queue.enqueue {
                        controller.queue.enqueue {
                            finished.withValue { $0.append(index) }
                            controller.finish(with: index)
                        }
                    }
                }
            }
            let outcomes = LockedValue<[[Int]]>([])
            Job<[Int]>.collect(jobs).perform(on: queue) { outcome in
                outcomes.withValue { $0.append((try? outcome.get()) ?? []) }
                #expect(finished.value.count == 4)
            }
            try queue.run()
            #expect(outcomes.value == [[0, 1, 2, 3]])
            #expect(queue.isIdle)
        }
    }
}
