import Dispatch
import JobKit
import JobKitTesting
import TestSupport
import Testing

/// A status that counts up by one per fetch: a poll's subject.
private final class Counter: Sendable {
    let fetches = LockedValue(0)

    /// The times at which ``fetch(timedOn:)`` fetched, on its queue's clock.
    let times = LockedValue<[Duration]>([])

    /// A job that counts one more fetch and finishes with the count.
    var fetch: Job<Int> {
        Job { controller in
            controller.finish(
                with: self.fetches.withValue { count -> Int in
                    count += 1
                    return count
                })
        }
    }

    /// ``fetch``, noting in ``times`` when it runs on `queue`.
    func fetch(timedOn queue: TestQueue) -> Job<Int> {
        Job { controller in
            self.times.withValue { $0.append(queue.now) }
            self.fetch.perform(on: controller.queue) { controller.complete(with: $0) }
        }
    }
}

/// A job of `pages` pages from page 1, of `size` elements each (page `p`
/// holds `p * 100 + 1` and on), whose cursor is the page number, and which
/// records the cursors it was asked for.
private func numberedPages(
    _ pages: Int, size: Int = 3, asked: LockedValue<[Int]> = LockedValue([])
) -> Job<[Int]> {
    Job.collectPages(from: 1) { page in
        Job<JobPage<Int, Int>> { controller in
            asked.withValue { $0.append(page) }
            let elements = (1...size).map { page * 100 + $0 }
            controller.finish(with: page < pages ? .more(elements, next: page + 1) : .last(elements))
        }
    }
}

@Suite("Loops: repeated and collectPages", .timeLimit(.minutes(1)))
struct LoopCombinatorTests {
    /// Past where a loop written as recursion ran out of a 512 KiB stack
    /// (between 10,000 and 20,000 steps), as ``LoopTests``' costlier
    /// loops run: a loop's steps were never nested, so this need not be
    /// ten times as far; the suite runs beside the others.
    static let steps = LoopTests.costlySteps

    // MARK: repeated

    @Test func repeatsWhileTheConditionHoldsAndFinishesWithTheFirstValueItDoesNotHoldFor() throws {
        let counter = Counter()
        let seen = LockedValue<[Int]>([])
        let poll = counter.fetch.repeated(while: { count in
            seen.withValue { $0.append(count) }
            return !count.isMultiple(of: 5)
        })
        #expect(try outcome(of: poll)?.get() == 5)
        #expect(seen.value == [1, 2, 3, 4, 5])
        // Lazy and re-performable: each performance polls from its own start.
        #expect(try outcome(of: poll)?.get() == 10)
        #expect(counter.fetches.value == 10)
    }

