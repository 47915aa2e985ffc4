import Dispatch
import JobKit
import JobKitTesting
import Testing

@Suite("Side effects, outcomes as values, a handler for each outcome, variadic races", .timeLimit(.minutes(1)))
struct ObserveTests {
    // MARK: onSuccess, onFailure

    @Test(arguments: [Job<Int>.succeeded(7), .failed(TestError(id: 7))])
    func theEffectOfTheOutcomeRunsBeforeTheJobReportsAndChangesNothing(_ inner: Job<Int>) throws {
        let events = LockedValue<[String]>([])
        let job =
            inner
            .onSuccess { value in events.withValue { $0.append("success effect \(value)") } }
            .onFailure { error in events.withValue { $0.append("failure effect \((error as? TestError)?.id ?? 0)") } }
        job.perform(on: ImmediateQueue()) { outcome in
            let seen = (try? outcome.get()) ?? (outcome.failure as? TestError)?.id ?? 0
            events.withValue { $0.append("handler \(seen)") }
        }
        let succeeds = outcome(of: inner)?.isSuccess == true
        #expect(events.value == [succeeds ? "success effect 7" : "failure effect 7", "handler 7"])
    }

    /// The two side effects, each counting its calls in `effects`.
    static let observers: [@Sendable (Job<Int>, LockedValue<Int>) -> Job<Int>] = [
        { job, effects in job.onSuccess { _ in effects.withValue { $0 += 1 } } },
        { job, effects in job.onFailure { _ in effects.withValue { $0 += 1 } } },
    ]

    /// A cancel while the inner job runs, or once it completed and its
    /// effect waits for its turn on the queue: no effect either way.
    @Test(arguments: 0..<2, [false, true])
    func aCancelIsNeitherASuccessNorAFailureOfTheJob(observer: Int, innerCompletedFirst: Bool) throws {
        let effects = LockedValue(0)
        let inner = ManualJob<Int>()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        let handle = Self.observers[observer](inner.job, effects).perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(inner.startCount == 1)
        if innerCompletedFirst {
            if observer == 0 { inner.finish(with: 1) } else { inner.fail(with: TestError()) }
        }
        handle.cancel()
        #expect(inner.cancelCount == (innerCompletedFirst ? 0 : 1))
        try queue.run()
        #expect(isCancellation(recorder.last?.failure))
        #expect(recorder.count == 1)
        #expect(effects.value == 0)
    }

    @Test func anInnerCancellationErrorIsAFailureOfTheJob() throws {
        let seen = LockedValue<[any Error]>([])
        let job = Job<Int>.failed(CancellationError()).onFailure { error in seen.withValue { $0.append(error) } }
        #expect(isCancellation(outcome(of: job)?.failure))
        #expect(seen.value.count == 1 && isCancellation(seen.value.first))
    }

    @Test func effectsRunForEachPerformanceAsTheQueueRuns() throws {
        let values = LockedValue<[Int]>([])
        let counter = LockedValue(0)
        let job = Job<Int> { controller in
            let run = counter.withValue { runs in
                runs += 1
                return runs
            }
            controller.finish(with: run)
        }
        .onSuccess { value in values.withValue { $0.append(value) } }
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        job.perform(on: queue, then: recorder.handler)
        job.perform(on: queue, then: recorder.handler)
        #expect(values.value.isEmpty)
        try queue.run()
        #expect(values.value == [1, 2])
        #expect(recorder.values == [1, 2])
    }

    @Test func effectsRunOnTheQueueTheJobIsPerformedOnWhereverTheJobCompletes() async {
        let queue = DispatchQueue(label: "JobKitTests.effects")
        let name = DispatchSpecificKey<String>()
        queue.setSpecific(key: name, value: "effects")
        let seen = LockedValue<[String?]>([])
        let elsewhere = Job<Int> { controller in DispatchQueue.global().async { controller.finish(with: 1) } }
        let failing = Job<Int> { controller in DispatchQueue.global().async { controller.fail(with: TestError()) } }
        let done = DispatchGroup()
        for job in [
            elsewhere.onSuccess { _ in seen.withValue { $0.append(DispatchQueue.getSpecific(key: name)) } },
            failing.onFailure { _ in seen.withValue { $0.append(DispatchQueue.getSpecific(key: name)) } },
        ] {
            done.enter()
            job.perform(on: queue) { _ in done.leave() }
        }
        #expect(await done.completed(within: 10))
        #expect(seen.value == ["effects", "effects"])
    }

