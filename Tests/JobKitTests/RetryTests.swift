import JobKit
import JobKitTesting
import Testing

@Suite("Retry", .timeLimit(.minutes(1)))
struct RetryTests {
    /// A job that fails `failures` times, then finishes with the attempt
    /// number; it counts its attempts.
    final class Flaky: Sendable {
        let attempts = LockedValue(0)
        let failures: Int

        init(failures: Int) { self.failures = failures }

        var job: Job<Int> {
            Job { controller in
                let attempt = self.attempts.withValue { value -> Int in
                    value += 1
                    return value
                }
                if attempt <= self.failures {
                    controller.fail(with: TestError(id: attempt))
                } else {
                    controller.finish(with: attempt)
                }
            }
        }
    }

    @Test func retriesUntilSuccess() throws {
        let flaky = Flaky(failures: 2)
        #expect(try outcome(of: flaky.job.retry(attempts: 3))?.get() == 3)
        #expect(flaky.attempts.value == 3)
    }

    @Test func failsWithTheLastErrorAfterTheLastAttempt() throws {
        let flaky = Flaky(failures: 5)
        #expect(outcome(of: flaky.job.retry(attempts: 3))?.failure as? TestError == TestError(id: 3))
        #expect(flaky.attempts.value == 3)
    }

    @Test func fixedDelayWaitsInVirtualTime() throws {
        let flaky = Flaky(failures: 2)
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        flaky.job.retry(attempts: 3, delay: .fixed(.seconds(5))).perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(flaky.attempts.value == 1)
        try queue.advance(by: .seconds(4))
        #expect(flaky.attempts.value == 1)
        try queue.advance(by: .seconds(1))
        #expect(flaky.attempts.value == 2)
        try queue.advance(by: .seconds(5))
        #expect(try recorder.last?.get() == 3)
    }

    @Test func exponentialDelayGrowsAndIsCapped() throws {
        let delay = RetryDelay.exponential(initial: .seconds(1), maximum: .seconds(5))
        #expect(
            (1...5).map(delay.delay(beforeRetry:)) == [.seconds(1), .seconds(2), .seconds(4), .seconds(5), .seconds(5)])
        #expect(RetryDelay.none.delay(beforeRetry: 3) == .zero)

        let flaky = Flaky(failures: 3)
        let queue = TestQueue()
        let times = LockedValue<[Duration]>([])
        let timed = Job<Int> { controller in
            times.withValue { $0.append(queue.now) }
            flaky.job.perform(on: controller.queue) { controller.complete(with: $0) }
        }
        let recorder = Recorder<Int>()
        timed.retry(attempts: 4, delay: delay).perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(60))
        #expect(times.value == [.zero, .seconds(1), .seconds(3), .seconds(7)])
        #expect(try recorder.last?.get() == 4)
    }

    @Test func eachAttemptIsAFreshPerformance() throws {
        let manual = ManualJob<Int>()
        let queue = TestQueue()
        manual.job.retry(attempts: 2).perform(on: queue) { _ in }
        try queue.run()
        let first = manual.controller
        manual.fail(with: TestError())
        try queue.run()
        #expect(manual.startCount == 2)
        #expect(first?.isCompleted == true)
        #expect(manual.controller?.isCompleted == false)
    }

    @Test func cancellingStopsThePendingRetry() throws {
        let flaky = Flaky(failures: 10)
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        let handle = flaky.job.retry(attempts: 5, delay: .fixed(.seconds(1))).perform(on: queue, then: recorder.handler)
        try queue.run()
        handle.cancel()
        try queue.advance(by: .seconds(10))
        #expect(flaky.attempts.value == 1)
        #expect(isCancellation(recorder.last?.failure))
    }

    @Test func retryWhileDecidesWhichErrorsToRetry() throws {
        let flaky = Flaky(failures: 3)
        let job = flaky.job.retry(attempts: 5) { error in (error as? TestError)?.id != 2 }
        #expect(outcome(of: job)?.failure as? TestError == TestError(id: 2))
        #expect(flaky.attempts.value == 2)
    }

    @Test func retryDelayChosenPerErrorSetsEachWaitAndNilStops() throws {
        let flaky = Flaky(failures: 10)
        let queue = TestQueue()
        let times = LockedValue<[Duration]>([])
        let asked = LockedValue<[Int]>([])
        let timed = Job<Int> { controller in
            times.withValue { $0.append(queue.now) }
            flaky.job.perform(on: controller.queue) { controller.complete(with: $0) }
        }
        let recorder = Recorder<Int>()
        timed.retry(attempts: 10) { retry, error in
            asked.withValue { $0.append(retry) }
            // Attempt N fails with TestError(id: N): wait N seconds, and
            // give up after the third attempt's error.
            guard let id = (error as? TestError)?.id, id < 3 else { return nil }
            return .seconds(id)
        }
        .perform(on: queue, then: recorder.handler)

        try queue.advance(by: .seconds(60))
        #expect(times.value == [.zero, .seconds(1), .seconds(3)])
        #expect(asked.value == [1, 2, 3])
        #expect(recorder.last?.failure as? TestError == TestError(id: 3))
        #expect(queue.isIdle)
    }

    @Test func retryDelayIsNotAskedAfterTheLastAttempt() throws {
        let flaky = Flaky(failures: 10)
        let asked = LockedValue(0)
        let job = flaky.job.retry(attempts: 2) { _, _ in
            asked.withValue { $0 += 1 }
            return .zero
        }
        #expect(outcome(of: job)?.failure as? TestError == TestError(id: 2))
        #expect(asked.value == 1)
        #expect(flaky.attempts.value == 2)
    }

    @Test func invalidAttemptsFailWithATypedError() throws {
        guard case .invalidArgument = outcome(of: Job.succeeded(1).retry(attempts: 0))?.failure as? JobError else {
            Issue.record("expected JobError.invalidArgument")
            return
        }
    }

    @Test func timeoutPerAttemptThenRetry() throws {
        let manual = ManualJob<Int>()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        manual.job.timeout(after: .seconds(2)).retry(attempts: 2).perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(2))
        #expect(manual.startCount == 2)
        #expect(manual.cancelCount == 1)
        try queue.advance(by: .seconds(2))
        #expect(recorder.last?.failure as? JobError == .timedOut)
    }
}
