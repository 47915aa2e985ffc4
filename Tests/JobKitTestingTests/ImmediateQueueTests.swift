import Dispatch
import JobKit
import JobKitTesting
import Testing

@Suite("ImmediateQueue", .timeLimit(.minutes(1)))
struct ImmediateQueueTests {
    @Test func runsWorkInlineBeforeEnqueueReturns() {
        let ran = LockedValue(false)
        ImmediateQueue().enqueue { ran.setValue(true) }
        #expect(ran.value)
    }

    @Test func delayedWorkRunsAtOnce() {
        let ran = LockedValue(false)
        ImmediateQueue().enqueue(after: .seconds(3600)) { ran.setValue(true) }
        #expect(ran.value)
    }

    @Test func workEnqueuedWhileRunningRunsRightAfterInOrder() {
        let queue = ImmediateQueue()
        let log = LockedValue<[String]>([])
        queue.enqueue {
            log.withValue { $0.append("outer start") }
            queue.enqueue { log.withValue { $0.append("first") } }
            queue.enqueue {
                log.withValue { $0.append("second") }
                queue.enqueue { log.withValue { $0.append("third") } }
            }
            log.withValue { $0.append("outer end") }
        }
        #expect(log.value == ["outer start", "outer end", "first", "second", "third"])
    }

    @Test func aLongChainOfReenqueuedWorkKeepsAFlatStack() {
        let queue = ImmediateQueue()
        let top = currentStackAddress()
        let deepest = LockedValue(top)
        let remaining = LockedValue(200_000)
        @Sendable func step() {
            let address = currentStackAddress()
            deepest.withValue { $0 = min($0, address) }
            let goOn = remaining.withValue { value -> Bool in
                value -= 1
                return value > 0
            }
            if goOn { queue.enqueue(step) }
        }
        queue.enqueue(step)
        #expect(remaining.value == 0)
        #expect(top - deepest.value < 64 * 1024)
    }

    @Test func eachThreadDrainsItsOwnWork() {
        let queue = ImmediateQueue()
        let counts = LockedValue([Int](repeating: 0, count: 8))
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for _ in 0..<1_000 {
                queue.enqueue {
                    queue.enqueue { counts.withValue { $0[thread] += 1 } }
                }
            }
        }
        #expect(counts.value == Array(repeating: 1_000, count: 8))
    }

    @Test func aJobsOwnEnqueuesAndPlainWorkKeepOneOrder() {
        let log = LockedValue<[String]>([])
        let child = Job<Void> { controller in
            log.withValue { $0.append("child runs") }
            controller.finish()
        }
        let parent = Job<Void> { controller in
            controller.perform(child) { _ in
                log.withValue { $0.append("child's handler") }
                controller.finish()
            }
            controller.queue.enqueue { log.withValue { $0.append("work enqueued after the child") } }
            log.withValue { $0.append("parent returns") }
        }
        parent.perform(on: ImmediateQueue()) { _ in log.withValue { $0.append("parent's handler") } }
        #expect(
            log.value == [
                "parent returns", "child runs", "work enqueued after the child", "child's handler",
                "parent's handler",
            ])
    }
}

@inline(never)
func currentStackAddress() -> UInt {
    var marker = 0
    return withUnsafeMutablePointer(to: &marker) { UInt(bitPattern: $0) }
}
