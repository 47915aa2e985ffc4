import JobKitTesting
import Testing

@testable import JobKit

/// A retry's or a loop's waits, armed in the order threads get there.
@Suite("Timer slot", .timeLimit(.minutes(1)))
struct TimerSlotTests {
    /// A wait whose cancels are counted.
    final class Wait: Sendable {
        let cancels = LockedValue(0)
        var work: DelayedWork { DelayedWork { self.cancels.withValue { $0 += 1 } } }
    }

    @Test(arguments: [TimerSlot.Purpose.retry(attempts: 5), .loop])
    func aWaitArmedAfterItFiredAndTheNextWaitWasArmedLeavesTheNextOneToCancel(purpose: TimerSlot.Purpose) {
        let slot = TimerSlot(purpose)
        let first = Wait()
        let second = Wait()
        // Step 1 ended: the wait before step 2 is made; before it is armed,
        // it fires on another thread, step 2 runs and ends, and the wait
        // before step 3 is made and armed.
        slot.wait(before: 2, delay: .seconds(1), after: TestError())
        slot.begin(2)
        slot.wait(before: 3, delay: .seconds(1), after: TestError())
        slot.arm(second.work, before: 3)
        // Now the first thread arms the wait it made.
        slot.arm(first.work, before: 2)
        slot.close()
        #expect(second.cancels.value == 1)
        #expect(first.cancels.value == 0)
    }

    @Test func aWaitArmedAfterTheSlotClosedIsCancelledAtOnce() {
        let slot = TimerSlot(.loop)
        let wait = Wait()
        slot.wait(before: 2, delay: .seconds(1), after: nil)
        slot.close()
        slot.arm(wait.work, before: 2)
        #expect(wait.cancels.value == 1)
    }

    @Test func anExponentialDelayThatStopsGrowingCostsNoMoreForALaterStep() {
        let shrinking = RetryDelay.exponential(initial: .seconds(1), multiplier: 0.5, maximum: .seconds(10))
        #expect(shrinking.delay(beforeRetry: 3) == .milliseconds(250))
        // Once it no longer changes, the count of retries before no longer
        // matters: a loop of `Int.max` steps would not end otherwise.
        #expect(shrinking.delay(beforeRetry: .max) == .zero)
        let flat = RetryDelay.exponential(initial: .seconds(2), multiplier: 1, maximum: .seconds(10))
        #expect(flat.delay(beforeRetry: .max) == .seconds(2))
        let none = RetryDelay.exponential(initial: .zero, maximum: .seconds(10))
        #expect(none.delay(beforeRetry: .max) == .zero)
    }
}
