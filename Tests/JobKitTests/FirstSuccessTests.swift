import Dispatch
import JobKit
import JobKitTesting
import TestSupport
import Testing

@Suite("firstSuccess", .timeLimit(.minutes(1)))
struct FirstSuccessTests {
    @Test func failuresAreWaitedOutAndTheFirstSuccessCancelsTheRest() throws {
        let children = (0..<4).map { _ in ManualJob<Int>() }
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        Job.firstSuccess(children.map(\.job)).perform(on: queue, then: recorder.handler)
        try queue.run()
        children[0].fail(with: TestError(id: 0))
        children[2].fail(with: TestError(id: 2))
        try queue.run()
        #expect(recorder.count == 0)
        children[3].finish(with: 3)
        #expect(children.map(\.cancelCount) == [0, 1, 0, 0])
        try queue.run()
        #expect(try recorder.last?.get() == 3)
        #expect(recorder.count == 1)
    }

    @Test func whenEveryJobFailedItFailsWithEveryErrorInInputOrder() throws {
        let children = (0..<3).map { _ in ManualJob<Int>() }
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        Job.firstSuccess(children.map(\.job)).perform(on: queue, then: recorder.handler)
        try queue.run()
        for index in [2, 0, 1] { children[index].fail(with: TestError(id: index)) }
        try queue.run()
        let error = try #require(recorder.last?.failure as? AllFailedError)
        #expect(error.errors.map { ($0 as? TestError)?.id } == [0, 1, 2])
        #expect("\(error)" == "all 3 jobs failed: TestError(id: 0); TestError(id: 1); TestError(id: 2)")
    }

    @Test func oneAtATimeTriesTheNextOnlyAfterAFailure() throws {
        let children = (0..<3).map { _ in ManualJob<Int>() }
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        Job.firstSuccess(children.map(\.job), maxConcurrent: 1).perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(children.map(\.startCount) == [1, 0, 0])
        children[0].fail(with: TestError(id: 0))
        try queue.run()
        #expect(children.map(\.startCount) == [1, 1, 0])
        children[1].finish(with: 1)
        try queue.run()
        #expect(try recorder.last?.get() == 1)
        #expect(children[2].startCount == 0)
    }

    @Test func noJobsOrAMaxConcurrentBelowOneFailWithATypedError() {
        let empty = outcome(of: Job.firstSuccess([Job<Int>]()))?.failure as? JobError
        #expect(empty == .invalidArgument("firstSuccess needs at least one job, got none"))
        let zero = outcome(of: Job.firstSuccess([Job.succeeded(1)], maxConcurrent: 0))?.failure as? JobError
        #expect(zero == .invalidArgument("maxConcurrent must be at least 1, got 0"))
    }

    @Test func cancellingItCancelsTheRunningJobs() throws {
        let children = (0..<3).map { _ in ManualJob<Int>() }
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        let handle = Job.firstSuccess(children.map(\.job), maxConcurrent: 2).perform(on: queue, then: recorder.handler)
        try queue.run()
        children[0].fail(with: TestError(id: 0))
        try queue.run()
        handle.cancel()
        #expect(children.map(\.cancelCount) == [0, 1, 1])
        try queue.run()
        #expect(isCancellation(recorder.last?.failure))
        #expect(queue.isIdle)
    }

    @Test func itSaysHowManyFailedAndWhichJobsItWaitsOn() throws {
        let queue = TestQueue()
        let children = (0..<3).map { _ in ManualJob<Int>() }
        let jobs = children.enumerated().map { index, child in child.job.named("cdn \(index)") }
        let handle = Job.firstSuccess(jobs, maxConcurrent: 2).perform(on: queue) { _ in }
        try queue.run()
        children[0].fail(with: TestError(id: 0))
        try queue.run()
        let snapshot = handle.snapshot()
        #expect(snapshot.kind == .firstSuccess(failed: 1, running: 2, count: 3))
        #expect(snapshot.title == "first success, 1/3 failed")
        #expect(snapshot.children.map(\.line) == ["cdn 1 (running)", "cdn 2 (running)"])
        handle.cancel()
    }

    @Test(.onThreadOfItsOwn, arguments: [1, .max])
    func threeHundredThousandSynchronousFailuresBeforeASuccessKeepAFlatStack(maxConcurrent: Int) throws {
        let count = isThreadSanitized ? 30_000 : 300_000
        let top = currentStackAddress()
        let deepest = LockedValue(top)
        let failing = Job<Int> { controller in
            let address = currentStackAddress()
            deepest.withValue { $0 = min($0, address) }
            controller.fail(with: TestError(id: 0))
        }
        let jobs = Array(repeating: failing, count: count - 1) + [.succeeded(count)]
        #expect(try outcome(of: Job.firstSuccess(jobs, maxConcurrent: maxConcurrent))?.get() == count)
        #expect(top - deepest.value < 64 * 1024)
    }

    @Test func aFailureAndASuccessAtTheSameInstantGiveTheSuccessInEveryOrder() throws {
        let outcomes = LockedValue<Set<Int>>([])
        try exploreOrderings(seeds: 0..<100) { queue in
            let recorder = Recorder<Int>()
            Job.firstSuccess([
                finishing(0, failing: TestError(id: 0), after: .seconds(1)),
                finishing(1, after: .seconds(1)),
                finishing(2, after: .seconds(1)),
            ])
            .perform(on: queue, then: recorder.handler)
            try queue.advance(by: .seconds(1))
            try #require(recorder.count == 1)
            try #require(queue.isIdle)
            outcomes.withValue { $0.insert((try? recorder.last?.get()) ?? -1) }
        }
        #expect(outcomes.value == [1, 2])
    }
}
