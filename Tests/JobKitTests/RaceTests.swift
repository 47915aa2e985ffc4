import Dispatch
import JobKit
import JobKitTesting
import TestSupport
import Testing

@Suite("race", .timeLimit(.minutes(1)))
struct RaceTests {
    @Test func theFirstSuccessWinsAndTheLosersAreCancelledAtOnce() throws {
        let children = (0..<3).map { _ in ManualJob<Int>() }
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        Job.race(children.map(\.job)).perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(children.allSatisfy { $0.startCount == 1 })
        children[1].finish(with: 1)
        // Cancelled as the winner completes, before the queue runs again.
        #expect(children.map(\.cancelCount) == [1, 0, 1])
        try queue.run()
        #expect(try recorder.last?.get() == 1)
        #expect(children[0].finish(with: 0) == false)
        try queue.run()
        #expect(recorder.count == 1)
    }

    @Test(arguments: [63, 64, 65, 200])
    func everyJobOfALargeRaceStarts(count: Int) throws {
        let children = (0..<count).map { _ in ManualJob<Int>() }
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        Job.race(children.map(\.job)).perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(children.allSatisfy { $0.startCount == 1 })
        children[count - 1].finish(with: count)
        try queue.run()
        #expect(try recorder.last?.get() == count)
        #expect(children.dropLast().allSatisfy { $0.cancelCount == 1 })
        #expect(queue.isIdle)
    }

    @Test func jobsThatFinishInTheirBodyEndTheRaceBeforeTheNextStarts() throws {
        let starts = LockedValue<[Int]>([])
        let jobs = (0..<3).map { index in
            Job<Int> { controller in
                starts.withValue { $0.append(index) }
                if index == 1 { controller.finish(with: index) }
                // The others wait until cancelled.
                controller.onCancel { withExtendedLifetime(controller) {} }
            }
        }
        #expect(try outcome(of: Job.race(jobs))?.get() == 1)
        #expect(starts.value == [0, 1])
    }

    @Test func theFirstFailureWinsToo() throws {
        let children = (0..<2).map { _ in ManualJob<Int>() }
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        Job.race(children.map(\.job)).perform(on: queue, then: recorder.handler)
        try queue.run()
        children[0].fail(with: TestError(id: 7))
        try queue.run()
        #expect(recorder.last?.failure as? TestError == TestError(id: 7))
        #expect(children.map(\.cancelCount) == [0, 1])
    }

    @Test func noJobsFailWithATypedErrorRatherThanNeverCompleting() {
        let failure = outcome(of: Job.race([Job<Int>]()))?.failure
        guard case .invalidArgument(let reason) = failure as? JobError else {
            Issue.record("expected invalidArgument, got \(String(describing: failure))")
            return
        }
        #expect(reason == "race needs at least one job, got none")
    }

    @Test func aRaceOfOneIsThatJob() throws {
        #expect(try outcome(of: Job.race([.succeeded(5)]))?.get() == 5)
        #expect(outcome(of: Job.race([Job<Int>.failed(TestError(id: 5))]))?.failure as? TestError == TestError(id: 5))
    }

    @Test func theWinnersValueComesOutAsItWentInOfAnExistentialOrALargeType() throws {
        // The contestants' values travel boxed: an existential's own box
        // holds the value inside, and a large value does not fit a box inline.
        let texts: [Job<any Sendable>] = [.succeeded("first"), .succeeded(2)]
        #expect(try outcome(of: Job.race(texts))?.get() as? String == "first")
        let errors: [Job<any Error>] = [.succeeded(TestError(id: 1)), .succeeded(TestError(id: 2))]
        #expect(try outcome(of: Job.race(errors))?.get() as? TestError == TestError(id: 1))
        let large = (0..<64).map { Job.succeeded(SIMD8<Int>(repeating: $0)) }
        #expect(try outcome(of: Job.race(large))?.get() == SIMD8(repeating: 0))
        let manual = [ManualJob<SIMD8<Int>>(), ManualJob<SIMD8<Int>>()]
        let queue = TestQueue()
        let recorder = Recorder<SIMD8<Int>>()
        Job.race(manual.map(\.job)).perform(on: queue, then: recorder.handler)
        try queue.run()
        manual[1].finish(with: SIMD8(1, 2, 3, 4, 5, 6, 7, 8))
        try queue.run()
        #expect(try recorder.last?.get() == SIMD8(1, 2, 3, 4, 5, 6, 7, 8))
        #expect(manual.map(\.cancelCount) == [1, 0])
    }

