import Dispatch
import JobKit
import JobKitTesting
import Testing

/// A queue that runs work at once, as an `ImmediateQueue` does, and counts
/// its instances alive in `live`: each performance holds its queue, so a
/// performance kept after it completed keeps its queue alive.
private final class CanaryQueue: JobQueue {
    private let canary: Canary
    private let base = ImmediateQueue()

    init(_ live: LockedValue<Int>) {
        canary = Canary(live)
    }

    func enqueue(_ work: @escaping @Sendable () -> Void) {
        base.enqueue(work)
    }

    func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork {
        base.enqueue(after: delay, work)
    }
}

@Suite("JobSource: an outcome completed from anywhere", .timeLimit(.minutes(1)))
struct JobSourceTests {
    @Test func everyPerformanceWaitingGetsTheOutcomeOnItsOwnQueue() throws {
        let source = JobSource<Int>()
        let first = TestQueue()
        let second = TestQueue()
        let (a, b, c) = (Recorder<Int>(), Recorder<Int>(), Recorder<Int>())
        source.job.perform(on: first, then: a.handler)
        source.job.perform(on: first, then: b.handler)
        source.job.perform(on: second, then: c.handler)
        try first.run()
        try second.run()
        #expect(a.count + b.count + c.count == 0)

        #expect(source.finish(with: 7))
        // No handler runs on the thread that completed the source.
        #expect(a.count + b.count + c.count == 0)
        try first.run()
        #expect(a.values == [7] && b.values == [7])
        #expect(c.count == 0)
        try second.run()
        #expect(c.values == [7])
        #expect(first.isIdle && second.isIdle)
    }

    @Test func aPerformanceStartedAfterTheSourceCompletedGetsItsOutcomeOnItsQueue() throws {
        let source = JobSource<Int>()
        #expect(source.fail(with: TestError(id: 3)))
        #expect(source.isCompleted)
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        source.job.perform(on: queue, then: recorder.handler)
        #expect(recorder.count == 0)
        try queue.run()
        #expect(recorder.count == 1)
        #expect(recorder.last?.failure as? TestError == TestError(id: 3))
        // And again, for as many performances as come.
        #expect(outcome(of: source.job)?.failure as? TestError == TestError(id: 3))
    }

    @Test func theFirstCompletionWinsAndTheRestReturnFalse() throws {
        let source = JobSource<Int>()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        source.job.perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(source.complete(with: .success(1)))
        #expect(!source.finish(with: 2))
        #expect(!source.fail(with: TestError()))
        #expect(!source.complete(with: Result<Int, TestError>.failure(TestError())))
        try queue.run()
        #expect(recorder.values == [1])
        #expect(try outcome(of: source.job)?.get() == 1)
    }

    @Test func aVoidSourceFinishesAndATypedResultCompletesIt() throws {
        let done = JobSource<Void>()
        #expect(done.finish())
        #expect(outcome(of: done.job)?.isSuccess == true)
        let typed = JobSource<Int>()
        #expect(typed.complete(with: Result<Int, TestError>.failure(TestError(id: 4))))
        #expect(outcome(of: typed.job)?.failure as? TestError == TestError(id: 4))
    }

    @Test func cancellingOnePerformanceLeavesTheSourceAndTheOthersWaiting() throws {
        let source = JobSource<Int>()
        let queue = TestQueue()
        let (cancelled, waiting) = (Recorder<Int>(), Recorder<Int>())
        let handle = source.job.perform(on: queue, then: cancelled.handler)
        source.job.perform(on: queue, then: waiting.handler)
        try queue.run()
        handle.cancel()
        try queue.run()
        #expect(isCancellation(cancelled.last?.failure))
        #expect(waiting.count == 0)
        #expect(!source.isCompleted)
        #expect(source.finish(with: 5))
        try queue.run()
        #expect(waiting.values == [5])
        #expect(cancelled.count == 1)
        #expect(queue.isIdle)
    }

    @Test func aCancelledPerformanceIsNotKeptBySourceThatNeverCompletes() {
        let source = JobSource<Int>()
        let live = LockedValue(0)
        for _ in 0..<1_000 {
            let handle = source.job.perform(on: CanaryQueue(live)) { _ in }
            handle.cancel()
        }
        #expect(live.value == 0)
        // A performance still waiting is kept, with its queue, until the
        // source completes.
        source.job.perform(on: CanaryQueue(live)) { _ in }
        #expect(live.value == 1)
        source.finish(with: 1)
        #expect(live.value == 0)
    }

