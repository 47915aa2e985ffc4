import Dispatch
import JobKitTesting
import TestSupport
import Testing

@testable import JobKit

@Suite("Sequence", .timeLimit(.minutes(1)))
struct SequenceTests {
    @Test func emptySequenceFinishesAtOnce() throws {
        #expect(outcome(of: Job.sequence([]))?.isSuccess == true)
    }

    @Test(arguments: [1, 2, 5])
    func runsStrictlyOneAtATimeInOrder(count: Int) throws {
        let steps = (0..<count).map { _ in ManualJob<Void>() }
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        Job.sequence(steps.map(\.job)).perform(on: queue, then: recorder.handler)
        for index in 0..<count {
            try queue.run()
            #expect(steps.map(\.startCount) == (0..<count).map { $0 <= index ? 1 : 0 })
            #expect(recorder.count == 0)
            steps[index].finish()
        }
        try queue.run()
        #expect(recorder.last?.isSuccess == true)
    }

    @Test func stopsAtTheFirstFailureWithoutStartingTheRest() throws {
        let steps = (0..<3).map { _ in ManualJob<Void>() }
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        Job.sequence(steps.map(\.job)).perform(on: queue, then: recorder.handler)
        try queue.run()
        steps[0].finish()
        try queue.run()
        steps[1].fail(with: TestError(id: 1))
        try queue.run()
        #expect(recorder.last?.failure as? TestError == TestError(id: 1))
        #expect(steps[2].startCount == 0)
        #expect(recorder.count == 1)
    }

    @Test func cancellingCancelsTheRunningStepAndStartsNoMore() throws {
        let steps = (0..<2).map { _ in ManualJob<Void>() }
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        let handle = Job.sequence(steps.map(\.job)).perform(on: queue, then: recorder.handler)
        try queue.run()
        handle.cancel()
        #expect(steps[0].cancelCount == 1)
        steps[0].finish()
        try queue.run()
        #expect(steps[1].startCount == 0)
        #expect(isCancellation(recorder.last?.failure))
    }

    @Test func performingTwiceRunsEveryStepTwice() throws {
        let runs = LockedValue([0, 0, 0])
        let steps = (0..<3).map { index in
            Job<Void> { controller in
                runs.withValue { $0[index] += 1 }
                controller.finish()
            }
        }
        let sequence = Job.sequence(steps)
        #expect(outcome(of: sequence)?.isSuccess == true)
        #expect(outcome(of: sequence)?.isSuccess == true)
        #expect(runs.value == [2, 2, 2])
    }

    @Test func aRetriedSequenceStartsFromItsFirstStep() throws {
        let firstRuns = LockedValue(0)
        let secondRuns = LockedValue(0)
        let first = Job<Void> { controller in
            firstRuns.withValue { $0 += 1 }
            controller.finish()
        }
        let second = Job<Void> { controller in
            let run = secondRuns.withValue { value -> Int in
                value += 1
                return value
            }
            if run < 3 { controller.fail(with: TestError(id: run)) } else { controller.finish() }
        }
        #expect(outcome(of: Job.sequence([first, second]).retry(attempts: 3))?.isSuccess == true)
        #expect(firstRuns.value == 3)
        #expect(secondRuns.value == 3)
    }

    @Test(.onThreadOfItsOwn) func aMillionSynchronousStepsOnAnImmediateQueueKeepAFlatStack() throws {
        let top = currentStackAddress()
        let deepest = LockedValue(top)
        let count = LockedValue(0)
        let step = Job<Void> { controller in
            let address = currentStackAddress()
            deepest.withValue { $0 = min($0, address) }
            count.withValue { $0 += 1 }
            controller.finish()
        }
        #expect(outcome(of: Job.sequence(Array(repeating: step, count: aMillion)))?.isSuccess == true)
        #expect(count.value == aMillion)
        #expect(top - deepest.value < 64 * 1024)
    }