    @Test func cancellingTheRaceCancelsEveryJob() throws {
        let children = (0..<3).map { _ in ManualJob<Int>() }
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        let handle = Job.race(children.map(\.job)).perform(on: queue, then: recorder.handler)
        try queue.run()
        handle.cancel()
        try queue.run()
        #expect(children.map(\.cancelCount) == [1, 1, 1])
        #expect(isCancellation(recorder.last?.failure))
        #expect(recorder.count == 1)
    }

    @Test func theLosersTimersEndWithTheRace() throws {
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        let cancels = LockedValue<[Int]>([])
        let slow = finishing(2, after: .seconds(60), cancelled: cancels).discardingValue()
        let sleeps = [Job.sleep(for: .seconds(1)), .sleep(for: .seconds(30))]  // allowed: virtual time, on a TestQueue
        Job.race([sleeps[0], slow, sleeps[1]]).perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(1))
        #expect(recorder.last?.isSuccess == true)
        #expect(cancels.value == [2])
        // Neither the slow job's timer nor the other sleep is left.
        #expect(queue.isIdle)
    }

    @Test func performingItAgainRacesAgain() throws {
        let queue = TestQueue()
        let starts = LockedValue<[Int]>([])
        let job = Job.race([
            finishing(1, after: .seconds(2), started: starts), finishing(2, after: .seconds(1), started: starts),
        ])
        let recorder = Recorder<Int>()
        job.perform(on: queue, then: recorder.handler)
        job.perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(5))
        #expect(try recorder.outcomes.map { try $0.get() } == [2, 2])
        #expect(starts.value.sorted() == [1, 1, 2, 2])
        #expect(queue.isIdle)
    }

    @Test func twoJobsDoneAtTheSameInstantWinByTheSeedTheSameWayEveryTime() throws {
        func winner(seed: UInt64) throws -> Int {
            let queue = TestQueue(ordering: .shuffled(seed: seed))
            let recorder = Recorder<Int>()
            Job.race([finishing(0, after: .seconds(1)), finishing(1, after: .seconds(1))])
                .perform(on: queue, then: recorder.handler)
            try queue.advance(by: .seconds(1))
            try #require(recorder.count == 1)
            try #require(queue.isIdle)
            return try #require(recorder.last).get()
        }
        let winners = try (0..<64).map { try winner(seed: UInt64($0)) }
        #expect(Set(winners) == [0, 1])
        #expect(try (0..<64).map { try winner(seed: UInt64($0)) } == winners)
    }

    @Test func aRaceSaysItIsOneAndWhichJobsItWaitsOn() throws {
        let queue = TestQueue()
        let children = (0..<3).map { _ in ManualJob<Int>() }
        let jobs = children.enumerated().map { index, child in child.job.named("mirror \(index)") }
        let handle = Job.race(jobs).named("download").perform(on: queue) { _ in }
        try queue.run()
        let snapshot = handle.snapshot()
        #expect(snapshot.kind == .race(running: 3, count: 3))
        #expect(snapshot.title == "download: race of 3")
        #expect(snapshot.children.map(\.line) == ["mirror 0 (running)", "mirror 1 (running)", "mirror 2 (running)"])
        handle.cancel()
    }

    @Test(.onThreadOfItsOwn) func oneWinnerAndEveryLoserCancelledOrDoneOnManyThreads() async throws {
        for _ in 0..<200 {
            let done = DispatchSemaphore(value: 0)
            let recorder = Recorder<Int>()
            let cancels = LockedValue(0)
            let jobs = (0..<8).map { index in
                Job<Int> { controller in
                    controller.onCancel { cancels.withValue { $0 += 1 } }
                    DispatchQueue.global().async { controller.finish(with: index) }
                }
            }
            Job.race(jobs).perform(on: DispatchQueue.global()) { outcome in
                recorder.handler(outcome)
                done.signal()
            }
            #expect(await done.signalled(within: 10))
            #expect(recorder.count == 1)
            #expect(try (0..<8).contains(#require(recorder.last).get()))
            #expect(cancels.value <= 7)
        }
    }
}
