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

    @Test func threeHundredThousandSynchronousJobsFinishWithAFlatStack() throws {
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

    @Test(arguments: [1, .max])
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

@Suite("race, firstSuccess and collectOutcomes: the core's guarantees", .timeLimit(.minutes(1)))
struct OutcomeCombinatorGuaranteeTests {
    @Test func aJobThatDropsItsControllerIsAFailureLikeAnyOther() throws {
        let dropping = Job<Int> { _ in }
        let outcomes = try #require(outcome(of: Job.collectOutcomes([dropping, .succeeded(1)]))).get()
        #expect(outcomes.first?.failure as? JobError == .abandoned)
        #expect(try outcomes.last?.get() == 1)
        #expect(try outcome(of: Job.firstSuccess([dropping, .succeeded(2)]))?.get() == 2)
        #expect(outcome(of: Job.race([dropping, .never]))?.failure as? JobError == .abandoned)
    }

    @Test func theErrorsOfACancelledFirstSuccessAreReleasedOutsideItsLock() throws {
        // An error whose deinit takes a snapshot of the job: released under
        // the job's lock, it would take that lock again.
        let handle = LockedValue<JobHandle?>(nil)
        let snapshotsTaken = LockedValue(0)
        let failing = Job<Int> { controller in
            controller.fail(
                with: Probe.snapshotting(handle, counting: snapshotsTaken))
        }
        let waiting = ManualJob<Int>()
        handle.setValue(Job.firstSuccess([failing, waiting.job]).perform(on: ImmediateQueue()) { _ in })
        #expect(snapshotsTaken.value == 0)
        handle.value?.cancel()
        #expect(snapshotsTaken.value == 1)
        #expect(waiting.cancelCount == 1)
    }

    @Test func aRaceReleasesItsJobsOnceItIsOver() throws {
        weak var released: Tracked?
        let queue = TestQueue()
        do {
            let tracked = Tracked()
            released = tracked
            let loser = Job<Int> { controller in
                withExtendedLifetime(tracked) {}
                controller.onCancel { withExtendedLifetime(controller) {} }
            }
            Job.race([.succeeded(1), loser]).perform(on: queue) { _ in }
        }
        try queue.run()
        #expect(released == nil)
    }
}

@Suite("sleep", .timeLimit(.minutes(1)))
struct SleepTests {
    @Test func finishesAfterItsDurationInTheQueuesTime() throws {
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        let sleep = Job.sleep(for: .seconds(30))  // allowed: virtual time, on a TestQueue
        let handle = sleep.perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(29))
        #expect(recorder.count == 0)
        #expect(handle.snapshot().kind == .sleep(.seconds(30)))  // allowed: a snapshot's kind, no wait
        #expect(handle.snapshot().title == "sleep 30 s")
        try queue.advance(by: .seconds(1))
        #expect(recorder.last?.isSuccess == true)
        #expect(queue.isIdle)
    }

    @Test func cancellingItLeavesNothingOnTheQueue() throws {
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        let sleep = Job.sleep(for: .seconds(30))  // allowed: virtual time, on a TestQueue
        let handle = sleep.perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(queue.pendingCount == 1)
        handle.cancel()
        try queue.run()
        #expect(queue.isIdle)
        #expect(isCancellation(recorder.last?.failure))
    }

    @Test(arguments: [Duration.zero, .seconds(-1)])
    func aDurationOfZeroOrLessFinishesOnTheQueuesNextTurn(duration: Duration) throws {
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        Job.sleep(for: duration).perform(on: queue, then: recorder.handler)  // allowed: virtual time, on a TestQueue
        try queue.run()
        #expect(recorder.last?.isSuccess == true)
        #expect(queue.now == .zero)
    }

    @Test func aSleepBeforeAJobDelaysItsStartFromWhenTheWholeIsPerformed() throws {
        let queue = TestQueue()
        let started = LockedValue<[Duration]>([])
        let refresh = Job<Void> { controller in
            started.withValue { $0.append(queue.now) }
            controller.finish()
        }
        let refreshLater = Job.sequence([.sleep(for: .seconds(30)), refresh])  // allowed: TestQueue time
        try queue.advance(by: .seconds(100))
        refreshLater.perform(on: queue) { _ in }
        try queue.advance(by: .seconds(100))
        #expect(started.value == [.seconds(130)])
    }
}