    @Test func stepsThatCompleteInlineOnAQueueWithoutTrampolineDoNotRecurse() throws {
        // A queue that runs work inline, at once, with no queue of its own:
        // the sequence must still loop instead of recursing.
        let top = currentStackAddress()
        let deepest = LockedValue(top)
        let step = Job<Void> { controller in
            let address = currentStackAddress()
            deepest.withValue { $0 = min($0, address) }
            controller.finish()
        }
        let recorder = Recorder<Void>()
        Job.sequence(Array(repeating: step, count: 50_000)).perform(on: NestingQueue(), then: recorder.handler)
        #expect(recorder.last?.isSuccess == true)
        #expect(top - deepest.value < 64 * 1024)
    }

    @Test func aLongSynchronousSequenceLetsOtherWorkOnItsQueueRunEverySoManySteps() throws {
        // A serial queue's fairness: a sequence whose steps all complete
        // synchronously runs them in a loop, but hops through the queue
        // every `inlineBudget` steps, so work enqueued meanwhile (a UI
        // update on the main queue, say) waits for at most that many steps.
        let queue = TestQueue()
        let stepsRun = LockedValue(0)
        let step = Job<Void> { controller in
            stepsRun.withValue { $0 += 1 }
            controller.finish()
        }
        let count = 1_000
        let recorder = Recorder<Void>()
        Job.sequence(Array(repeating: step, count: count)).perform(on: queue, then: recorder.handler)
        // Other work that keeps re-enqueueing itself while the sequence runs,
        // noting how many steps ran since its last turn.
        let gaps = gapsBetweenOtherWork(on: queue, until: count) { stepsRun.value }
        try queue.run()
        #expect(recorder.last?.isSuccess == true)
        #expect(stepsRun.value == count)
        #expect(gaps.value.count > count / SequenceRun.inlineBudget, "the other work ran \(gaps.value.count) times")
        #expect(gaps.value.max() ?? .max <= SequenceRun.inlineBudget)
    }

    @Test func aStepThatDropsItsControllerFailsTheSequenceAsAbandoned() throws {
        // The step's outcome is reported as its body returns (the last
        // controller goes with it), in the middle of the step loop.
        let ran = LockedValue(0)
        let finishes = Job<Void> { controller in
            ran.withValue { $0 += 1 }
            controller.finish()
        }
        let drops = Job<Void> { _ in ran.withValue { $0 += 1 } }
        for queue in [ImmediateQueue() as any JobQueue, CountingQueue()] {
            ran.setValue(0)
            let result = outcome(of: Job.sequence([finishes, finishes, drops, finishes]), on: queue)
            #expect(result?.failure as? JobError == .abandoned)
            #expect(ran.value == 3)
        }
    }

    @Test func synchronousStepsRunWithoutAQueueTurnEach() throws {
        // What makes a sequence cheaper than a hand-written chain of
        // `async`s: steps that complete synchronously run back to back.
        let queue = CountingQueue()
        let count = 10 * SequenceRun.inlineBudget
        let recorder = Recorder<Void>()
        Job.sequence(Array(repeating: .succeeded, count: count)).perform(on: queue, then: recorder.handler)
        #expect(recorder.last?.isSuccess == true)
        // The sequence's body, its handler, and a turn per budget of steps.
        #expect(queue.enqueued == 2 + count / SequenceRun.inlineBudget)
    }

