import Dispatch
import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing

/// A poll written as recursion, the way apps loop with jobs: `step(i)`,
/// then the poll again from its value, until the value reaches `last`.
private func poll(from first: Int, to last: Int, step: @escaping @Sendable (Int) -> Job<Int>) -> Job<Int> {
    step(first).then { value in
        value >= last ? .succeeded(value) : poll(from: value + 1, to: last, step: step)
    }
}

/// A retry written as recursion: `attempt(i)`, and on failure the retry
/// again from `i + 1`.
private func retrying(from first: Int, attempt: @escaping @Sendable (Int) -> Job<Int>) -> Job<Int> {
    attempt(first).recover { _ in retrying(from: first + 1, attempt: attempt) }
}

/// A poll whose every step says which it is, in a detail that holds a
/// ``Canary`` counted in `live`.
private func describedPoll(from first: Int, to last: Int, live: LockedValue<Int>) -> Job<Int> {
    let canary = Canary(live)
    return Job.sleep(for: .seconds(1)).map { first }.named("fetch \(first)")  // allowed: on a TestQueue only
        .then { value in value >= last ? .succeeded(value) : describedPoll(from: value + 1, to: last, live: live) }
        .named("poll", detail: { withExtendedLifetime(canary) { "step \(first)" } })
}

/// The poll above, with a name and a detail for its first step and every
/// third after it only: the steps between say nothing about themselves.
private func sometimesDescribedPoll(from first: Int, to last: Int, live: LockedValue<Int>) -> Job<Int> {
    let step = Job.sleep(for: .seconds(1)).map { first }.named("fetch \(first)")  // allowed: on a TestQueue only
        .then { value in
            value >= last ? .succeeded(value) : sometimesDescribedPoll(from: value + 1, to: last, live: live)
        }
    guard first % 3 == 1 else { return step }
    let canary = Canary(live)
    return step.named("poll", detail: { withExtendedLifetime(canary) { "step \(first)" } })
}

@Suite("Loops written as recursion", .timeLimit(.minutes(1)))
struct LoopTests {
    /// Ten times as deep as crashed a thread of 512 KiB, as a dispatch
    /// worker's is, before loops ran their steps in place: the outcome went
    /// back up through every step, and that crashed between 10,000 and
    /// 20,000 steps. Fewer under Thread Sanitizer, where each step takes
    /// 30 times longer: the flat stack holds for any number.
    static let steps = isThreadSanitized ? 20_000 : 200_000
    /// Past where the stack ran out, for the loops whose steps cost more
    /// (a queue hop each, a timer each): a quarter as many.
    static let costlySteps = steps / 4

    @Test func aPollOfStepsFinishingAtOnceKeepsAFlatStackOnAnImmediateQueue() async throws {
        let result = await onThread(ofStackSize: 512 * 1024) { () -> (Job<Int>.Outcome?, UInt) in
            let top = currentStackAddress()
            let deepest = LockedValue(top)
            let loop = poll(from: 1, to: Self.steps) { index in
                Job { controller in
                    let address = currentStackAddress()
                    deepest.withValue { $0 = min($0, address) }
                    controller.finish(with: index)
                }
            }
            return (outcome(of: loop), top - deepest.value)
        }
        #expect(try result.0?.get() == Self.steps)
        #expect(result.1 < 64 * 1024)
    }

    @Test func aRetryOfAttemptsFailingAtOnceKeepsAFlatStackOnAnImmediateQueue() async throws {
        let result = await onThread(ofStackSize: 512 * 1024) { () -> Job<Int>.Outcome? in
            let loop = retrying(from: 1) { attempt in
                attempt < Self.costlySteps ? .failed(TestError(id: attempt)) : .succeeded(attempt)
            }
            return outcome(of: loop)
        }
        #expect(try result?.get() == Self.costlySteps)
    }

    @Test func aPollOnDispatchQueuesFinishesWhetherStepsFinishAtOnceOrOnAnotherQueue() async throws {
        let atOnce = poll(from: 1, to: Self.costlySteps) { .succeeded($0) }
        #expect(try await atOnce.value(on: DispatchQueue.global()) == Self.costlySteps)
        let other = DispatchQueue(label: "LoopTests.other")
        let hopping = poll(from: 1, to: Self.costlySteps / 2) { index in
            Job { controller in other.async { controller.finish(with: index) } }
        }
        #expect(try await hopping.value(on: DispatchQueue.global()) == Self.costlySteps / 2)
    }

