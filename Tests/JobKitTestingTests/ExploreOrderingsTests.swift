import JobKit
import JobKitTesting
import Testing

@Suite("exploreOrderings", .timeLimit(.minutes(1)))
struct ExploreOrderingsTests {
    private struct Failed: Error, Equatable, CustomStringConvertible {
        let message: String
        var description: String { message }
    }

    @Test func runsTheBodyOncePerSeedEachOnAFreshQueueWithThatSeed() throws {
        let orderings = LockedValue<[TestQueue.Ordering]>([])
        let queues = LockedValue<[TestQueue]>([])
        try exploreOrderings(seeds: [4, 9, 2]) { queue in
            orderings.withValue { $0.append(queue.ordering) }
            queues.withValue { $0.append(queue) }
            #expect(queue.now == .zero && queue.isIdle && queue.maxSteps == 1_000_000)
        }
        #expect(orderings.value == [.shuffled(seed: 4), .shuffled(seed: 9), .shuffled(seed: 2)])
        #expect(Set(queues.value.map(ObjectIdentifier.init)).count == 3)
    }

    @Test func stopsAtTheFirstSeedThatFailsAndNamesIt() {
        let tried = LockedValue<[UInt64]>([])
        let failure = #expect(throws: OrderingFailure.self) {
            try exploreOrderings(seeds: 10..<100) { queue in
                guard case .shuffled(let seed) = queue.ordering else { return }
                tried.withValue { $0.append(seed) }
                if seed == 15 { throw Failed(message: "boom") }
            }
        }
        #expect(tried.value == Array(10...15))
        #expect(failure?.seed == 15)
        #expect(failure?.seedsPassed == 5)
        #expect(failure?.error as? Failed == Failed(message: "boom"))
        #expect(failure?.reproduction == "TestQueue(ordering: .shuffled(seed: 15))")
        #expect(
            failure?.description
                == "Failed in the order of seed 15 (after 5 seeds passed): boom. "
                + "To run this order again: let queue = TestQueue(ordering: .shuffled(seed: 15))"
        )
    }

    @Test func theReproductionNamesAStepLimitThatIsNotTheDefault() {
        let failure = #expect(throws: OrderingFailure.self) {
            try exploreOrderings(seeds: 0..<1, maxSteps: 50) { queue in
                #expect(queue.maxSteps == 50)
                throw Failed(message: "no")
            }
        }
        #expect(failure?.reproduction == "TestQueue(ordering: .shuffled(seed: 0), maxSteps: 50)")
    }

    @Test func noSeedsRunsNothing() throws {
        let ran = LockedValue(false)
        try exploreOrderings(seeds: []) { _ in ran.setValue(true) }
        #expect(!ran.value)
    }

    @Test func aRunawayLoopIsAFailureOfItsSeed() {
        let failure = #expect(throws: OrderingFailure.self) {
            try exploreOrderings(seeds: 0..<3, maxSteps: 100) { queue in
                @Sendable func again() { queue.enqueue(again) }
                queue.enqueue(again)
                try queue.run()
            }
        }
        #expect(failure?.seed == 0)
        #expect(failure?.error is TestQueue.RunawayError)
    }

    /// The bug exploring is for: code that assumes jobs started together
    /// finish in the order they started. It passes in FIFO order, fails in
    /// some seeded order, and the reproduction fails the same way again.
    @Test func findsAnOrderingBugThatFIFOMissesAndItsReproductionFailsAgain() throws {
        /// Starts three jobs together and pairs each value with the name of
        /// the job it assumes finished: the n-th to finish, the n-th name.
        func checkPairs(on queue: TestQueue) throws {
            let names = ["a", "b", "c"]
            let pairs = LockedValue<[String: String]>([:])
            let finishedSoFar = LockedValue(0)
            let jobs = names.map { name in
                Job<Void> { controller in
                    controller.queue.enqueue {
                        let index = finishedSoFar.withValue { count in
                            defer { count += 1 }
                            return count
                        }
                        pairs.withValue { $0[names[index]] = name }  // the bug: assumes input order
                        controller.finish()
                    }
                }
            }
            Job.group(jobs).perform(on: queue) { _ in }
            try queue.run()
            for (assumed, actual) in pairs.value where assumed != actual {
                throw Failed(message: "\(assumed) holds the value of \(actual)")
            }
        }

        try checkPairs(on: TestQueue())
        let failure = #expect(throws: OrderingFailure.self) { try exploreOrderings(seeds: 0..<50, checkPairs) }
        let seed = try #require(failure?.seed)
        #expect(seed < 10)
        #expect(throws: Failed.self) { try checkPairs(on: TestQueue(ordering: .shuffled(seed: seed))) }
    }
}
