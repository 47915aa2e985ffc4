import Dispatch
import JobKitTesting
import TestSupport
import Testing

@testable import JobKit

// Serialized: several tests here keep the global queue's threads busy on
// purpose (bodies that block until another thread reports, races of 500
// rounds), and run side by side on two cores under Thread Sanitizer they
// starved one another past their time limits.
@Suite("Group", .serialized, .timeLimit(.minutes(1)))
struct GroupTests {
    @Test func emptyGroupFinishesAtOnce() throws {
        #expect(outcome(of: Job.group([]))?.isSuccess == true)
        #expect(try outcome(of: Job<[Int]>.collect([Job<Int>]()))?.get() == [])
    }

    @Test(arguments: [1, 2, 50])
    func startsAllChildrenTogetherAndFinishesWhenAllFinished(count: Int) throws {
        let children = (0..<count).map { _ in ManualJob<Void>() }
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        Job.group(children.map(\.job)).perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(children.allSatisfy { $0.startCount == 1 })
        for child in children.dropLast() { child.finish() }
        try queue.run()
        #expect(recorder.count == 0)
        children.last?.finish()
        try queue.run()
        #expect(recorder.last?.isSuccess == true)
    }

    @Test func failsFastAndCancelsSiblings() throws {
        let children = (0..<3).map { _ in ManualJob<Void>() }
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        Job.group(children.map(\.job)).perform(on: queue, then: recorder.handler)
        try queue.run()
        children[0].finish()
        children[1].fail(with: TestError(id: 1))
        try queue.run()
        #expect(recorder.last?.failure as? TestError == TestError(id: 1))
        #expect(children[0].cancelCount == 0)
        #expect(children[2].cancelCount == 1)
        #expect(recorder.count == 1)
    }

    @Test func failFastNeverStartsChildrenNotStartedYet() throws {
        let children = (0..<4).map { _ in ManualJob<Void>() }
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        Job.group(children.map(\.job), maxConcurrent: 2).perform(on: queue, then: recorder.handler)
        try queue.run()
        children[0].fail(with: TestError(id: 0))
        try queue.run()
        #expect(children[1].cancelCount == 1)
        #expect(children[2].startCount == 0)
        #expect(children[3].startCount == 0)
        #expect(recorder.last?.failure as? TestError == TestError(id: 0))
    }

    @Test func waitForAllFailsWithTheFirstErrorInCompletionOrder() throws {
        let children = (0..<3).map { _ in ManualJob<Void>() }
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        Job.group(children.map(\.job), failurePolicy: .waitForAll).perform(on: queue, then: recorder.handler)
        try queue.run()
        children[2].fail(with: TestError(id: 2))
        children[0].fail(with: TestError(id: 0))
        try queue.run()
        #expect(recorder.count == 0)
        #expect(children[1].cancelCount == 0)
        children[1].finish()
        try queue.run()
        #expect(recorder.last?.failure as? TestError == TestError(id: 2))
    }

