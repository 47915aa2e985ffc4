import Dispatch
import JobKit
import JobKitTesting
import Testing

@Suite("shared: one performance for every consumer", .timeLimit(.minutes(1)))
struct SharedTests {
    @Test func performancesWhileARunGoesOnShareItAndGetItsOutcomeOnTheirQueues() throws {
        let manual = ManualJob<Int>()
        let shared = manual.job.shared()
        let first = TestQueue()
        let second = TestQueue()
        let (a, b, c) = (Recorder<Int>(), Recorder<Int>(), Recorder<Int>())
        shared.perform(on: first, then: a.handler)
        shared.perform(on: first, then: b.handler)
        shared.perform(on: second, then: c.handler)
        try first.run()
        try second.run()
        #expect(manual.startCount == 1)
        #expect(manual.controller?.queue as? TestQueue === first)

        manual.finish(with: 3)
        try first.run()
        #expect(a.values == [3] && b.values == [3])
        #expect(c.count == 0)
        try second.run()
        #expect(c.values == [3])

        // Nothing kept: the next performance runs the job again.
        let d = Recorder<Int>()
        shared.perform(on: second, then: d.handler)
        try second.run()
        #expect(manual.startCount == 2)
        manual.finish(with: 4)
        try second.run()
        #expect(d.values == [4])
        #expect(first.isIdle && second.isIdle)
    }

    @Test func eachCallToSharedMakesItsOwnRuns() throws {
        let manual = ManualJob<Int>()
        let queue = TestQueue()
        manual.job.shared().perform(on: queue) { _ in }
        manual.job.shared().perform(on: queue) { _ in }
        try queue.run()
        #expect(manual.startCount == 2)
    }

    @Test func cancellingOneConsumerLeavesTheRunToTheOthers() throws {
        let manual = ManualJob<Int>()
        let shared = manual.job.shared()
        let queue = TestQueue()
        let (cancelled, waiting) = (Recorder<Int>(), Recorder<Int>())
        let handle = shared.perform(on: queue, then: cancelled.handler)
        shared.perform(on: queue, then: waiting.handler)
        try queue.run()
        handle.cancel()
        try queue.run()
        #expect(isCancellation(cancelled.last?.failure))
        #expect(manual.cancelCount == 0)
        manual.finish(with: 8)
        try queue.run()
        #expect(waiting.values == [8])
        #expect(cancelled.count == 1)
    }

    @Test func theRunIsCancelledWhenEveryConsumerLeftAndTheNextStartsAnother() throws {
        let manual = ManualJob<Int>()
        let shared = manual.job.shared()
        let queue = TestQueue()
        let handles = (0..<3).map { _ in shared.perform(on: queue) { _ in } }
        try queue.run()
        handles[0].cancel()
        handles[1].cancel()
        #expect(manual.cancelCount == 0)
        handles[2].cancel()
        #expect(manual.cancelCount == 1)
        let next = Recorder<Int>()
        shared.perform(on: queue, then: next.handler)
        try queue.run()
        #expect(manual.startCount == 2)
        manual.finish(with: 9)
        try queue.run()
        #expect(next.values == [9])
        #expect(queue.isIdle)
    }

    @Test func keepingAValueRunsUntilASuccessAndThenFinishesAtOnce() throws {
        let manual = ManualJob<Int>()
        let shared = manual.job.shared(keeping: .value)
        let queue = TestQueue()
        let failed = Recorder<Int>()
        shared.perform(on: queue, then: failed.handler)
        try queue.run()
        manual.fail(with: TestError(id: 1))
        try queue.run()
        #expect(failed.last?.failure as? TestError == TestError(id: 1))

        let first = Recorder<Int>()
        shared.perform(on: queue, then: first.handler)
        try queue.run()
        #expect(manual.startCount == 2)
        manual.finish(with: 5)
        try queue.run()
        #expect(first.values == [5])

        let later = Recorder<Int>()
        shared.perform(on: queue, then: later.handler)
        #expect(later.count == 0)  // on its queue, not in `perform`
        try queue.run()
        #expect(later.values == [5])
        #expect(manual.startCount == 2)
    }