    @Test(arguments: 0..<3)
    func anOutcomeRacingACancelIsReportedOnceAndSeenFirst(combinator: Int) {
        // Real threads: the inner job completes while the outer one is
        // cancelled. Whichever wins, the outcome is reported once, an
        // effect runs at most once, and an outcome of the inner job that
        // is reported went through the effect first.
        var winners: Set<String> = []
        for _ in 0..<2_000 {
            let effects = LockedValue(0)
            let inner = ManualJob<Int>()
            let reported = LockedValue<[(outcome: String, effects: Int)]>([])
            let handle: JobHandle
            @Sendable func record(_ outcome: String) { reported.withValue { $0.append((outcome, effects.value)) } }
            switch combinator {
            case 0:
                handle = inner.job.onSuccess { _ in effects.withValue { $0 += 1 } }
                    .perform(on: ImmediateQueue()) { record($0.isSuccess ? "inner" : "cancel") }
            case 1:
                handle = inner.job.onFailure { _ in effects.withValue { $0 += 1 } }
                    .perform(on: ImmediateQueue()) { record($0.failure is TestError ? "inner" : "cancel") }
            default:
                handle = inner.job.capturingOutcome().perform(on: ImmediateQueue()) { outcome in
                    effects.setValue(1)
                    record((try? outcome.get())?.failure is TestError ? "inner" : "cancel")
                }
            }
            race {
                if combinator == 0 { inner.finish(with: 1) } else { inner.fail(with: TestError(id: 1)) }
            } _: {
                handle.cancel()
            }
            #expect(reported.value.count == 1)
            #expect(effects.value <= 1)
            if let (outcome, effectsBefore) = reported.value.first {
                winners.insert(outcome)
                if outcome == "inner" { #expect(effectsBefore == 1) }
            }
        }
        // Each side wins sometimes on two cores; the invariants hold either way.
        #expect(!winners.isEmpty)
    }

    @Test func aCompletionAndACancelAtTheSameInstantGiveOneOutcomeInEveryOrder() throws {
        let outcomes = LockedValue<Set<String>>([])
        try exploreOrderings(seeds: 0..<200) { queue in
            let effects = LockedValue(0)
            let recorder = Recorder<Int>()
            let handle = finishing(7, after: .seconds(1)).onSuccess { _ in effects.withValue { $0 += 1 } }
                .perform(on: queue, then: recorder.handler)
            queue.enqueue(after: .seconds(1)) { handle.cancel() }
            try queue.advance(by: .seconds(2))
            try #require(recorder.count == 1)
            try #require(queue.isIdle)
            if recorder.last?.isSuccess == true {
                try #require(effects.value == 1)
                outcomes.withValue { $0.insert("finished") }
            } else {
                try #require(isCancellation(recorder.last?.failure))
                outcomes.withValue { $0.insert(effects.value == 0 ? "cancelled" : "cancelled after the effect") }
            }
        }
        #expect(outcomes.value.contains("finished"))
        #expect(outcomes.value.contains("cancelled"))
    }

    @Test func aPerformanceReleasesTheValueItReportedOnceItCompleted() throws {
        weak var released: Tracked?
        let inner = ManualJob<Tracked>()
        let queue = TestQueue()
        let recorder = LockedValue(0)
        let handle = inner.job.onSuccess { _ in }.onFailure { _ in }.capturingOutcome()
            .perform(on: queue) { _ in recorder.withValue { $0 += 1 } }
        try queue.run()
        do {
            let value = Tracked()
            released = value
            inner.finish(with: value)
        }
        try queue.run()
        inner.release()
        #expect(recorder.value == 1)
        #expect(handle.isCompleted)
        #expect(released == nil)
    }

    // MARK: capturingOutcome

    @Test func capturingOutcomeFinishesWithASuccessOrAFailureAsAValue() throws {
        let success = try #require(outcome(of: Job.succeeded(3).capturingOutcome())).get()
        #expect(try success.get() == 3)
        let failure = try #require(outcome(of: Job<Int>.failed(TestError(id: 2)).capturingOutcome())).get()
        #expect(failure.failure as? TestError == TestError(id: 2))
        let abandoned = try #require(outcome(of: Job<Int> { _ in }.capturingOutcome())).get()
        #expect(abandoned.failure as? JobError == .abandoned)
    }

    @Test func capturingOutcomeFailsOnlyWhenItIsCancelledAndCancelsTheJob() throws {
        let inner = ManualJob<Int>()
        let queue = TestQueue()
        let recorder = Recorder<Job<Int>.Outcome>()
        let handle = inner.job.capturingOutcome().perform(on: queue, then: recorder.handler)
        try queue.run()
        handle.cancel()
        #expect(inner.cancelCount == 1)
        try queue.run()
        #expect(isCancellation(recorder.last?.failure))
        #expect(recorder.count == 1)
    }

    @Test func capturingOutcomeLetsTheNextJobGoOnAfterAFailure() throws {
        let next = Job<Int>.failed(TestError(id: 5)).capturingOutcome().then { outcome in
            Job.succeeded(outcome.isSuccess ? "sent" : "sent, after a failure")
        }
        #expect(try outcome(of: next)?.get() == "sent, after a failure")
    }

    // MARK: perform(on:onSuccess:onFailure:)

    @Test func performWithTwoHandlersCallsOneOfThemOnceOnTheQueue() throws {
        let queue = TestQueue()
        let calls = LockedValue<[String]>([])
        Job.succeeded(1).perform(on: queue) { value in
            calls.withValue { $0.append("success \(value)") }
        } onFailure: { _ in
            calls.withValue { $0.append("failure") }
        }
        Job<Int>.failed(TestError(id: 8)).perform(on: queue) { _ in
            calls.withValue { $0.append("success") }
        } onFailure: { error in
            calls.withValue { $0.append("failure \((error as? TestError)?.id ?? 0)") }
        }
        #expect(calls.value.isEmpty)
        try queue.run()
        #expect(calls.value == ["success 1", "failure 8"])
    }

    @Test func aCancelledPerformanceCallsOnFailureWithTheCancel() throws {
        let queue = TestQueue()
        let inner = ManualJob<Int>()
        let errors = LockedValue<[any Error]>([])
        let successes = LockedValue(0)
        let handle = inner.job.perform(on: queue) { _ in
            successes.withValue { $0 += 1 }
        } onFailure: { error in
            errors.withValue { $0.append(error) }
        }
        try queue.run()
        handle.cancel()
        inner.finish(with: 1)
        try queue.run()
        #expect(inner.cancelCount == 1)
        #expect(successes.value == 0)
        #expect(errors.value.count == 1 && isCancellation(errors.value.first))
    }

    // MARK: Variadic race and firstSuccess

    @Test func aVariadicRaceIsTheRaceOfItsArguments() throws {
        let queue = TestQueue()
        let recorder = Recorder<String>()
        let cancelled = LockedValue<[String]>([])
        Job.race(
            finishing("slow", after: .seconds(2), cancelled: cancelled),
            finishing("fast", after: .seconds(1), cancelled: cancelled),
            finishing("slowest", after: .seconds(3), cancelled: cancelled)
        ).perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(1))
        #expect(recorder.values == ["fast"])
        #expect(cancelled.value == ["slow", "slowest"])
        #expect(queue.pendingCount == 0)
    }

