import Dispatch
import JobKit
import JobKitTesting
import TestSupport
import Testing

@Suite("sleep", .timeLimit(.minutes(1)))
struct SleepTests {
    @Test func finishesAfterItsDurationInTheQueuesTime() throws {
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        let sleep = Job.sleep(for: .seconds(30))  // allowed: virtual time, on a TestQueue
        let handle = sleep.perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(29))
        #expect(recorder.count == 0)
        #expect(handle.snapshot().kind == .sleep(.seconds(30)))  // allowed: a snapshot's kind, no wait
        #expect(handle.snapshot().title == "sleep 30 s")
        try queue.advance(by: .seconds(1))
        #expect(recorder.last?.isSuccess == true)
        #expect(queue.isIdle)
    }

    @Test func cancellingItLeavesNothingOnTheQueue() throws {
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        let sleep = Job.sleep(for: .seconds(30))  // allowed: virtual time, on a TestQueue
        let handle = sleep.perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(queue.pendingCount == 1)
        handle.cancel()
        try queue.run()
        #expect(queue.isIdle)
        #expect(isCancellation(recorder.last?.failure))
    }

    @Test(arguments: [Duration.zero, .seconds(-1)])
    func aDurationOfZeroOrLessFinishesOnTheQueuesNextTurn(duration: Duration) throws {
        let queue = TestQueue()
        let recorder = Recorder<Void>()
        Job.sleep(for: duration).perform(on: queue, then: recorder.handler)  // allowed: virtual time, on a TestQueue
        try queue.run()
        #expect(recorder.last?.isSuccess == true)
        #expect(queue.now == .zero)
    }

    @Test func aSleepBeforeAJobDelaysItsStartFromWhenTheWholeIsPerformed() throws {
        let queue = TestQueue()
        let started = LockedValue<[Duration]>([])
        let refresh = Job<Void> { controller in
            started.withValue { $0.append(queue.now) }
            controller.finish()
        }
        let refreshLater = Job.sequence([.sleep(for: .seconds(30)), refresh])  // allowed: TestQueue time
        try queue.advance(by: .seconds(100))
        refreshLater.perform(on: queue) { _ in }
        try queue.advance(by: .seconds(100))
        #expect(started.value == [.seconds(130)])
    }
}