    @Test(arguments: [1, 2, 3, 7])
    func neverRunsMoreThanMaxConcurrent(limit: Int) throws {
        let running = LockedValue(0)
        let peak = LockedValue(0)
        let queue = TestQueue()
        let jobs = (0..<20).map { index in
            Job<Void> { controller in
                running.withValue { $0 += 1 }
                peak.withValue { $0 = max($0, running.value) }
                controller.queue.enqueue(after: .milliseconds(index % 3 + 1)) {
                    running.withValue { $0 -= 1 }
                    controller.finish()
                }
            }
        }
        let recorder = Recorder<Void>()
        Job.group(jobs, maxConcurrent: limit).perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(1))
        #expect(recorder.last?.isSuccess == true)
        #expect(peak.value == limit)
    }

    @Test func boundedGroupStartsChildrenInInputOrderAsSlotsFree() throws {
        let children = (0..<4).map { _ in ManualJob<Void>() }
        let queue = TestQueue()
        Job.group(children.map(\.job), maxConcurrent: 2).perform(on: queue) { _ in }
        try queue.run()
        #expect(children.map(\.startCount) == [1, 1, 0, 0])
        children[1].finish()
        try queue.run()
        #expect(children.map(\.startCount) == [1, 1, 1, 0])
    }

    @Test(.onThreadOfItsOwn) func maxConcurrentHoldsOnRealThreads() async throws {
        for _ in 0..<20 {
            let running = LockedValue(0)
            let peak = LockedValue(0)
            let done = DispatchSemaphore(value: 0)
            let jobs = (0..<200).map { _ in
                Job<Void> { controller in
                    let now = running.withValue { value -> Int in
                        value += 1
                        return value
                    }
                    peak.withValue { $0 = max($0, now) }
                    DispatchQueue.global().async {
                        running.withValue { $0 -= 1 }
                        controller.finish()
                    }
                }
            }
            let recorder = Recorder<Void>()
            Job.group(jobs, maxConcurrent: 3).perform(on: DispatchQueue.global()) { outcome in
                recorder.handler(outcome)
                done.signal()
            }
            #expect(await done.signalled(within: 20))
            #expect(recorder.last?.isSuccess == true)
            #expect(peak.value <= 3)
        }
    }

    @Test func invalidMaxConcurrentFailsWithATypedError() throws {
        let result = outcome(of: Job.group([.succeeded], maxConcurrent: 0))
        guard case .invalidArgument = result?.failure as? JobError else {
            Issue.record("expected JobError.invalidArgument, got \(String(describing: result))")
            return
        }
    }

    @Test func cancellingTheGroupCancelsRunningChildrenAndStartsNoMore() throws {
        let children = (0..<3).map { _ in ManualJob<Void>() }
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        let handle = Job.group(children.map(\.job), maxConcurrent: 2).perform(on: queue, then: recorder.handler)
        try queue.run()
        handle.cancel()
        try queue.run()
        #expect(children.map(\.cancelCount) == [1, 1, 0])
        #expect(children[2].startCount == 0)
        #expect(isCancellation(recorder.last?.failure))
    }

    @Test func collectReturnsValuesInInputOrderWhateverTheCompletionOrder() throws {
        let children = (0..<4).map { _ in ManualJob<Int>() }
        let queue = TestQueue()
        let recorder = Recorder<[Int]>()
        Job.collect(children.map(\.job)).perform(on: queue, then: recorder.handler)
        try queue.run()
        for index in [2, 0, 3, 1] { children[index].finish(with: index * 10) }
        try queue.run()
        #expect(try recorder.last?.get() == [0, 10, 20, 30])
    }

    @Test func collectWithBoundedConcurrency() throws {
        let jobs = (0..<100).map { Job.succeeded($0) }
        #expect(try outcome(of: Job.collect(jobs, maxConcurrent: 3))?.get() == Array(0..<100))
    }

    @Test func groupsFitInASequenceArrayLiteral() throws {
        let order = LockedValue<[String]>([])
        func step(_ name: String) -> Job<Void> {
            Job { controller in
                order.withValue { $0.append(name) }
                controller.finish()
            }
        }
        let job = Job.sequence([.group([step("a"), step("b")]), step("post")])
        #expect(outcome(of: job)?.isSuccess == true)
        #expect(order.value == ["a", "b", "post"])
    }

    @Test(.onThreadOfItsOwn) func millionSynchronousChildrenOnAnImmediateQueueFinishWithAFlatStack() throws {
        let top = currentStackAddress()
        let deepest = LockedValue(top)
        let count = LockedValue(0)
        let child = Job<Void> { controller in
            let address = currentStackAddress()
            deepest.withValue { $0 = min($0, address) }
            count.withValue { $0 += 1 }
            controller.finish()
        }
        let children = Array(repeating: child, count: aMillion)
        #expect(outcome(of: Job.group(children))?.isSuccess == true)
        #expect(count.value == aMillion)
        #expect(top - deepest.value < 64 * 1024)
    }

    @Test func boundedGroupOfSynchronousChildrenDoesNotRecurse() throws {
        let top = currentStackAddress()
        let deepest = LockedValue(top)
        let child = Job<Void> { controller in
            let address = currentStackAddress()
            deepest.withValue { $0 = min($0, address) }
            controller.finish()
        }
        let children = Array(repeating: child, count: 100_000)
        #expect(outcome(of: Job.group(children, maxConcurrent: 2))?.isSuccess == true)
        #expect(top - deepest.value < 64 * 1024)
    }

    @Test func boundedGroupOnAQueueWithoutTrampolineDoesNotRecurse() throws {
        // A queue that runs work inline, at once, with no queue of its own:
        // a completion that frees room must not start the next child inside
        // itself.
        let top = currentStackAddress()
        let deepest = LockedValue(top)
        let count = LockedValue(0)
        let recorder = Recorder<Void>()
        let child = Job<Void> { controller in
            deepest.withValue { $0 = min($0, currentStackAddress()) }
            count.withValue { $0 += 1 }
            controller.finish()
        }
        Job.group(Array(repeating: child, count: 50_000), maxConcurrent: 3)
            .perform(on: NestingQueue(), then: recorder.handler)
        #expect(recorder.last?.isSuccess == true)
        #expect(count.value == 50_000)
        #expect(top - deepest.value < 64 * 1024)
    }

    @Test func aLargeGroupStartsItsChildrenInBlocksAndASmallOneOneByOne() throws {
        // Enqueued work: the group's body, its blocks, the handler's hop.
        let large = CountingQueue()
        let count = 100 * GroupRun<Void>.minimumBlocks
        let recorder = Recorder<Void>()
        Job.group(Array(repeating: .succeeded, count: count)).perform(on: large, then: recorder.handler)
        #expect(recorder.last?.isSuccess == true)
        #expect(large.enqueued == 2 + count / GroupRun<Void>.inlineBudget)
        // Up to `minimumBlocks` children, one block each, as many as a
        // concurrent queue could run at once.
        let small = CountingQueue()
        Job.group(Array(repeating: .succeeded, count: 50)).perform(on: small, then: recorder.handler)
        #expect(recorder.last?.isSuccess == true)
        #expect(small.enqueued == 2 + 50)
    }

    @Test func aBoundedGroupOfSynchronousChildrenStartsTheNextWithoutAQueueTurnEach() throws {
        let queue = CountingQueue()
        let count = 10 * GroupRun<Void>.inlineBudget
        let recorder = Recorder<Void>()
        Job.group(Array(repeating: .succeeded, count: count), maxConcurrent: 2).perform(
            on: queue, then: recorder.handler)
        #expect(recorder.last?.isSuccess == true)
        #expect(queue.enqueued <= 2 + 2 + count / GroupRun<Void>.inlineBudget)
    }

    @Test func aBoundedGroupOfSynchronousChildrenLetsOtherWorkRunEverySoManyChildren() throws {
        let queue = TestQueue()
        let started = LockedValue(0)
        let child = Job<Void> { controller in
            started.withValue { $0 += 1 }
            controller.finish()
        }
        let count = 1_000
        let recorder = Recorder<Void>()
        Job.group(Array(repeating: child, count: count), maxConcurrent: 2).perform(on: queue, then: recorder.handler)
        let gaps = gapsBetweenOtherWork(on: queue, until: count) { started.value }
        try queue.run()
        #expect(recorder.last?.isSuccess == true)
        #expect(started.value == count)
        #expect(gaps.value.max() ?? .max <= 2 * GroupRun<Void>.inlineBudget)
    }

    @Test func aChildThatDropsItsControllerFailsABoundedGroupAsAbandoned() throws {
        let ran = LockedValue(0)
        let finishes = Job<Void> { controller in
            ran.withValue { $0 += 1 }
            controller.finish()
        }
        let drops = Job<Void> { _ in ran.withValue { $0 += 1 } }
        let result = outcome(of: Job.group([finishes, drops, finishes, finishes], maxConcurrent: 1))
        #expect(result?.failure as? JobError == .abandoned)
        #expect(ran.value == 2)  // fail fast: the children after it never start
    }

    @Test(.onThreadOfItsOwn) func aLargeGroupRunsEveryChildOnceOnRealThreads() async throws {
        // Blocks of children on a concurrent queue, some completing inside
        // their body, some later from another queue: every child runs once
        // and the values keep their order.
        for round in 0..<10 {
            let runs = LockedValue([Int](repeating: 0, count: 5_000))
            let jobs = (0..<5_000).map { index in
                Job<Int> { controller in
                    runs.withValue { $0[index] += 1 }
                    if (index + round) % 3 == 0 {
                        DispatchQueue.global().async { controller.finish(with: index) }
                    } else {
                        controller.finish(with: index)
                    }
                }
            }
            let done = DispatchSemaphore(value: 0)
            let recorder = Recorder<[Int]>()
            Job.collect(jobs).perform(on: DispatchQueue.global()) { outcome in
                recorder.handler(outcome)
                done.signal()
            }
            #expect(await done.signalled(within: 20))
            #expect(try recorder.last?.get() == Array(0..<5_000))
            #expect(runs.value.allSatisfy { $0 == 1 })
        }
    }

    @Test(.onThreadOfItsOwn) func aBoundedGroupKeepsItsBoundWhenChildrenCompleteFromAnotherThreadInsideTheirBody()
        async throws
    {
        // Children completed from another thread as their body returns: the
        // room each frees goes to exactly one block, whichever of the body's
        // return and the report comes first.
        for round in 0..<20 {
            let limit = 3
            let running = LockedValue(0)
            let peak = LockedValue(0)
            let starts = LockedValue([Int](repeating: 0, count: 300))
            let jobs = (0..<300).map { index in
                Job<Void> { controller in
                    starts.withValue { $0[index] += 1 }
                    let now = running.withValue { value -> Int in
                        value += 1
                        return value
                    }
                    peak.withValue { $0 = max($0, now) }
                    // The body returns just as the other thread reports.
                    let reporting = DispatchSemaphore(value: 0)
                    DispatchQueue.global().async {
                        running.withValue { $0 -= 1 }
                        reporting.signal()
                        controller.finish()
                    }
                    // allowed: the body runs on a dispatch thread, which waits for its report
                    if (index + round) % 2 == 0 { _ = reporting.wait(timeout: .now() + 10) }
                }
            }
            let done = DispatchSemaphore(value: 0)
            let recorder = Recorder<Void>()
            Job.group(jobs, maxConcurrent: limit).perform(on: DispatchQueue.global()) { outcome in
                recorder.handler(outcome)
                done.signal()
            }
            guard await done.signalled(within: 20) else {
                Issue.record(
                    "round \(round): the group never completed; its children started \(starts.value.reduce(0, +)) times"
                )
                return
            }
            #expect(recorder.count == 1 && recorder.last?.isSuccess == true)
            #expect(starts.value.allSatisfy { $0 == 1 })
            #expect(peak.value <= limit)
        }
    }

    @Test func aRunningChildsGrandchildShowsUnderItAndIsCancelledWithTheGroup() throws {
        let grandchild = ManualJob<Void>()
        let parent = Job<Void> { controller in
            controller.perform(grandchild.job.named("grandchild")) { _ in controller.finish() }
        }
        let sibling = ManualJob<Void>()
        let queue = TestQueue()
        let handle = Job.group([parent.named("parent"), sibling.job]).perform(on: queue) { _ in }
        try queue.run()
        let group = handle.snapshot()
        #expect(group.children.map(\.title) == ["parent", "job"])
        #expect(group.children.first?.children.map(\.line) == ["grandchild (running)"])
        sibling.fail(with: TestError(id: 1))
        try queue.run()
        #expect(grandchild.cancelCount == 1)
        #expect(handle.isCompleted)
    }

    @Test func aChildOfAGroupThatFailedIsCancelledAndWhatItAttachesThenIsCancelledAtOnce() throws {
        let kept = ManualJob<Void>()
        let failing = ManualJob<Void>()
        let finished = ManualJob<Void>()
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        Job.group([kept.job, finished.job, failing.job]).perform(on: queue, then: recorder.handler)
        try queue.run()
        finished.finish()
        let finishedController = try #require(finished.controller)
        let controller = try #require(kept.controller)
        #expect(!controller.isCancelled && !controller.isCompleted)
        failing.fail(with: TestError(id: 2))
        #expect(controller.isCancelled && controller.isCompleted)
        // The child that finished before the failure was not cancelled.
        #expect(!finishedController.isCancelled && finishedController.isCompleted)
        let ranAtOnce = LockedValue(false)
        controller.onCancel { ranAtOnce.setValue(true) }
        #expect(ranAtOnce.value)
        finishedController.onCancel { Issue.record("a finished child is not cancelled") }
        #expect(!controller.finish())
        try queue.run()
        #expect(recorder.count == 1)
        #expect(recorder.last?.failure as? TestError == TestError(id: 2))
    }

    @Test(arguments: ["group", "sequence", "zip"])
    func aCompletedRunReleasesItsJobsWhileAChildsControllerIsKept(combinator: String) throws {
        let kept = LockedValue<[Job<Void>.Controller]>([])
        weak var weakTracked: Tracked?
        do {
            let tracked = Tracked()
            weakTracked = tracked
            let keeper = Job<Void> { controller in
                kept.withValue { $0.append(controller) }
                controller.finish()
            }
            let capturing = Job<Void> { controller in
                withExtendedLifetime(tracked) {}
                controller.finish()
            }
            let jobs = [keeper, capturing]
            #expect(outcome(of: combined(jobs, by: combinator))?.isSuccess == true)
        }
        // It completed: the jobs it was given are released, though a child's
        // controller (which refers to the run) lives on.
        #expect(weakTracked == nil)
        #expect(kept.value.first?.isCompleted == true)
    }

    @Test func theValuesOfAFailedGroupAreReleasedOutsideItsLock() throws {
        // A value whose deinit takes a snapshot of the group: released under
        // the group's lock, it would take that lock again.
        let handle = LockedValue<JobHandle?>(nil)
        let snapshotsTaken = LockedValue(0)
        let probe = Job<Probe> { controller in
            controller.finish(
                with: Probe.snapshotting(handle, counting: snapshotsTaken))
        }
        let failing = ManualJob<Probe>()
        handle.setValue(Job.collect([probe, failing.job]).perform(on: ImmediateQueue()) { _ in })
        failing.fail(with: TestError(id: 1))
        #expect(snapshotsTaken.value == 1)
    }

    @Test func theFirstErrorOfACancelledGroupIsReleasedOutsideItsLock() throws {
        // An error whose deinit takes a snapshot of the group: released under
        // the group's lock, it would take that lock again.
        let handle = LockedValue<JobHandle?>(nil)
        let snapshotsTaken = LockedValue(0)
        let failing = Job<Void> { controller in
            controller.fail(
                with: Probe.snapshotting(handle, counting: snapshotsTaken))
        }
        let waiting = ManualJob<Void>()
        handle.setValue(
            Job.group([failing, waiting.job], failurePolicy: .waitForAll).perform(on: ImmediateQueue()) { _ in })
        #expect(snapshotsTaken.value == 0)
        handle.value?.cancel()
        #expect(snapshotsTaken.value == 1)
    }

    /// A group, a sequence or a zip (`combinator`) of `jobs`, one or two.
    private func combined(_ jobs: [Job<Void>], by combinator: String) -> Job<Void> {
        switch combinator {
        case "group": Job.group(jobs)
        case "sequence": Job.sequence(jobs)
        default: jobs.count == 1 ? Job.zip(jobs[0]) : Job.zip(jobs[0], jobs[1]).discardingValue()
        }
    }

    /// A group, a sequence or a zip (`combinator`) of one child that parks,
    /// performed on an `ImmediateQueue`, and the child's controller.
    private func parkedChild(of combinator: String) throws -> (JobHandle, Job<Void>.Controller) {
        let kept = LockedValue<Job<Void>.Controller?>(nil)
        let jobs = [Job<Void> { kept.setValue($0) }]
        let run = combined(jobs, by: combinator)
        let handle = run.perform(on: ImmediateQueue()) { _ in }
        return (handle, try #require(kept.value))
    }

    @Test(arguments: ["group", "sequence", "zip"])
    func aChildsFirstOnCancelRacingWithTheCancelOfItsRunRunsOnce(combinator: String) throws {
        // The child makes its attachment table and hands it to its run while
        // another thread cancels the run: the block is cancelled with the
        // run, or at once, never lost.
        for _ in 0..<500 {
            let (handle, controller) = try parkedChild(of: combinator)
            #expect(runsOfAnOnCancelRacing(withCancelOf: handle, controller) == 1)
        }
    }

    @Test(arguments: ["group", "sequence", "zip"])
    func twoFirstOnCancelsOfAChildRacingWithTheCancelOfItsRunEachRunOnce(combinator: String) throws {
        // Two threads attach while the table is being made and handed to the
        // run, a third cancels the run: the one that finds the table made
        // must not keep its block where the run cannot find it.
        for _ in 0..<500 {
            let (handle, controller) = try parkedChild(of: combinator)
            let runs = LockedValue([0, 0])
            DispatchQueue.concurrentPerform(iterations: 3) { index in
                if index == 2 {
                    handle.cancel()
                } else {
                    controller.onCancel { runs.withValue { $0[index] += 1 } }
                }
            }
            #expect(runs.value == [1, 1])
        }
    }

    @Test(arguments: ["group", "sequence", "zip"])
    func aChildsOnCancelRacingWithItsOwnCompletionIsReleasedAndNeverRuns(combinator: String) throws {
        for _ in 0..<500 {
            let kept = LockedValue<Job<Void>.Controller?>(nil)
            let other = ManualJob<Void>()
            let jobs = [Job<Void> { kept.setValue($0) }, other.job]
            let run = combined(jobs, by: combinator)
            let handle = run.perform(on: ImmediateQueue()) { _ in }
            let controller = try #require(kept.value)
            let runs = LockedValue(0)
            weak var weakTracked: Tracked?
            do {
                let tracked = Tracked()
                weakTracked = tracked
                race {
                    controller.finish()
                } _: {
                    controller.onCancel {
                        withExtendedLifetime(tracked) {}
                        runs.withValue { $0 += 1 }
                    }
                }
            }
            // Kept until the child completed or dropped at once: released
            // either way, though the child's controller is still here.
            #expect(weakTracked == nil)
            handle.cancel()
            #expect(runs.value == 0)
            #expect(other.cancelCount == 1)
        }
    }

    @Test(arguments: ["group", "sequence", "zip"])
    func whatAChildAttachedIsReleasedWhenItCompletesThoughItsControllerIsKept(combinator: String) throws {
        let kept = LockedValue<Job<Void>.Controller?>(nil)
        let other = ManualJob<Void>()
        // Handed to the child's body, so that only its `onCancel` block
        // keeps it (the group keeps its jobs until it is over).
        let handedOver = LockedValue<Tracked?>(Tracked())
        weak let weakTracked = handedOver.value
        let child = Job<Void> { controller in
            kept.setValue(controller)
            let tracked = handedOver.withValue { $0.take() }
            controller.onCancel { withExtendedLifetime(tracked) {} }
            controller.perform(ManualJob<Void>().job.named("grandchild")) { _ in }
        }
        let jobs = [child.named("child"), other.job]
        let run = combined(jobs, by: combinator)
        let handle = run.perform(on: ImmediateQueue()) { _ in }
        let running = handle.snapshot()
        #expect(running.children.map(\.title) == (combinator == "sequence" ? ["child"] : ["child", "job"]))
        #expect(running.children.first?.children.map(\.line) == ["grandchild (running)"])
        #expect(weakTracked != nil)
        try #require(kept.value).finish()
        #expect(weakTracked == nil)
        #expect(kept.value?.isCompleted == true)
        #expect(handle.snapshot().children.map(\.title) == ["job"])
        handle.cancel()
        #expect(other.cancelCount == 1)
    }

    @Test(.onThreadOfItsOwn) func completesOnceWhenChildrenFinishOnManyThreads() async throws {
        for _ in 0..<50 {
            let done = DispatchSemaphore(value: 0)
            let recorder = Recorder<[Int]>()
            let jobs = (0..<64).map { Job.succeeded($0) }
            Job.collect(jobs).perform(on: DispatchQueue.global()) { outcome in
                recorder.handler(outcome)
                done.signal()
            }
            #expect(await done.signalled(within: 10))
            #expect(try recorder.last?.get() == Array(0..<64))
            #expect(recorder.count == 1)
        }
    }
}
