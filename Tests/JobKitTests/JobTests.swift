import Dispatch
import JobKit
import JobKitTesting
import Synchronization
import TestSupport
import Testing

@Suite("Job", .timeLimit(.minutes(1)))
struct JobTests {
    // MARK: - Laziness

    @Test func creatingAJobRunsNothing() throws {
        let runs = LockedValue(0)
        let job = Job<Void> { controller in
            runs.withValue { $0 += 1 }
            controller.finish()
        }
        _ = job
        _ = job.map { _ in 1 }
        _ = Job.sequence([job, job])
        #expect(runs.value == 0)
    }

    @Test func performingTwiceRunsTwiceWithNoSharedState() throws {
        let runs = LockedValue(0)
        let job = Job<Int> { controller in
            let run = runs.withValue { value -> Int in
                value += 1
                return value
            }
            controller.finish(with: run)
        }
        let queue = TestQueue()
        let first = Recorder<Int>()
        let second = Recorder<Int>()
        let firstHandle = job.perform(on: queue, then: first.handler)
        job.perform(on: queue, then: second.handler)
        firstHandle.cancel()
        try queue.run()
        #expect(runs.value == 1)
        #expect(isCancellation(first.last?.failure))
        #expect(try second.last?.get() == 1)
    }

    @Test func performsOnTheGivenQueueOnlyWhenItRuns() throws {
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        Job.succeeded(7).perform(on: queue, then: recorder.handler)
        #expect(recorder.count == 0)
        #expect(queue.pendingCount == 1)
        try queue.run()
        #expect(try recorder.last?.get() == 7)
    }

    // MARK: - Exactly once

    @Test func firstOutcomeWinsAndLaterReportsReturnFalse() throws {
        let recorder = Recorder<Int>()
        let results = LockedValue<[Bool]>([])
        Job<Int> { controller in
            results.withValue {
                $0.append(controller.finish(with: 1))
                $0.append(controller.finish(with: 2))
                $0.append(controller.fail(with: TestError()))
                $0.append(controller.complete(with: .success(3)))
            }
        }
        .perform(on: ImmediateQueue(), then: recorder.handler)
        #expect(results.value == [true, false, false, false])
        #expect(recorder.count == 1)
        #expect(try recorder.last?.get() == 1)
    }

    @Test func reportsAfterCancelAreDropped() throws {
        let manual = ManualJob<Int>()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        let handle = manual.job.perform(on: queue, then: recorder.handler)
        try queue.run()
        handle.cancel()
        #expect(manual.finish(with: 1) == false)
        try queue.run()
        #expect(recorder.count == 1)
        #expect(isCancellation(recorder.last?.failure))
    }

    @Test func handlerRunsOnceWhenSixteenThreadsCompleteAtOnce() throws {
        for _ in 0..<500 {
            let manual = ManualJob<Int>()
            let recorder = Recorder<Int>()
            manual.job.perform(on: ImmediateQueue(), then: recorder.handler)
            let controller = try #require(manual.controller)
            let wins = LockedValue(0)
            DispatchQueue.concurrentPerform(iterations: 16) { index in
                let won: Bool
                switch index % 3 {
                case 0: won = controller.finish(with: index)
                case 1: won = controller.fail(with: TestError(id: index))
                default: won = controller.complete(with: .success(index))
                }
                if won { wins.withValue { $0 += 1 } }
            }
            #expect(wins.value == 1)
            #expect(recorder.count == 1)
        }
    }

    // MARK: - Abandonment

    @Test func bodyThatDropsItsControllerFailsAsAbandoned() throws {
        let result = outcome(of: Job<Int> { _ in })
        #expect(result?.failure as? JobError == .abandoned)
    }

    @Test func controllerKeptElsewhereIsAbandonedWhenReleased() throws {
        let manual = ManualJob<Int>()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        manual.job.perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(recorder.count == 0)
        manual.release()
        try queue.run()
        #expect(recorder.last?.failure as? JobError == .abandoned)
    }

    @Test func aQueueThatDropsTheBodyUnrunFailsTheJobAsAbandoned() {
        let queue = DroppingFirstQueue()
        let recorder = Recorder<Int>()
        let handle = Job<Int> { $0.finish(with: 1) }.perform(on: queue, then: recorder.handler)
        #expect(handle.isCompleted)
        #expect(recorder.last?.failure as? JobError == .abandoned)
        #expect(recorder.count == 1)
        #expect(queue.enqueued == 2)
    }

