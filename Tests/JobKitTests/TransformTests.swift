import JobKit
import JobKitTesting
import Testing

@Suite("Transform", .timeLimit(.minutes(1)))
struct TransformTests {
    @Test func thenPerformsTheNextJobWithThePreviousValue() throws {
        let job = Job.succeeded(2).then { value in Job.succeeded(value * 10) }
        #expect(try outcome(of: job)?.get() == 20)
    }

    @Test func thenDoesNotBuildTheNextJobAfterAFailure() throws {
        let built = LockedValue(false)
        let job = Job<Int>.failed(TestError(id: 1)).then { value -> Job<Int> in
            built.setValue(true)
            return .succeeded(value)
        }
        #expect(outcome(of: job)?.failure as? TestError == TestError(id: 1))
        #expect(!built.value)
    }

    @Test func cancellingThenCancelsWhicheverStepRuns() throws {
        let first = ManualJob<Int>()
        let second = ManualJob<Int>()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        let handle = first.job.then { _ in second.job }.perform(on: queue, then: recorder.handler)
        try queue.run()
        first.finish(with: 1)
        try queue.run()
        #expect(second.startCount == 1)
        handle.cancel()
        #expect(first.cancelCount == 0)
        #expect(second.cancelCount == 1)
        try queue.run()
        #expect(isCancellation(recorder.last?.failure))
    }

    @Test func mapTransformsTheValueAndTurnsThrowsIntoFailures() throws {
        #expect(try outcome(of: Job.succeeded(3).map { "\($0)" })?.get() == "3")
        let throwing = Job.succeeded(3).map { _ -> Int in throw TestError(id: 9) }
        #expect(outcome(of: throwing)?.failure as? TestError == TestError(id: 9))
        #expect(outcome(of: Job.succeeded(3).discardingValue())?.isSuccess == true)
    }

    @Test func recoverReplacesAFailureWithAValueOrRethrows() throws {
        let recovered = Job<Int>.failed(TestError(id: 1)).recover { _ in 0 }
        #expect(try outcome(of: recovered)?.get() == 0)
        let passedOn = Job<Int>.failed(TestError(id: 1)).recover { error in throw TestError(id: 2) }
        #expect(outcome(of: passedOn)?.failure as? TestError == TestError(id: 2))
        let untouched = Job.succeeded(5).recover { _ in 0 }
        #expect(try outcome(of: untouched)?.get() == 5)
    }

    @Test func recoverWithPerformsAFallbackJob() throws {
        let job = Job<Int>.failed(TestError()).recover { _ in Job.succeeded(42) }
        #expect(try outcome(of: job)?.get() == 42)
    }

    @Test func mapErrorWrapsFailures() throws {
        struct Wrapped: Error { let underlying: any Error }
        let job = Job<Int>.failed(TestError(id: 3)).mapError { Wrapped(underlying: $0) }
        let error = try #require(outcome(of: job)?.failure as? Wrapped)
        #expect(error.underlying as? TestError == TestError(id: 3))
    }

    @Test func chainsRunOnTheInjectedQueue() throws {
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        Job.succeeded(1).map { $0 + 1 }.then { Job.succeeded($0 * 3) }.perform(on: queue, then: recorder.handler)
        #expect(recorder.count == 0)
        try queue.run()
        #expect(try recorder.last?.get() == 6)
    }
}
