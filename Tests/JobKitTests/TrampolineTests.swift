import JobKit
import JobKitTesting
import TestSupport
import Testing

/// JobKit's own enqueues never nest without bound, even on a queue that
/// runs work inline and queues nothing (`NestingQueue`, which breaks
/// `JobQueue`'s advice on purpose).
@Suite("No recursion on inline queues", .timeLimit(.minutes(1)))
struct TrampolineTests {
    @Test(.onThreadOfItsOwn) func aHundredThousandRetriesKeepAFlatStack() {
        let top = currentStackAddress()
        let deepest = LockedValue(top)
        let attempts = LockedValue(0)
        let failing = Job<Void> { controller in
            let address = currentStackAddress()
            deepest.withValue { $0 = min($0, address) }
            attempts.withValue { $0 += 1 }
            controller.fail(with: TestError())
        }
        let recorder = Recorder<Void>()
        failing.retry(attempts: 100_000).perform(on: NestingQueue(), then: recorder.handler)
        #expect(attempts.value == 100_000)
        #expect(recorder.last?.failure is TestError)
        #expect(top - deepest.value < 64 * 1024)
    }

    @Test func aLongChainOfThenKeepsAFlatStack() throws {
        let top = currentStackAddress()
        let deepest = LockedValue(top)
        var job = Job.succeeded(0)
        for _ in 0..<10_000 {
            job = job.then { value in
                Job { controller in
                    let address = currentStackAddress()
                    deepest.withValue { $0 = min($0, address) }
                    controller.finish(with: value + 1)
                }
            }
        }
        let recorder = Recorder<Int>()
        job.perform(on: NestingQueue(), then: recorder.handler)
        #expect(try recorder.last?.get() == 10_000)
        #expect(top - deepest.value < 256 * 1024)
    }

    @Test func workHeldBackRunsAfterTheOuterWorkInOrder() {
        let log = LockedValue<[String]>([])
        let steps = (0..<3).map { index in
            Job<Void> { controller in
                log.withValue { $0.append("step \(index) starts") }
                controller.finish()
                log.withValue { $0.append("step \(index) returns") }
            }
        }
        let recorder = Recorder<Void>()
        Job.sequence(steps).perform(on: NestingQueue(), then: recorder.handler)
        #expect(recorder.count == 1)
        // Each next step starts only after the step before returned.
        #expect(
            log.value == [
                "step 0 starts", "step 0 returns", "step 1 starts", "step 1 returns", "step 2 starts",
                "step 2 returns",
            ])
    }
}