    @Test(.onThreadOfItsOwn) func stepsCompletingInlineOrFromAnotherThreadRunInOrderOnRealThreads() async throws {
        // The one code path on a `DispatchQueue`: some steps complete inside
        // their body, others later from another queue, so the step loop and
        // completions on other threads interleave.
        for round in 0..<200 {
            let log = LockedValue<[Int]>([])
            let running = LockedValue(0)
            let steps = (0..<20).map { index in
                Job<Void> { controller in
                    let overlapping = running.withValue { value -> Bool in
                        value += 1
                        return value > 1
                    }
                    #expect(!overlapping, "two steps ran at once")
                    log.withValue { $0.append(index) }
                    let finish: @Sendable () -> Void = {
                        running.withValue { $0 -= 1 }
                        controller.finish()
                    }
                    if (index + round) % 3 == 0 { DispatchQueue.global().async(execute: finish) } else { finish() }
                }
            }
            let done = DispatchSemaphore(value: 0)
            let recorder = Recorder<Void>()
            Job.sequence(steps).perform(on: DispatchQueue.global()) { outcome in
                recorder.handler(outcome)
                done.signal()
            }
            #expect(await done.signalled(within: 20))
            #expect(recorder.count == 1)
            #expect(recorder.last?.isSuccess == true)
            #expect(log.value == Array(0..<20))
        }
    }

    @Test(.onThreadOfItsOwn) func stepsCompletedFromAnotherThreadAsTheirBodyReturnsRunOnceInOrder() async throws {
        // Whichever of the body's return and the report comes first, the
        // next step starts exactly once.
        for round in 0..<50 {
            let log = LockedValue<[Int]>([])
            let steps = (0..<40).map { index in
                Job<Void> { controller in
                    log.withValue { $0.append(index) }
                    let reporting = DispatchSemaphore(value: 0)
                    DispatchQueue.global().async {
                        reporting.signal()
                        controller.finish()
                    }
                    // allowed: the body runs on a dispatch thread, which waits for its report
                    if (index + round) % 2 == 0 { _ = reporting.wait(timeout: .now() + 10) }
                }
            }
            let done = DispatchSemaphore(value: 0)
            let recorder = Recorder<Void>()
            Job.sequence(steps).perform(on: DispatchQueue.global()) { outcome in
                recorder.handler(outcome)
                done.signal()
            }
            guard await done.signalled(within: 20) else {
                Issue.record("round \(round): the sequence never completed; steps run: \(log.value)")
                return
            }
            #expect(recorder.count == 1 && recorder.last?.isSuccess == true)
            #expect(log.value == Array(0..<40))
        }
    }

    @Test func aCancelledStepsGrandchildIsCancelledAndWhatItAttachesLaterIsCancelledAtOnce() throws {
        let grandchild = ManualJob<Void>()
        let first = ManualJob<Void>()
        let kept = LockedValue<[Job<Void>.Controller]>([])
        let parent = Job<Void> { controller in
            kept.withValue { $0.append(controller) }
            controller.perform(grandchild.job.named("grandchild")) { _ in controller.finish() }
        }
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        let handle = Job.sequence([first.job, parent.named("parent")]).perform(on: queue, then: recorder.handler)
        try queue.run()
        first.finish()
        try queue.run()
        let snapshot = handle.snapshot()
        #expect(snapshot.kind == .sequence(step: 2, count: 2))
        #expect(snapshot.children.map(\.line) == ["parent (running)"])
        #expect(snapshot.children.first?.children.map(\.line) == ["grandchild (running)"])
        let controller = try #require(kept.value.first)
        #expect(!controller.isCancelled)
        handle.cancel()
        #expect(grandchild.cancelCount == 1)
        #expect(controller.isCancelled && controller.isCompleted)
        let ranAtOnce = LockedValue(false)
        controller.onCancel { ranAtOnce.setValue(true) }
        #expect(ranAtOnce.value)
        #expect(!controller.finish())
        try queue.run()
        #expect(recorder.count == 1 && isCancellation(recorder.last?.failure))
    }

    @Test func aStepWaitingForItsQueueShowsAsWaitingToStart() throws {
        let first = ManualJob<Void>()
        let second = ManualJob<Void>()
        let queue = TestQueue()
        let handle = Job.sequence([first.job, second.job.named("second")]).perform(on: queue) { _ in }
        try queue.run()
        first.finish()
        // Its name is attached by its body, which has not run yet.
        #expect(handle.snapshot().children.map(\.line) == ["job (waiting to start)"])
        try queue.run()
        #expect(handle.snapshot().children.map(\.line) == ["second (running)"])
    }
}