    @Test func keepingTheOutcomeKeepsAFailureTooButNotACancelledRun() throws {
        let manual = ManualJob<Int>()
        let shared = manual.job.shared(keeping: .outcome)
        let queue = TestQueue()
        shared.perform(on: queue) { _ in }.cancel()
        try queue.run()
        let failed = Recorder<Int>()
        shared.perform(on: queue, then: failed.handler)
        try queue.run()
        #expect(manual.startCount == 1)
        manual.fail(with: TestError(id: 2))
        try queue.run()
        #expect(failed.last?.failure as? TestError == TestError(id: 2))
        #expect(outcome(of: shared)?.failure as? TestError == TestError(id: 2))
        #expect(manual.startCount == 1)
    }

    @Test func aRunThatCompletesAtOnceOnAnImmediateQueueReachesItsConsumer() throws {
        let runs = LockedValue(0)
        let shared = Job<Int> { controller in
            runs.withValue { $0 += 1 }
            controller.finish(with: 6)
        }
        .shared()
        #expect(try outcome(of: shared)?.get() == 6)
        #expect(try outcome(of: shared)?.get() == 6)
        #expect(runs.value == 2)
    }

    @Test func anAbandonedRunFailsEveryConsumerAsAbandoned() throws {
        let manual = ManualJob<Int>()
        let shared = manual.job.shared()
        let queue = TestQueue()
        let (a, b) = (Recorder<Int>(), Recorder<Int>())
        shared.perform(on: queue, then: a.handler)
        shared.perform(on: queue, then: b.handler)
        try queue.run()
        manual.release()
        try queue.run()
        #expect(a.last?.failure as? JobError == .abandoned)
        #expect(b.last?.failure as? JobError == .abandoned)
    }

    @Test func aSnapshotShowsHowManyShareTheRunAndTheRun() throws {
        let manual = ManualJob<Int>()
        let shared = manual.job.named("fetch profile").shared()
        let queue = TestQueue()
        let first = shared.named("header").perform(on: queue) { _ in }
        shared.perform(on: queue) { _ in }
        try queue.run()
        #expect(first.snapshot().kind == .shared(consumers: 2))
        let report = try #require(first.stallReport())
        #expect(report.contains("header: shared by 2 ▸ fetch profile (running)"))
        manual.finish(with: 1)
        try queue.run()
        #expect(first.stallReport() == nil)
    }

    @Test func aSnapshotShowsARunSharedTwiceInOneTreeOnce() throws {
        let manual = ManualJob<Int>()
        let shared = manual.job.named("fetch profile").shared()
        let queue = TestQueue()
        let handle = Job.collect([shared, shared]).perform(on: queue) { _ in }
        try queue.run()
        let report = try #require(handle.stallReport())
        #expect(report.components(separatedBy: "fetch profile (running)").count - 1 == 2)  // path and tree
        #expect(report.contains("shared by 2 (running, its run is shown under another job that shares it)"))
        manual.finish(with: 1)
        try queue.run()
        #expect(handle.isCompleted)
    }

