import Dispatch
import JobKit
import JobKitTesting
import TestSupport
import Testing

private final class Captured: Sendable {}

/// `enqueue(after:)` returns a handle that cancels the work, on every queue.
@Suite("Cancelling delayed work", .timeLimit(.minutes(1)))
struct DelayedWorkTests {
    @Test func onATestQueueCancelledWorkIsNoLongerPendingAndNeverRuns() throws {
        let queue = TestQueue()
        let ran = LockedValue<[String]>([])
        let first = queue.enqueue(after: .seconds(1)) { ran.withValue { $0.append("first") } }
        queue.enqueue(after: .seconds(2)) { ran.withValue { $0.append("second") } }
        #expect(queue.pendingCount == 2)
        first.cancel()
        first.cancel()  // twice does nothing more
        #expect(queue.pendingCount == 1)
        try queue.advance(by: .seconds(5))
        #expect(ran.value == ["second"])
        #expect(queue.isIdle)
        #expect(queue.now == .seconds(5))
    }

    @Test func onATestQueueCancellingReleasesTheWorkAtOnce() {
        let queue = TestQueue()
        weak var weakObject: Captured?
        let delayed: DelayedWork
        do {
            let object = Captured()
            weakObject = object
            delayed = queue.enqueue(after: .seconds(3600)) { withExtendedLifetime(object) {} }
        }
        #expect(weakObject != nil)
        delayed.cancel()
        #expect(weakObject == nil)
    }

    @Test func onATestQueueCancellingWorkThatRanDoesNothing() throws {
        let queue = TestQueue()
        let runs = LockedValue(0)
        let delayed = queue.enqueue(after: .seconds(1)) { runs.withValue { $0 += 1 } }
        try queue.advance(by: .seconds(1))
        delayed.cancel()
        queue.enqueue { runs.withValue { $0 += 10 } }
        #expect(queue.pendingCount == 1)
        try queue.run()
        #expect(runs.value == 11)
        #expect(queue.isIdle)
    }

    @Test func onATestQueueCancelledItemsDoNotCountTowardsTheStepLimit() throws {
        let queue = TestQueue(maxSteps: 3)
        for _ in 0..<10 { queue.enqueue(after: .seconds(1)) {}.cancel() }
        let runs = LockedValue(0)
        for _ in 0..<3 { queue.enqueue(after: .seconds(1)) { runs.withValue { $0 += 1 } } }
        try queue.advance(by: .seconds(1))
        #expect(runs.value == 3)
    }

    @Test func onAnImmediateQueueWorkCancelledWhileWaitingNeverRuns() {
        let ran = LockedValue(false)
        ImmediateQueue().enqueue {
            // Inside running work, delayed work waits behind it.
            let delayed = ImmediateQueue().enqueue(after: .seconds(1)) { ran.setValue(true) }
            delayed.cancel()
        }
        #expect(ran.value == false)
    }

    @Test func onADispatchQueueCancelledWorkNeverRuns() async {
        let queue = DispatchQueue(label: "DelayedWorkTests")
        let ran = LockedValue<[String]>([])
        let done = DispatchSemaphore(value: 0)
        // Both on one serial queue, the cancelled one due first: had it not
        // been cancelled, it would have run before the second. (Its 200 ms
        // leave the cancel, on the next line, time even on a loaded machine.)
        let cancelled = queue.enqueue(after: .milliseconds(200)) { ran.withValue { $0.append("cancelled") } }
        cancelled.cancel()
        queue.enqueue(after: .milliseconds(400)) {
            ran.withValue { $0.append("kept") }
            done.signal()
        }
        #expect(await done.signalled(within: 10))
        #expect(ran.value == ["kept"])
    }

    @Test func onADispatchQueueDelayedWorkRunsOnceOnThatQueue() async {
        let queue = DispatchQueue(label: "DelayedWorkTests.once")
        let key = DispatchSpecificKey<Int>()
        queue.setSpecific(key: key, value: 7)
        let runs = LockedValue<[Int?]>([])
        let done = DispatchSemaphore(value: 0)
        let delayed = queue.enqueue(after: .milliseconds(1)) {
            runs.withValue { $0.append(DispatchQueue.getSpecific(key: key)) }
            done.signal()
        }
        #expect(await done.signalled(within: 10))
        delayed.cancel()  // after it ran: nothing happens
        await withCheckedContinuation { flushed in queue.async { flushed.resume() } }
        #expect(runs.value == [7])
    }
}