    @Test func aVariadicRaceNeedsNoTypeAnnotationForATimeoutWrittenAsARace() throws {
        struct TooSlow: Error {}
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        // PromiseKit's `race(after(seconds: 5).then { throw TooSlow() }, fetch)`.
        Job.race(finishing(1, after: .seconds(9)), Job.sleep(for: .seconds(5)).then { .failed(TooSlow()) })
            .perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(5))
        #expect(recorder.last?.failure is TooSlow)
    }

    @Test func aVariadicFirstSuccessIsTheFirstSuccessOfItsArguments() throws {
        let queue = TestQueue()
        let recorder = Recorder<String>()
        let started = LockedValue<[String]>([])
        Job.firstSuccess(
            finishing("a", failing: TestError(id: 1), after: .seconds(1), started: started),
            finishing("b", after: .seconds(1), started: started),
            finishing("c", after: .seconds(1), started: started),
            maxConcurrent: 1
        ).perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(1))
        #expect(started.value == ["a", "b"])
        try queue.advance(by: .seconds(1))
        #expect(recorder.values == ["b"])
        #expect(started.value == ["a", "b"])

        let allFailed = Job.firstSuccess(Job<Int>.failed(TestError(id: 1)), .failed(TestError(id: 2)))
        let errors = try #require(outcome(of: allFailed)?.failure as? AllFailedError).errors
        #expect(errors.compactMap { ($0 as? TestError)?.id } == [1, 2])
    }

    @Test func aVariadicRaceOfOneJobIsThatJob() throws {
        #expect(try outcome(of: Job.race(Job.succeeded(1)))?.get() == 1)
        #expect(try outcome(of: Job.firstSuccess(Job.succeeded(2)))?.get() == 2)
    }
}
