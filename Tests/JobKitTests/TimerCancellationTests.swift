import JobKit
import JobKitTesting
import Testing

/// Timers die with their jobs: a `timeout` or a `retry` leaves nothing
/// pending on its queue once the job completed or was cancelled.
@Suite("Timers die with their jobs", .timeLimit(.minutes(1)))
struct TimerCancellationTests {
    @Test func aTimeoutLeavesNothingPendingOnceItsJobFinished() throws {
        let manual = ManualJob<Int>()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        manual.job.timeout(after: .seconds(3600)).perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(queue.pendingCount == 1)  // the timer
        manual.finish(with: 7)
        try queue.run()
        #expect(try recorder.last?.get() == 7)
        #expect(queue.isIdle)
        #expect(queue.now == .zero)
    }

    @Test func aTimeoutOfAJobThatCompletesSynchronouslyLeavesNothingPending() throws {
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        Job.succeeded(3).timeout(after: .seconds(3600)).perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(try recorder.last?.get() == 3)
        #expect(queue.isIdle)
    }

    @Test func aTimeoutLeavesNothingPendingOnceItsJobWasCancelled() throws {
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        let handle = Job<Void>.never.timeout(after: .seconds(3600)).perform(on: queue, then: recorder.handler)
        try queue.run()
        handle.cancel()
        try queue.run()
        #expect(recorder.last?.failure is CancellationError)
        #expect(queue.isIdle)
    }

    @Test func aFinishedTimeoutReleasesWhatItsTimerCaptured() throws {
        weak var weakObject: Tracked?
        let queue = TestQueue()
        do {
            let object = Tracked()
            weakObject = object
            let manual = ManualJob<Int>()
            manual.job.map { value in withExtendedLifetime(object) { value } }
                .timeout(after: .seconds(3600))
                .perform(on: queue) { _ in }
            try queue.run()
            manual.finish(with: 1)
            try queue.run()
        }
        #expect(weakObject == nil)
    }

    @Test func aRetryCancelledDuringItsDelayLeavesNothingPending() throws {
        let attempts = LockedValue(0)
        let failing = Job<Int> { controller in
            attempts.withValue { $0 += 1 }
            controller.fail(with: TestError())
        }
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        let handle = failing.retry(attempts: 3, delay: .fixed(.seconds(3600)))
            .perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(attempts.value == 1)
        #expect(queue.pendingCount == 1)  // the wait before the second attempt
        handle.cancel()
        try queue.run()
        #expect(recorder.last?.failure is CancellationError)
        #expect(queue.isIdle)
        try queue.advance(by: .seconds(7200))
        #expect(attempts.value == 1)
    }

    @Test func aTimedOutRetryLeavesNothingPending() throws {
        // A timeout around a retry: the timeout cancels the retry in its
        // wait, and both timers go.
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        Job<Int>.failed(TestError())
            .retry(attempts: 5, delay: .fixed(.seconds(60)))
            .timeout(after: .seconds(90))
            .perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(90))
        #expect(recorder.last?.failure as? JobError == .timedOut)
        #expect(queue.isIdle)
    }
}
