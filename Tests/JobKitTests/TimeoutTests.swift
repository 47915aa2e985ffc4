import JobKit
import JobKitTesting
import Testing

@Suite("Timeout", .timeLimit(.minutes(1)))
struct TimeoutTests {
    @Test func failsWithTimedOutAndCancelsTheJobWhenTimeRunsOut() throws {
        let manual = ManualJob<Int>()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        manual.job.timeout(after: .seconds(30)).perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(29))
        #expect(recorder.count == 0)
        #expect(manual.cancelCount == 0)
        try queue.advance(by: .seconds(1))
        #expect(recorder.last?.failure as? JobError == .timedOut)
        #expect(manual.cancelCount == 1)
        #expect(queue.now == .seconds(30))
    }

    @Test func finishesWithTheValueWhenInTime() throws {
        let manual = ManualJob<Int>()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        manual.job.timeout(after: .seconds(30)).perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(10))
        manual.finish(with: 4)
        try queue.advance(by: .seconds(30))
        #expect(try recorder.last?.get() == 4)
        #expect(recorder.count == 1)
        #expect(manual.cancelCount == 0)
    }

    @Test func neverTimesOut() throws {
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        Job<Void>.never.timeout(after: .milliseconds(5)).perform(on: queue, then: recorder.handler)
        try queue.advance(by: .milliseconds(5))
        #expect(recorder.last?.failure as? JobError == .timedOut)
    }

    @Test func cancellingTheTimeoutCancelsTheJob() throws {
        let manual = ManualJob<Int>()
        let queue = TestQueue()
        let handle = manual.job.timeout(after: .seconds(1)).perform(on: queue) { _ in }
        try queue.run()
        handle.cancel()
        #expect(manual.cancelCount == 1)
    }
}