    @Test func abandonedOnAnotherThreadStillCompletes() async throws {
        let done = DispatchSemaphore(value: 0)
        let recorder = Recorder<Int>()
        Job<Int> { controller in
            DispatchQueue.global().async { _ = controller }
        }
        .perform(on: DispatchQueue.global()) { outcome in
            recorder.handler(outcome)
            done.signal()
        }
        #expect(await done.signalled(within: 10))
        #expect(recorder.last?.failure as? JobError == .abandoned)
    }

    // MARK: - Cancellation

    @Test func cancelCompletesAtOnceAndRunsOnCancelOnce() throws {
        let manual = ManualJob<Int>()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        let handle = manual.job.perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(!handle.isCompleted)
        handle.cancel()
        #expect(handle.isCompleted)
        #expect(manual.cancelCount == 1)
        handle.cancel()
        #expect(manual.cancelCount == 1)
        try queue.run()
        #expect(recorder.count == 1)
        #expect(isCancellation(recorder.last?.failure))
        #expect(manual.controller?.isCancelled == true)
    }

    @Test func onCancelRegisteredAfterCancellationRunsImmediately() throws {
        let manual = ManualJob<Void>()
        let queue = TestQueue()
        let handle = manual.job.perform(on: queue) { _ in }
        try queue.run()
        handle.cancel()
        let ran = LockedValue(false)
        manual.controller?.onCancel { ran.setValue(true) }
        #expect(ran.value)
    }

    @Test func onCancelDoesNotRunWhenTheJobFinishes() throws {
        let ran = LockedValue(false)
        let recorder = Recorder<Void>()
        let handle = Job<Void> { controller in
            controller.onCancel { ran.setValue(true) }
            controller.finish()
        }
        .perform(on: ImmediateQueue(), then: recorder.handler)
        handle.cancel()
        #expect(!ran.value)
        #expect(recorder.last?.isSuccess == true)
    }

    @Test func jobCancelledBeforeItsBodyStartedNeverStarts() throws {
        let started = LockedValue(false)
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        let handle = Job<Void> { controller in
            started.setValue(true)
            controller.finish()
        }
        .perform(on: queue, then: recorder.handler)
        handle.cancel()
        try queue.run()
        #expect(!started.value)
        #expect(isCancellation(recorder.last?.failure))
    }

    @Test func cancellingAFinishedJobDoesNothing() throws {
        let recorder = Recorder<Int>()
        let handle = Job.succeeded(1).perform(on: ImmediateQueue(), then: recorder.handler)
        handle.cancel()
        #expect(recorder.count == 1)
        #expect(try recorder.last?.get() == 1)
    }

    @Test func cancellingAParentCancelsItsChildren() throws {
        let child = ManualJob<Int>()
        let queue = TestQueue()
        let childRecorder = Recorder<Int>()
        let parent = Job<Void> { controller in
            controller.perform(child.job) { outcome in
                childRecorder.handler(outcome)
                controller.complete(with: outcome.map { _ in () })
            }
        }
        let handle = parent.perform(on: queue) { _ in }
        try queue.run()
        #expect(child.startCount == 1)
        handle.cancel()
        #expect(child.cancelCount == 1)
        try queue.run()
        #expect(isCancellation(childRecorder.last?.failure))
    }

