import Dispatch
import JobKit
import JobKitTesting
import TestSupport
import Testing

/// The values of `outcomes`, with each failure's `TestError` id negated.
private func summary(_ outcomes: [Job<Int>.Outcome]) -> [Int] {
    outcomes.map { outcome in
        switch outcome {
        case .success(let value): value
        case .failure(let error): -((error as? TestError)?.id ?? 1000)
        }
    }
}

@Suite("collectOutcomes", .timeLimit(.minutes(1)))
struct CollectOutcomesTests {
    @Test func everyOutcomeComesInInputOrderAndAFailureNeverFailsIt() throws {
        let children = (0..<4).map { _ in ManualJob<Int>() }
        let queue = TestQueue()
        let recorder = Recorder<[Job<Int>.Outcome]>()
        Job.collectOutcomes(children.map(\.job)).perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(children.allSatisfy { $0.startCount == 1 })
        children[3].finish(with: 30)
        children[1].fail(with: TestError(id: 1))
        children[0].fail(with: TestError(id: 2))
        try queue.run()
        #expect(recorder.count == 0)
        #expect(children[2].cancelCount == 0)
        children[2].finish(with: 20)
        try queue.run()
        #expect(try summary(#require(recorder.last).get()) == [-2, -1, 20, 30])
        #expect(recorder.count == 1)
    }

    @Test func noJobsGiveNoOutcomesAtOnce() throws {
        #expect(try outcome(of: Job.collectOutcomes([Job<Int>]()))?.get().isEmpty == true)
    }

    @Test(arguments: [0, -1])
    func aMaxConcurrentBelowOneFailsWithATypedError(limit: Int) throws {
        let failure = outcome(of: Job.collectOutcomes([Job.succeeded(1)], maxConcurrent: limit))?.failure
        guard case .invalidArgument(let reason) = failure as? JobError else {
            Issue.record("expected invalidArgument, got \(String(describing: failure))")
            return
        }
        #expect(reason.contains("maxConcurrent"))
    }

    @Test func aFailureFreesItsPlaceForTheNextJobInInputOrder() throws {
        let children = (0..<4).map { _ in ManualJob<Int>() }
        let queue = TestQueue()
        let recorder = Recorder<[Job<Int>.Outcome]>()
        Job.collectOutcomes(children.map(\.job), maxConcurrent: 2).perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(children.map(\.startCount) == [1, 1, 0, 0])
        children[1].fail(with: TestError(id: 1))
        try queue.run()
        #expect(children.map(\.startCount) == [1, 1, 1, 0])
        children[0].finish(with: 0)
        children[2].fail(with: TestError(id: 2))
        try queue.run()
        children[3].finish(with: 3)
        try queue.run()
        #expect(try summary(#require(recorder.last).get()) == [0, -1, -2, 3])
    }

    @Test func cancellingItCancelsTheRunningJobsAndStartsNoMore() throws {
        let children = (0..<3).map { _ in ManualJob<Int>() }
        let queue = TestQueue()
        let recorder = Recorder<[Job<Int>.Outcome]>()
        let handle = Job.collectOutcomes(children.map(\.job), maxConcurrent: 2)
            .perform(on: queue, then: recorder.handler)
        try queue.run()
        children[0].fail(with: TestError(id: 0))
        handle.cancel()
        try queue.run()
        #expect(children.map(\.cancelCount) == [0, 1, 0])
        #expect(children[2].startCount == 0)
        #expect(recorder.count == 1)
        #expect(isCancellation(recorder.last?.failure))
        #expect(queue.isIdle)
    }

    @Test func performingItAgainRunsEveryJobAgain() throws {
        let runs = LockedValue(0)
        let child = Job<Int> { controller in
            let run = runs.withValue { runs in
                runs += 1
                return runs
            }
            if run.isMultiple(of: 2) { controller.fail(with: TestError(id: run)) } else { controller.finish(with: run) }
        }
        let job = Job.collectOutcomes([child, child])
        #expect(try summary(#require(outcome(of: job)).get()) == [1, -2])
        #expect(try summary(#require(outcome(of: job)).get()) == [3, -4])
    }

    @Test(.onThreadOfItsOwn) func threeHundredThousandSynchronousJobsFinishWithAFlatStack() throws {
        // Fewer under Thread Sanitizer, where they take 30 times longer: the
        // flat stack holds for any number.
        let count = isThreadSanitized ? 30_000 : 300_000
        let top = currentStackAddress()
        let deepest = LockedValue(top)
        let children = (0..<2).map { parity in
            Job<Int> { controller in
                let address = currentStackAddress()
                deepest.withValue { $0 = min($0, address) }
                if parity == 0 { controller.finish(with: 1) } else { controller.fail(with: TestError(id: 1)) }
            }
        }
        let jobs = (0..<count).map { children[$0 % 2] }
        let outcomes = try #require(outcome(of: Job.collectOutcomes(jobs))).get()
        #expect(outcomes.count == count)
        #expect(outcomes.indices.allSatisfy { outcomes[$0].isSuccess == $0.isMultiple(of: 2) })
        #expect(top - deepest.value < 64 * 1024)
        let bounded = try #require(outcome(of: Job.collectOutcomes(jobs, maxConcurrent: 3))).get()
        #expect(bounded.count == count)
        #expect(top - deepest.value < 64 * 1024)
    }

    @Test(.onThreadOfItsOwn) func completesOnceWithEveryOutcomeWhenJobsFinishOnManyThreads() async throws {
        for _ in 0..<50 {
            let done = DispatchSemaphore(value: 0)
            let recorder = Recorder<[Job<Int>.Outcome]>()
            let jobs = (0..<64).map { index in
                index.isMultiple(of: 3) ? Job<Int>.failed(TestError(id: index)) : Job.succeeded(index)
            }
            Job.collectOutcomes(jobs).perform(on: DispatchQueue.global()) { outcome in
                recorder.handler(outcome)
                done.signal()
            }
            #expect(await done.signalled(within: 10))
            #expect(try summary(#require(recorder.last).get()) == (0..<64).map { $0.isMultiple(of: 3) ? -$0 : $0 })
            #expect(recorder.count == 1)
        }
    }
}

extension CollectOutcomesTests {
    @Test func outcomesComeInInputOrderInEveryOrderOfCompletion() throws {
        let completionOrders = LockedValue<Set<[Int]>>([])
        try exploreOrderings(seeds: 0..<200) { queue in
            let finished = LockedValue<[Int]>([])
            let jobs = (0..<4).map { index in
                finishing(
                    index, failing: index.isMultiple(of: 2) ? TestError(id: index) : nil, after: .seconds(1),
                    finished: finished)
            }
            let recorder = Recorder<[Job<Int>.Outcome]>()
            Job.collectOutcomes(jobs).perform(on: queue, then: recorder.handler)
            try queue.advance(by: .seconds(1))
            try #require(recorder.count == 1)
            try #require(summary(try #require(recorder.last).get()) == [0, 1, -2, 3])
            completionOrders.withValue { $0.insert(finished.value) }
        }
        // 4! orders of completion.
        #expect(completionOrders.value.count == 24)
    }
}