    @Test func aFixedDelayWaitsBetweenStepsInVirtualTime() throws {
        let counter = Counter()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        let poll = counter.fetch(timedOn: queue).repeated(while: { $0 < 4 }, delay: .fixed(.seconds(2)))
        poll.perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(5))
        #expect(counter.times.value == [.zero, .seconds(2), .seconds(4)])
        #expect(recorder.count == 0)
        try queue.advance(by: .seconds(1))
        #expect(counter.times.value == [.zero, .seconds(2), .seconds(4), .seconds(6)])
        #expect(try recorder.last?.get() == 4)
        #expect(queue.isIdle)
    }

    @Test func anExponentialDelayGrowsFromStepToStep() throws {
        let counter = Counter()
        let queue = TestQueue()
        let delay = RetryDelay.exponential(initial: .seconds(1), maximum: .seconds(3))
        counter.fetch(timedOn: queue).repeated(while: { $0 < 5 }, delay: delay).perform(on: queue) { _ in }
        try queue.advance(by: .seconds(60))
        #expect(counter.times.value == [.zero, .seconds(1), .seconds(3), .seconds(6), .seconds(9)])
    }

    @Test func withoutDelayStepsThatFinishAtOnceRunInTheLoopsTurn257AtMost() throws {
        let counter = Counter()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        counter.fetch.repeated(while: { $0 < 600 }).perform(on: queue, then: recorder.handler)
        // The loop's turn: its first step, and 256 more after it.
        #expect(queue.runNext())
        #expect(counter.fetches.value == 257)
        // The next waits for a turn of its own, behind other work.
        let other = LockedValue<Int?>(nil)
        queue.enqueue { other.setValue(counter.fetches.value) }
        #expect(queue.pendingCount == 2)
        #expect(queue.runNext())
        #expect(counter.fetches.value == 514)
        #expect(queue.runNext())
        #expect(other.value == 514)
        try queue.run()
        #expect(counter.fetches.value == 600)
        #expect(try recorder.last?.get() == 600)
    }

    @Test func aStepsFailureFailsTheLoopAndNoStepFollows() throws {
        let counter = Counter()
        let failing = counter.fetch.map { count in
            guard count != 3 else { throw TestError(id: count) }
            return count
        }
        #expect(outcome(of: failing.repeated(while: { _ in true }))?.failure as? TestError == TestError(id: 3))
        #expect(counter.fetches.value == 3)
    }

    @Test func aCancelDuringAStepCancelsThatStepAndNoneFollows() throws {
        let manual = ManualJob<Int>()
        let (queue, recorder, handle) = try started(manual.job.repeated(while: { _ in true }))
        #expect(manual.finish(with: 1))
        try queue.run()
        #expect(manual.startCount == 2)
        handle.cancel()
        #expect(manual.cancelCount == 1)
        #expect(!manual.finish(with: 2))
        try queue.run()
        #expect(manual.startCount == 2)
        #expect(recorder.count == 1)
        #expect(isCancellation(recorder.last?.failure))
    }

    @Test func aGroupFailingWhileItsLoopWaitsCancelsTheWaitAndLeavesTheQueueIdle() throws {
        let counter = Counter()
        let loop = counter.fetch.repeated(while: { _ in true }, delay: .fixed(.seconds(30))).discardingValue()
        let failing = Job.sleep(for: .seconds(10)).then { Job<Void>.failed(TestError(id: 1)) }  // allowed: TestQueue
        let (queue, recorder, _) = try started(Job.group([loop, failing]))
        try queue.advance(by: .seconds(10))
        #expect(recorder.last?.failure as? TestError == TestError(id: 1))
        #expect(queue.isIdle)
        #expect(counter.fetches.value == 1)
    }

    @Test func aStepThatDropsItsControllerFailsTheLoopAsAbandoned() throws {
        let counter = Counter()
        let step = Job<Int> { controller in
            // The second step drops its controller without a word.
            counter.fetch.perform(on: controller.queue) { outcome in
                if counter.fetches.value == 1 { controller.complete(with: outcome) }
            }
        }
        let (queue, recorder, _) = try started(step.repeated(while: { _ in true }))
        try queue.run()
        #expect(counter.fetches.value == 2)
        #expect(recorder.last?.failure as? JobError == .abandoned)
        #expect(queue.isIdle)
    }

    @Test func aCancelDuringTheWaitRemovesItsTimerAndStartsNoStep() throws {
        let counter = Counter()
        let (queue, recorder, handle) = try started(
            counter.fetch.repeated(while: { _ in true }, delay: .fixed(.seconds(30))))
        #expect(counter.fetches.value == 1)
        #expect(!queue.isIdle)
        handle.cancel()
        try queue.run()
        #expect(queue.isIdle)
        try queue.advance(by: .seconds(60))
        #expect(counter.fetches.value == 1)
        #expect(recorder.count == 1)
        #expect(isCancellation(recorder.last?.failure))
    }

    @Test func aCancelRacingTheStepsOnRealThreadsEndsTheLoopOnceAndStartsNoMoreThanTheStepRacingIt() async {
        // The rounds run on a thread of their own, which waits for the
        // queue: three waits a round on Swift's cooperative threads, which
        // the suite's other tests keep busy, took this test to 60 s under
        // Thread Sanitizer in CI.
        let failures = await offThePool { () -> [String] in
            var failures: [String] = []
            for round in 0..<300 {
                let queue = DispatchQueue(label: "LoopCombinatorTests.race")
                let starts = LockedValue(0)
                // Steps finish at once, a thousand of them; the next one
                // waits for the cancel: on a busy machine, the loop does not
                // keep a core busy until this thread gets to cancel it.
                let step = Job<Int> { controller in
                    if starts.withValue({ count -> Int in
                        count += 1
                        return count
                    }) <= 1_000 {
                        controller.finish(with: 0)
                    } else {
                        controller.onCancel { withExtendedLifetime(controller) {} }
                    }
                }
                let outcomes = Recorder<Int>()
                let firstStarted = DispatchSemaphore(value: 0)
                let handle = step.repeated(while: { _ in
                    firstStarted.signal()
                    return true
                }).perform(on: queue, then: outcomes.handler)
                // The first step ended; steps go on, on the queue's thread,
                // as this one cancels them.
                // allowed: a thread of its own, which the queue does not need
                guard firstStarted.wait(timeout: .now() + 30) == .success else {
                    failures.append("round \(round): no step ended within 30 s")
                    break
                }
                for _ in 0..<(round % 7) { _ = starts.value }
                handle.cancel()
                let startsAtCancel = starts.value
                // Everything the loop enqueued before its outcome has run.
                // allowed: as above
                queue.sync {}
                // allowed: as above
                queue.sync {}
                if outcomes.count != 1 || !isCancellation(outcomes.last?.failure) {
                    failures.append("round \(round): \(outcomes.outcomes)")
                }
                if starts.value > startsAtCancel + 1 {
                    failures.append("round \(round): \(starts.value - startsAtCancel) steps started after the cancel")
                }
            }
            return failures
        }
        #expect(failures == [])
    }

    @Test func snapshotsShowTheStepItIsOnAndTheWaitBeforeTheNext() throws {
        let counter = Counter()
        let fetch = Job.sleep(for: .seconds(1))  // allowed: TestQueue's clock
            .then { counter.fetch }.named("fetch status")
        let poll = fetch.repeated(while: { _ in true }, delay: .fixed(.seconds(2))).named("poll")
        let (queue, _, handle) = try started(poll)
        try queue.advance(by: .seconds(3 * 500))
        #expect(counter.fetches.value == 500)
        #expect(
            handle.stallReport()?.split(separator: "\n") == [
                "1 job has not completed:",
                "  poll: loop, step 501 ▸ fetch status ▸ sleep 1 s (running)",
                "poll: loop, step 501 (running)",
                "└─ fetch status (running)",
                "   └─ sleep 1 s (running)  ◀",
            ])
        try queue.advance(by: .seconds(1))
        #expect(
            handle.snapshot().description == "poll: loop, step 502 (waiting 2 s before step 502)")
        #expect(handle.snapshot().kind == .loop(step: 502))
        handle.cancel()
        #expect(handle.snapshot().description == "poll (cancelled)")
    }

    @Test func aLoopHoldsOneStepAtATime() throws {
        let live = LockedValue(0)
        let step = Job<Int> { controller in
            let canary = Canary(live)
            controller.onDescribe { withExtendedLifetime(canary) { "described" } }
            controller.queue.enqueue(after: .seconds(1)) { controller.finish(with: live.value) }
        }
        let steps = LockedValue(0)
        let (queue, recorder, _) = try started(
            step.repeated(while: { _ in
                steps.withValue {
                    $0 += 1; return $0 < 1_000
                }
            }))
        try queue.advance(by: .seconds(500))
        #expect(live.value == 1)
        try queue.advance(by: .seconds(500))
        #expect(try recorder.last?.get() == 1)
        #expect(live.value == 0)
    }

    @Test func aLoopOfStepsFinishingAtOnceKeepsAFlatStackOnAnImmediateQueue() async throws {
        let result = await onThread(ofStackSize: 512 * 1024) { () -> (Job<Int>.Outcome?, UInt) in
            let top = currentStackAddress()
            let deepest = LockedValue(top)
            let counter = Counter()
            let step = Job<Int> { controller in
                let address = currentStackAddress()
                deepest.withValue { $0 = min($0, address) }
                counter.fetch.perform(on: controller.queue) { controller.complete(with: $0) }
            }
            return (outcome(of: step.repeated(while: { $0 < Self.steps })), top - deepest.value)
        }
        #expect(try result.0?.get() == Self.steps)
        #expect(result.1 < 64 * 1024)
    }

    @Test func aLoopOnDispatchQueuesFinishesWhetherStepsFinishAtOnceOrOnAnotherQueue() async throws {
        let counter = Counter()
        let count = Self.steps / 4
        #expect(try await counter.fetch.repeated(while: { $0 < count }).value(on: DispatchQueue.global()) == count)
        let other = DispatchQueue(label: "LoopCombinatorTests.other")
        let hopping = Job<Int> { controller in
            other.async { counter.fetch.perform(on: controller.queue) { controller.complete(with: $0) } }
        }
        let target = count + count / 2
        #expect(try await hopping.repeated(while: { $0 < target }).value(on: DispatchQueue.global()) == target)
    }

    // MARK: collectPages

    @Test func collectsEveryPagesElementsInOrderUntilTheLast() throws {
        let asked = LockedValue<[Int]>([])
        let all = numberedPages(3, size: 2, asked: asked)
        #expect(try outcome(of: all)?.get() == [101, 102, 201, 202, 301, 302])
        #expect(asked.value == [1, 2, 3])
        // Each performance collects its own pages.
        #expect(try outcome(of: all)?.get().count == 6)
        #expect(asked.value == [1, 2, 3, 1, 2, 3])
    }

    @Test func aFirstPageWithNoCursorAndALastPageWithNoElements() throws {
        let tokens = ["b", "c"]
        let asked = LockedValue<[String?]>([])
        let all: Job<[String]> = .collectPages(from: nil as String?) { cursor in
            asked.withValue { $0.append(cursor) }
            return Job { controller in
                switch cursor {
                case nil: controller.finish(with: .more(["a1", "a2"], next: tokens[0]))
                case "b": controller.finish(with: .more(["b1"], next: tokens[1]))
                default: controller.finish(with: .last([]))
                }
            }
        }
        #expect(try outcome(of: all)?.get() == ["a1", "a2", "b1"])
        #expect(asked.value == [nil, "b", "c"])
    }

    @Test func aPagesFailureFailsTheWholeAndNoPageFollows() throws {
        let asked = LockedValue<[Int]>([])
        let all: Job<[Int]> = .collectPages(from: 1) { page in
            asked.withValue { $0.append(page) }
            return page == 2 ? .failed(TestError(id: page)) : .succeeded(.more([page], next: page + 1))
        }
        #expect(outcome(of: all)?.failure as? TestError == TestError(id: 2))
        #expect(asked.value == [1, 2])
    }

    @Test func aCancelCancelsThePageBeingFetched() throws {
        let manual = ManualJob<JobPage<Int, Int>>()
        let (queue, recorder, handle) = try started(Job.collectPages(from: 1) { _ in manual.job })
        #expect(manual.finish(with: .more([1], next: 2)))
        try queue.run()
        #expect(handle.snapshot().kind == .loop(step: 2))
        handle.cancel()
        #expect(manual.cancelCount == 1)
        try queue.run()
        #expect(manual.startCount == 2)
        #expect(isCancellation(recorder.last?.failure))
    }

    @Test func manyPagesKeepAFlatStackOnAnImmediateQueue() async throws {
        let result = await onThread(ofStackSize: 512 * 1024) {
            outcome(of: numberedPages(Self.steps / 2, size: 1))
        }
        let all = try #require(try result?.get())
        #expect(all.count == Self.steps / 2)
        #expect(all.first == 101)
        #expect(all.last == Self.steps / 2 * 100 + 1)
    }
}