    @Test func cancelFromManyThreadsRunsOnCancelOnce() throws {
        for _ in 0..<200 {
            let manual = ManualJob<Int>()
            let recorder = Recorder<Int>()
            let handle = manual.job.perform(on: ImmediateQueue(), then: recorder.handler)
            DispatchQueue.concurrentPerform(iterations: 8) { index in
                if index.isMultiple(of: 2) { handle.cancel() } else { manual.finish(with: index) }
            }
            #expect(recorder.count == 1)
            #expect(manual.cancelCount <= 1)
            if isCancellation(recorder.last?.failure) { #expect(manual.cancelCount == 1) }
        }
    }

    @Test func theFirstOnCancelRacingWithCancelRunsOnce() throws {
        // The first attachment makes the job's table while another thread
        // cancels the job: the block is kept and run by the cancel, or run
        // at once, never lost.
        for _ in 0..<5_000 {
            let kept = LockedValue<Job<Void>.Controller?>(nil)
            let handle = Job<Void> { kept.setValue($0) }.perform(on: ImmediateQueue()) { _ in }
            let controller = try #require(kept.value)
            #expect(runsOfAnOnCancelRacing(withCancelOf: handle, controller) == 1)
        }
    }

    // MARK: - Threading

    @Test func handlerRunsOnThePerformingQueueWhenTheBodyReportsFromElsewhere() async throws {
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "jobkit.tests.performing")
        queue.setSpecific(key: key, value: "performing")
        let elsewhere = DispatchQueue(label: "jobkit.tests.elsewhere")
        let seen = LockedValue<[String?]>([])
        let done = DispatchSemaphore(value: 0)
        Job<Int> { controller in
            seen.withValue { $0.append(DispatchQueue.getSpecific(key: key)) }
            elsewhere.async { controller.finish(with: 1) }
        }
        .perform(on: queue) { _ in
            seen.withValue { $0.append(DispatchQueue.getSpecific(key: key)) }
            done.signal()
        }
        #expect(await done.signalled(within: 10))
        #expect(seen.value == ["performing", "performing"])
    }

    @Test func controllerExposesItsQueueForChildren() throws {
        let queue = TestQueue()
        let same = LockedValue(false)
        Job<Void> { controller in
            same.setValue((controller.queue as? TestQueue) === queue)
            controller.finish()
        }
        .perform(on: queue) { _ in }
        try queue.run()
        #expect(same.value)
    }

    // MARK: - Memory

    @Test func completionReleasesEveryClosureTheJobHeld() throws {
        weak var weakBody: Tracked?
        weak var weakHandler: Tracked?
        weak var weakCancel: Tracked?
        let queue = TestQueue()
        let manual = ManualJob<Void>()
        var handle: JobHandle?
        do {
            let body = Tracked()
            let handlerObject = Tracked()
            let cancelObject = Tracked()
            weakBody = body
            weakHandler = handlerObject
            weakCancel = cancelObject
            let job = Job<Void> { controller in
                withExtendedLifetime(body) {}
                controller.onCancel { withExtendedLifetime(cancelObject) {} }
                manual.job.perform(on: controller.queue) { _ in controller.finish() }
            }
            handle = job.perform(on: queue) { _ in withExtendedLifetime(handlerObject) {} }
        }
        try queue.run()
        #expect(weakHandler != nil)
        manual.finish()
        manual.release()
        try queue.run()
        #expect(handle?.isCompleted == true)
        #expect(weakBody == nil)
        #expect(weakHandler == nil)
        #expect(weakCancel == nil)
    }

    @Test func cancellationReleasesNever() throws {
        weak var weakHandler: Tracked?
        let queue = TestQueue()
        var handle: JobHandle?
        do {
            let object = Tracked()
            weakHandler = object
            handle = Job<Int>.never.perform(on: queue) { _ in withExtendedLifetime(object) {} }
        }
        try queue.run()
        #expect(weakHandler != nil)
        handle?.cancel()
        try queue.run()
        #expect(weakHandler == nil)
    }

    // MARK: - Constructors

    @Test func constructorsReportWhatTheySay() throws {
        #expect(try outcome(of: Job.succeeded(3))?.get() == 3)
        #expect(outcome(of: Job<Int>.failed(TestError(id: 4)))?.failure as? TestError == TestError(id: 4))
        #expect(outcome(of: Job<Void>.succeeded)?.isSuccess == true)
        #expect(outcome(of: Job<Int>.never) == nil)
    }

    @Test func voidJobsMatchAPlainSuccessCase() throws {
        let result = try #require(outcome(of: Job<Void> { $0.finish() }))
        switch result {
        case .success: break
        case .failure: Issue.record("expected success")
        }
    }
}

/// A queue torn down before it ran the first work item it was given (a
/// job's body): it drops that one, unrun, and runs the rest at once.
private final class DroppingFirstQueue: JobQueue {
    private let count = Atomic<Int>(0)

    /// How many work items the queue was given.
    var enqueued: Int { count.load(ordering: .relaxed) }

    func enqueue(_ work: @escaping @Sendable () -> Void) {
        if count.add(1, ordering: .relaxed).oldValue > 0 { work() }
    }

    func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork {
        enqueue(work)
        return DelayedWork {}
    }
}
