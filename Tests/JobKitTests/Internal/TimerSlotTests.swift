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

    /// A queue whose timers never fire by themselves, and which runs
    /// `whileMakingTheFirstTimer` as it makes its first: what another thread
    /// does before the thread that made the timer gets back.
    final class InterleavingQueue: JobQueue {
        let timers = LockedValue<[Wait]>([])
        let whileMakingTheFirstTimer: LockedValue<(@Sendable () -> Void)?>

        init(whileMakingTheFirstTimer: @escaping @Sendable () -> Void) {
            self.whileMakingTheFirstTimer = LockedValue(whileMakingTheFirstTimer)
        }

        func enqueue(_ work: @escaping @Sendable () -> Void) { work() }

        func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork {
            let wait = Wait()
            timers.withValue { $0.append(wait) }
            whileMakingTheFirstTimer.withValue { $0.take() }?()
            return wait.work
        }
    }

    @Test(arguments: [TimerSlot.Purpose.retry(attempts: 5), .loop])
    func aWaitThatFiredBeforeItWasKeptLeavesTheNextWaitToCancel(purpose: TimerSlot.Purpose) {
        let slot = TimerSlot(purpose)
        let later = LockedValue<InterleavingQueue?>(nil)
        // Step 1 ended: the wait before step 2 is made, and before it is
        // kept, it fires on another thread, step 2 runs and ends, and the
        // wait before step 3 is made and kept.
        let queue = InterleavingQueue {
            slot.begin(2)
            guard let queue = later.value else { return }
            slot.wait(before: 3, delay: .seconds(1), after: TestError(), on: queue) {}
        }
        later.setValue(queue)
        slot.wait(before: 2, delay: .seconds(1), after: TestError(), on: queue) {}
        slot.close()
        let timers = queue.timers.value
        #expect(timers.count == 2)
        #expect(timers.last?.cancels.value == 1)
        #expect(timers.first?.cancels.value == 0)
    }

    @Test func aWaitMadeAfterTheSlotClosedIsCancelledAtOnce() {
        let slot = TimerSlot(.loop)
        let queue = InterleavingQueue {}
        slot.close()
        slot.wait(before: 2, delay: .seconds(1), after: nil, on: queue) {}
        #expect(queue.timers.value.first?.cancels.value == 1)
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
