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

    @Test func aCancelIsNeitherASuccessNorAFailureOfTheJob() throws {
        let effects = LockedValue(0)
        for observing in [
            { (job: Job<Int>) in job.onSuccess { _ in effects.withValue { $0 += 1 } } },
            { (job: Job<Int>) in job.onFailure { _ in effects.withValue { $0 += 1 } } },
        ] {
            let inner = ManualJob<Int>()
            let queue = TestQueue()
            let recorder = Recorder<Int>()
            let handle = observing(inner.job).perform(on: queue, then: recorder.handler)
            try queue.run()
            #expect(inner.startCount == 1)
            handle.cancel()
            #expect(inner.cancelCount == 1)
            try queue.run()
            #expect(isCancellation(recorder.last?.failure))
            #expect(recorder.count == 1)
        }
        #expect(effects.value == 0)
    }

    @Test func anInnerCancellationErrorIsAFailureOfTheJob() throws {
        let seen = LockedValue<[any Error]>([])
        let job = Job<Int>.failed(CancellationError()).onFailure { error in seen.withValue { $0.append(error) } }
        #expect(isCancellation(outcome(of: job)?.failure))
        #expect(seen.value.count == 1 && isCancellation(seen.value.first))
    }

    @Test func effectsRunEachPerformanceOnTheInjectedQueue() throws {
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

    @Test func aFailureRacingACancelCallsTheEffectAtMostOnceAndBeforeItsOutcome() {
        // Real threads: the inner job fails while the outer one is
        // cancelled. Whichever wins, the effect runs at most once, and a
        // reported failure of the inner job was seen by the effect first.
        for _ in 0..<2_000 {
            let effects = LockedValue(0)
            let inner = ManualJob<Int>()
            let recorder = Recorder<Int>()
            let effectsWhenReported = LockedValue<Int?>(nil)
            let handle = inner.job.onFailure { _ in effects.withValue { $0 += 1 } }
                .perform(on: ImmediateQueue()) { outcome in
                    effectsWhenReported.setValue(effects.value)
                    recorder.handler(outcome)
                }
            race {
                inner.fail(with: TestError(id: 1))
            } _: {
                handle.cancel()
            }
            #expect(effects.value <= 1)
            #expect(recorder.count == 1)
            if recorder.last?.failure is TestError {
                #expect(effectsWhenReported.value == 1)
            } else {
                #expect(isCancellation(recorder.last?.failure))
            }
        }
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