    @Test func aSourceReleasedBeforeItCompletedFailsItsJobsAsAbandoned() throws {
        var source: JobSource<Int>? = JobSource()
        let job = try #require(source?.job)
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        job.perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(recorder.count == 0)
        source = nil
        try queue.run()
        #expect(recorder.last?.failure as? JobError == .abandoned)
        #expect(outcome(of: job)?.failure as? JobError == .abandoned)
    }

    @Test func aSourceReleasedAfterItCompletedStillGivesItsValue() throws {
        var source: JobSource<String>? = JobSource()
        let job = source!.job
        source?.finish(with: "done")
        source = nil
        #expect(try outcome(of: job)?.get() == "done")
    }

    @Test func aStallReportNamesTheSourceAJobWaitsFor() throws {
        let confirmation = JobSource<Bool>(named: "confirm deletion")
        let queue = TestQueue()
        let deletion = confirmation.job.then { _ in Job<Void>.succeeded }.named("delete draft")
        let handle = deletion.perform(on: queue) { _ in }
        try queue.run()
        let report = try #require(handle.stallReport())
        #expect(report.contains("delete draft ▸ confirm deletion: source (running)"))
        #expect(handle.snapshot().children.first?.kind == .source)
        // Unnamed, it is a source.
        let other = JobSource<Int>()
        let unnamed = other.job.perform(on: queue) { _ in }
        try queue.run()
        #expect(unnamed.snapshot().line == "source (running)")
        unnamed.cancel()
        confirmation.finish(with: true)
        try queue.run()
        #expect(handle.isCompleted)
    }

    /// Completions, cancels and new performances at the same instant, in
    /// the orders a concurrent queue allows: each performance gets one
    /// outcome, and the source's value unless it was cancelled first.
    @Test func completionsCancelsAndStartsAtOneInstantGiveEachPerformanceOneOutcome() throws {
        let seen = LockedValue<Set<String>>([])
        try exploreOrderings(seeds: 0..<300) { queue in
            let source = JobSource<Int>()
            let recorders = (0..<4).map { _ in Recorder<Int>() }
            let cancelled = source.job.perform(on: queue, then: recorders[0].handler)
            source.job.perform(on: queue, then: recorders[1].handler)
            queue.enqueue { source.finish(with: 1) }
            queue.enqueue { source.fail(with: TestError()) }
            queue.enqueue { cancelled.cancel() }
            queue.enqueue { source.job.perform(on: queue, then: recorders[2].handler) }
            source.job.perform(on: queue, then: recorders[3].handler)
            try queue.run()
            for recorder in recorders { try #require(recorder.count == 1) }
            // The fail came first, or the finish did: every performance
            // that was not cancelled first has the same outcome.
            let winner = recorders[1].last.map { try? $0.get() }
            try #require(winner == 1 || recorders[1].last?.failure is TestError)
            let first = recorders[0].last
            try #require(first.map { try? $0.get() } == winner || isCancellation(first?.failure))
            for recorder in recorders.dropFirst() { try #require(recorder.last.map { try? $0.get() } == winner) }
            try #require(queue.isIdle)
            seen.withValue { $0.insert(isCancellation(first?.failure) ? "cancelled" : "finished") }
        }
        #expect(seen.value == ["cancelled", "finished"])
    }

    /// On real threads: two completions race, and a cancel or a new
    /// performance races a completion.
    @Test func racesOnRealThreadsGiveOneOutcomeToEachPerformance() {
        for round in 0..<2_000 {
            let source = JobSource<Int>()
            let (waiting, late, cancelled) = (Recorder<Int>(), Recorder<Int>(), Recorder<Int>())
            let wins = LockedValue(0)
            source.job.perform(on: ImmediateQueue(), then: waiting.handler)
            let handle = source.job.perform(on: ImmediateQueue(), then: cancelled.handler)
            race {
                if source.finish(with: round) { wins.withValue { $0 += 1 } }
                handle.cancel()
            } _: {
                if source.fail(with: TestError(id: round)) { wins.withValue { $0 += 1 } }
                source.job.perform(on: ImmediateQueue(), then: late.handler)
            }
            #expect(wins.value == 1)
            #expect(waiting.count == 1 && late.count == 1 && cancelled.count == 1)
            let winner = waiting.last.map { try? $0.get() }
            #expect(late.last.map { try? $0.get() } == winner)
            if waiting.count != 1 || late.count != 1 || cancelled.count != 1 || wins.value != 1 { break }
        }
    }
}