    @Test func aPollOfTimedStepsRunsInVirtualTimeOnATestQueue() throws {
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        let count = Self.costlySteps / 2
        poll(from: 1, to: count) { index in Job.sleep(for: .seconds(1)).map { index } }  // allowed: TestQueue's clock
            .perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(count - 1))
        #expect(recorder.count == 0)
        try queue.advance(by: .seconds(1))
        #expect(try recorder.last?.get() == count)
        #expect(queue.isIdle)
    }

    @Test func aLoopHoldsWhatOneStepSaysAboutItselfNotEveryStepsSoFar() throws {
        let queue = TestQueue()
        let live = LockedValue(0)
        let handle = describedPoll(from: 1, to: 1_000, live: live).perform(on: queue) { _ in }
        try queue.advance(by: .seconds(500))
        // The first step's detail, kept with what the loop had until its
        // first step went on, and the detail of the step running now.
        #expect(live.value == 2)
        #expect(
            handle.snapshot().description.split(separator: "\n") == [
                "poll (running, step 1)",
                "└─ poll (running, step 501)",
                "   └─ fetch 501 (running)",
                "      └─ sleep 1 s (running)",
            ])
        try queue.advance(by: .seconds(500))
        #expect(handle.isCompleted)
        #expect(live.value == 0)
    }

    /// A step that says nothing about itself starts without the loop's
    /// lock; what a later step says still goes with that step, and shows.
    @Test func aStepThatSaysNothingLeavesWhatTheNextSaysToGoWithIt() throws {
        let queue = TestQueue()
        let live = LockedValue(0)
        let handle = sometimesDescribedPoll(from: 1, to: 9, live: live).perform(on: queue) { _ in }
        func lines() -> [Substring] { handle.snapshot().description.split(separator: "\n") }
        // Step 2, the first that says nothing: the first step's detail only.
        try queue.advance(by: .seconds(1.5))
        #expect(live.value == 1)
        #expect(lines() == ["poll (running, step 1)", "└─ fetch 2 (running)", "   └─ sleep 1 s (running)"])
        // Step 4 names itself, after two steps that said nothing.
        try queue.advance(by: .seconds(2))
        #expect(live.value == 2)
        #expect(
            lines() == [
                "poll (running, step 1)", "└─ poll (running, step 4)", "   └─ fetch 4 (running)",
                "      └─ sleep 1 s (running)",
            ])
        // Step 5 says nothing: step 4's name and detail went with step 4.
        try queue.advance(by: .seconds(1))
        #expect(live.value == 1)
        #expect(lines() == ["poll (running, step 1)", "└─ fetch 5 (running)", "   └─ sleep 1 s (running)"])
        try queue.advance(by: .seconds(2))
        #expect(live.value == 2)
        try queue.advance(by: .seconds(1))
        #expect(live.value == 1)
        try queue.advance(by: .seconds(2))
        #expect(handle.isCompleted)
        #expect(live.value == 0)
    }

    @Test func aSequencesNextLoopKeepsTheNameItHadBeforeItsFirstStep() throws {
        let queue = TestQueue()
        // Each loop is the sequence's step itself, not a child of it.
        @Sendable func loop(from first: Int) -> Job<Void> {
            Job.sleep(for: .seconds(1)).named("fetch \(first)")  // allowed: the TestQueue's clock
                .then { first == 3 ? .succeeded : loop(from: first + 1) }
                .named("poll")
        }
        let loops = [1, 2].map { loop(from: 1).named("loop \($0)") }
        let handle = Job.sequence(loops).perform(on: queue) { _ in }
        try queue.advance(by: .seconds(4))
        let lines = handle.snapshot().description.split(separator: "\n")
        #expect(
            lines.dropFirst() == [
                "└─ loop 2 (running)", "   └─ poll (running)", "      └─ fetch 2: sleep 1 s (running)",
            ])
        try queue.advance(by: .seconds(2))
        #expect(handle.isCompleted)
    }

    /// As it did when it ran as a child: "publish ▸ upload", not
    /// "publish" alone.
    @Test func aThenShowsTheJobItRunsInItsPlaceAsItsChild() throws {
        let queue = TestQueue()
        let upload = Job.succeeded(1).then { _ in Job<Int>.never.named("upload") }.named("publish")
            .perform(on: queue) { _ in }
        let group = Job.succeeded(1).then { _ in Job.group([.never, .never]) }.named("publish")
            .perform(on: queue) { _ in }
        let anonymous = Job.succeeded(1).then { _ in Job<Int>.never }.named("publish")
            .perform(on: queue) { _ in }
        try queue.run()
        #expect(upload.snapshot().description == "publish (running)\n└─ upload (running)")
        #expect(upload.stallReport()?.hasPrefix("1 job has not completed:\n  publish ▸ upload (running)") == true)
        #expect(group.snapshot().description.hasPrefix("publish (running)\n└─ group 0/2 (running)\n"))
        #expect(anonymous.snapshot().description == "publish (running)")
        for handle in [upload, group, anonymous] { handle.cancel() }
        #expect(upload.snapshot().description == "publish (cancelled)")
    }

    /// The job a transform performs leaves it as its own outcome comes,
    /// however it comes: reported at once or later, or by dropping its
    /// controllers. What goes on in its place shows alone.
    @Test func aRecoveredJobLeavesTheSnapshotHoweverItFailed() throws {
        let queue = TestQueue()
        let failing: [Job<Int>] = [
            .failed(TestError()),
            Job { _ in },
            Job.sleep(for: .seconds(1)).then { Job<Int>.failed(TestError()) },  // allowed: the TestQueue's clock
        ]
        let handles = failing.map { first in
            first.named("first").recover { _ in Job<Int>.never.named("second") }.named("retry")
                .perform(on: queue) { _ in }
        }
        try queue.advance(by: .seconds(1))
        for handle in handles {
            #expect(handle.snapshot().description == "retry (running)\n└─ second (running)")
            handle.cancel()
        }
    }

    @Test func aPollOfStepsFinishingAtOnceRuns257StepsInATurnThenLetsOtherWorkRun() throws {
        let queue = TestQueue()
        let started = LockedValue<[Int]>([])
        let recorder = Recorder<Int>()
        poll(from: 1, to: 600) { index in
            Job { controller in
                started.withValue { $0.append(index) }
                controller.finish(with: index)
            }
        }
        .perform(on: queue, then: recorder.handler)
        #expect(queue.runNext())
        #expect(started.value == Array(1...257))
        let other = LockedValue<Int?>(nil)
        queue.enqueue { other.setValue(started.value.count) }
        #expect(queue.runNext())
        #expect(started.value.count == 514)
        #expect(queue.runNext())
        #expect(other.value == 514)
        #expect(queue.runNext())
        #expect(started.value == Array(1...600))
        // The last step finished the loop in its turn, and so came the handler.
        #expect(try recorder.last?.get() == 600)
        #expect(queue.isIdle)
    }

    /// A loop of steps that are each `manual`'s job, until one finishes
    /// with 2: written as recursion, or with `repeated(while:)`.
    enum TwoStepLoop: String, CaseIterable, Sendable {
        case thenRecursion, repeated

        func loop(of manual: ManualJob<Int>) -> Job<Int> {
            switch self {
            case .thenRecursion: poll(from: 1, to: 2) { _ in manual.job }
            case .repeated: manual.job.repeated(while: { $0 < 2 })
            }
        }
    }

    @Test(arguments: TwoStepLoop.allCases)
    func aStepFinishedOutsideTheLoopsTurnStartsTheNextInATurnOfItsOwn(kind: TwoStepLoop) throws {
        let queue = TestQueue()
        let manual = ManualJob<Int>()
        let recorder = Recorder<Int>()
        kind.loop(of: manual).perform(on: queue, then: recorder.handler)
        #expect(queue.runNext())
        #expect(manual.startCount == 1)
        #expect(queue.isIdle)
        // Finished from outside the queue: the next step is the queue's.
        #expect(manual.finish(with: 1))
        #expect(manual.startCount == 1)
        #expect(queue.pendingCount == 1)
        #expect(queue.runNext())
        #expect(manual.startCount == 2)
        #expect(manual.finish(with: 2))
        #expect(recorder.count == 0)
        try queue.run()
        #expect(try recorder.last?.get() == 2)
    }

    @Test func transformsOfAJobThatFinishesAtOnceRunWithTheirHandlerInOneTurn() throws {
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        Job.succeeded(1).map { $0 + 1 }.then { .succeeded($0 * 10) }.recover { _ in 0 }.mapError { $0 }
            .perform(on: queue, then: recorder.handler)
        #expect(queue.runNext())
        #expect(try recorder.last?.get() == 20)
        #expect(queue.isIdle)
    }

    @Test func aCancelReachesTheStepRunningNowAndStartsNoMore() throws {
        let queue = TestQueue()
        let cancelled = LockedValue<[Int]>([])
        let started = LockedValue<[Int]>([])
        let recorder = Recorder<Int>()
        let handle = poll(from: 1, to: 1_000) { index in
            finishing(index, after: .seconds(1), started: started, cancelled: cancelled)
        }
        .perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(300))
        #expect(started.value.count == 301)
        handle.cancel()
        #expect(cancelled.value == [301])
        try queue.advance(by: .seconds(10))
        #expect(started.value.count == 301)
        #expect(recorder.count == 1)
        #expect(isCancellation(recorder.last?.failure))
    }

    @Test func aStepThatDropsItsControllerFailsTheLoopAsAbandoned() throws {
        let loop = poll(from: 1, to: 10) { index in
            index == 5 ? Job { _ in } : .succeeded(index)
        }
        #expect(outcome(of: loop)?.failure as? JobError == .abandoned)
    }

    /// The job built in the loop's place holds the loop's controllers: when
    /// it drops them, the loop is abandoned, on every kind of queue and as
    /// a group's child, a sequence's step or a zip's job.
    @Test func aNextJobThatDropsItsControllerFailsTheLoopAsAbandoned() async throws {
        let dropping = Job.succeeded(1).then { _ in Job<Int> { _ in } }
        let retryDropping = Job<Int>.failed(TestError()).recover { _ in Job<Int> { _ in } }
        for job in [dropping, retryDropping] {
            #expect(outcome(of: job)?.failure as? JobError == .abandoned)
            let queue = TestQueue()
            let recorder = Recorder<Int>()
            job.perform(on: queue, then: recorder.handler)
            try queue.run()
            #expect(recorder.last?.failure as? JobError == .abandoned)
            await #expect(throws: JobError.abandoned) { try await job.value(on: DispatchQueue.global()) }
            #expect(outcome(of: Job.collect([job, .succeeded(2)]))?.failure as? JobError == .abandoned)
            #expect(outcome(of: Job.sequence([job.discardingValue()]))?.failure as? JobError == .abandoned)
            #expect(outcome(of: Job.zip(job, Job.succeeded(2)))?.failure as? JobError == .abandoned)
        }
    }

    @Test func aCancelledRetryDoesNotAskItsHandlerForTheNextAttempt() throws {
        let first = ManualJob<Int>()
        let asked = LockedValue(0)
        let retry = first.job.recover { _ in
            asked.withValue { $0 += 1 }
            return Job.succeeded(0)
        }
        let (queue, recorder, handle) = try started(retry.named("attempt 1"))
        handle.cancel()
        try queue.run()
        #expect(first.cancelCount == 1)
        #expect(asked.value == 0)
        #expect(isCancellation(recorder.last?.failure))
        #expect(handle.snapshot().line == "attempt 1 (cancelled)")
    }

    @Test func aLoopCancelledBeforeItsNextStepStartsNeverStartsIt() throws {
        let first = ManualJob<Int>()
        let starts = LockedValue(0)
        let (queue, recorder, handle) = try started(
            first.job.then { value in
                Job<Int> { controller in
                    starts.withValue { $0 += 1 }
                    controller.finish(with: value)
                }
            })
        // The first job finishes off the queue: the next step waits for
        // its turn on the queue, and the cancel comes first.
        first.finish(with: 1)
        handle.cancel()
        try queue.run()
        #expect(starts.value == 0)
        #expect(recorder.count == 1)
        #expect(isCancellation(recorder.last?.failure))
    }

    @Test func loopsRunAsAGroupsChildrenAndASequencesSteps() throws {
        let count = Self.costlySteps / 5
        let loops = (0..<3).map { offset in
            poll(from: offset, to: count + offset) { .succeeded($0) }.named("poll \(offset)")
        }
        #expect(try outcome(of: Job.collect(loops))?.get() == [count, count + 1, count + 2])
        let steps = loops.map { $0.discardingValue() }
        #expect(outcome(of: Job.sequence(steps))?.isSuccess == true)
        let zipped = try #require(outcome(of: Job.zip(loops[0], loops[1]))).get()
        #expect(zipped == (count, count + 1))
    }
}

/// `job` performed on a `TestQueue` run until idle, with a recorder of its
/// outcome and its handle.
func started<T>(_ job: Job<T>) throws -> (TestQueue, Recorder<T>, JobHandle) {
    let queue = TestQueue()
    let recorder = Recorder<T>()
    let handle = job.perform(on: queue, then: recorder.handler)
    try queue.run()
    return (queue, recorder, handle)
}

/// Runs `body` on a thread of its own whose stack is `size` bytes, and
/// returns what it returned, without blocking the caller's thread.
func onThread<T: Sendable>(ofStackSize size: Int, _ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        let thread = Thread { continuation.resume(returning: body()) }
        thread.stackSize = size
        thread.start()
    }
}