    /// A shared job whose run waits for the shared job itself never
    /// completes (the app's deadlock), and its stall report says where,
    /// rather than describing the run inside itself without end.
    @Test func aStallReportOfARunThatWaitsForItselfEnds() throws {
        let itself = LockedValue<Job<Int>?>(nil)
        let refresh = Job<Int> { controller in
            guard let job = itself.value else { return }
            controller.perform(job) { controller.complete(with: $0) }
        }
        .named("refresh token")
        .shared()
        itself.setValue(refresh)
        let queue = TestQueue()
        let handle = refresh.perform(on: queue) { _ in }
        try queue.run()
        let report = try #require(handle.stallReport())
        #expect(
            report.contains(
                "shared by 2 ▸ refresh token ▸ shared by 2 (running, its run is shown under another job that shares it)"
            ))
        handle.cancel()
        itself.setValue(nil)
        try queue.run()
        #expect(queue.isIdle)
    }

    /// The run's completion and consumers' cancels and starts at one
    /// instant, in the orders a concurrent queue allows.
    @Test func completionCancelsAndStartsAtOneInstantGiveEachConsumerOneOutcome() throws {
        let seen = LockedValue<Set<String>>([])
        try exploreOrderings(seeds: 0..<300) { queue in
            let runs = LockedValue(0)
            let shared = finishing(7, after: .seconds(1), ran: runs).shared()
            let recorders = (0..<3).map { _ in Recorder<Int>() }
            let cancelled = shared.perform(on: queue, then: recorders[0].handler)
            shared.perform(on: queue, then: recorders[1].handler)
            _ = queue.enqueue(after: .seconds(1)) { cancelled.cancel() }
            _ = queue.enqueue(after: .seconds(1)) { shared.perform(on: queue, then: recorders[2].handler) }
            try queue.advance(by: .seconds(1))
            // A consumer that came after the run completed started another.
            try queue.advance(by: .seconds(1))
            for recorder in recorders { try #require(recorder.count == 1) }
            let first = recorders[0].last
            try #require((try? first?.get()) == 7 || isCancellation(first?.failure))
            try #require(recorders[1].values == [7] && recorders[2].values == [7])
            try #require(runs.value == 1 || runs.value == 2)
            try #require(queue.isIdle)
            let firstOutcome = isCancellation(first?.failure) ? "cancelled" : "finished"
            seen.withValue { $0.insert("\(firstOutcome), \(runs.value) runs") }
        }
        #expect(seen.value.count >= 3)
    }

    /// On real threads: many consumers start at once and share one run; a
    /// cancel races the run's completion.
    @Test func racesOnRealThreadsShareOneRunAndGiveOneOutcomeEach() {
        for round in 0..<1_000 {
            let manual = ManualJob<Int>()
            let shared = manual.job.shared()
            let recorders = (0..<4).map { _ in Recorder<Int>() }
            DispatchQueue.concurrentPerform(iterations: 3) { index in
                shared.perform(on: ImmediateQueue(), then: recorders[index].handler)
            }
            #expect(manual.startCount == 1)
            let handle = shared.perform(on: ImmediateQueue(), then: recorders[3].handler)
            race {
                manual.finish(with: round)
            } _: {
                handle.cancel()
            }
            #expect(recorders.allSatisfy { $0.count == 1 })
            #expect(recorders.prefix(3).allSatisfy { $0.values == [round] })
            #expect(manual.cancelCount == 0)
            if manual.startCount != 1 || !recorders.allSatisfy({ $0.count == 1 }) { break }
        }
    }

    /// On real threads: a consumer's start races its own cancel and
    /// another consumer's start. Whichever order, the first is cancelled,
    /// and one run goes on for the second, which gets its value.
    @Test func aConsumerJoiningAndLeavingRacesAnotherJoiningOnRealThreads() {
        for round in 0..<1_000 {
            let manual = ManualJob<Int>()
            let shared = manual.job.shared()
            let held = TestQueue()
            let (first, second) = (Recorder<Int>(), Recorder<Int>())
            let handle = shared.perform(on: held, then: first.handler)
            DispatchQueue.concurrentPerform(iterations: 3) { index in
                switch index {
                case 0: while held.runNext() {}
                case 1: handle.cancel()
                default: shared.perform(on: ImmediateQueue(), then: second.handler)
                }
            }
            while held.runNext() {}
            #expect(first.count == 1 && isCancellation(first.last?.failure))
            // One run goes on: the first's, or one the second started
            // after the first's was cancelled (or never started). A run
            // cancelled as its body began may have started after it.
            #expect(manual.startCount - manual.cancelCount == 1)
            #expect(manual.finishAll(with: round) == 1)
            #expect(second.values == [round])
            if first.count != 1 || second.count != 1 { break }
        }
    }
}
