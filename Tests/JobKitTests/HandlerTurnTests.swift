import Dispatch
import JobKit
import JobKitTesting
import Synchronization
import TestSupport
import Testing

/// When a performance's handler runs: in the turn of the queue that ran
/// the job's closure, once the closure returned, if the job completed in
/// it; in a turn of its own otherwise.
@Suite("A handler's turn", .timeLimit(.minutes(1)))
struct HandlerTurnTests {
    /// How a job's closure ends the job before it returns.
    enum Ending: String, CaseIterable, Sendable {
        case finish, fail, cancel
    }

    @Test(arguments: Ending.allCases)
    func aJobThatEndsInItsClosureHasItsHandlerCalledInTheSameTurnOnceTheClosureReturned(ending: Ending) throws {
        let queue = TestQueue()
        let log = LockedValue<[String]>([])
        let handle = LockedValue<JobHandle?>(nil)
        handle.setValue(
            Job<Int> { controller in
                switch ending {
                case .finish: controller.finish(with: 1)
                case .fail: controller.fail(with: TestError())
                case .cancel: handle.value?.cancel()
                }
                log.withValue { $0.append("closure returns") }
            }
            .perform(on: queue) { outcome in
                log.withValue { $0.append(outcome.isSuccess ? "handler: success" : "handler: failure") }
            }
        )
        #expect(queue.runNext())
        #expect(log.value == ["closure returns", ending == .finish ? "handler: success" : "handler: failure"])
        #expect(queue.isIdle)
    }

    @Test func workTheClosureEnqueuedRunsAfterTheHandler() throws {
        let queue = TestQueue()
        let log = LockedValue<[String]>([])
        Job<Void> { controller in
            controller.queue.enqueue { log.withValue { $0.append("work") } }
            controller.finish()
        }
        .perform(on: queue) { _ in log.withValue { $0.append("handler") } }
        try queue.run()
        #expect(log.value == ["handler", "work"])
    }

    @Test func aJobThatCompletesAfterItsClosureReturnedHasItsHandlerCalledInATurnOfItsOwn() throws {
        let queue = TestQueue()
        let manual = ManualJob<Int>()
        let recorder = Recorder<Int>()
        manual.job.perform(on: queue, then: recorder.handler)
        #expect(queue.runNext())
        #expect(manual.controller?.finish(with: 3) == true)
        #expect(recorder.count == 0)
        #expect(queue.pendingCount == 1)
        #expect(queue.runNext())
        #expect(try recorder.last?.get() == 3)
    }

    @Test func aJobCompletedInAnotherJobsClosureHasItsHandlerCalledOnItsOwnQueue() throws {
        let first = TestQueue()
        let second = TestQueue()
        let manual = ManualJob<Int>()
        let recorder = Recorder<Int>()
        manual.job.perform(on: second, then: recorder.handler)
        #expect(second.runNext())
        Job<Void> { controller in
            manual.controller?.finish(with: 4)
            controller.finish()
        }
        .perform(on: first) { _ in }
        try first.run()
        #expect(recorder.count == 0)
        #expect(second.pendingCount == 1)
        try second.run()
        #expect(try recorder.last?.get() == 4)
    }

    @Test func aJobEndedInItsClosureBeforeAnotherRunsInlineThereStillWaitsForItsOwnClosureToReturn() throws {
        let queue = TestQueue()
        let log = LockedValue<[String]>([])
        Job<Void> { controller in
            controller.finish()
            Job.succeeded(2).perform(on: ImmediateQueue()) { _ in log.withValue { $0.append("inline handler") } }
            log.withValue { $0.append("closure returns") }
        }
        .perform(on: queue) { _ in log.withValue { $0.append("handler") } }
        try queue.run()
        #expect(log.value == ["inline handler", "closure returns", "handler"])
    }

    @Test func onADispatchQueueTheHandlerOfAJobEndedInItsClosureRunsOnThatQueueAfterTheClosure() async throws {
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "jobkit.tests.handler-turn")
        queue.setSpecific(key: key, value: "performing")
        let log = LockedValue<[String?]>([])
        let done = DispatchSemaphore(value: 0)
        Job<Int> { controller in
            controller.finish(with: 1)
            log.withValue { $0.append("closure returns") }
        }
        .perform(on: queue) { _ in
            log.withValue { $0.append(DispatchQueue.getSpecific(key: key)) }
            done.signal()
        }
        #expect(await done.signalled(within: 10))
        #expect(log.value == ["closure returns", "performing"])
    }

    @Test func aJobEndedInItsClosureWhileAnotherThreadCancelsItCallsItsHandlerOnce() async throws {
        let rounds = 2_000
        let calls = LockedValue([Int](repeating: 0, count: rounds))
        let group = DispatchGroup()
        for round in 0..<rounds {
            group.enter()
            let handle = Job<Int> { controller in controller.finish(with: round) }
                .perform(on: DispatchQueue.global()) { _ in
                    calls.withValue { $0[round] += 1 }
                    group.leave()
                }
            if round.isMultiple(of: 2) { handle.cancel() }
        }
        #expect(await group.completed(within: 30))
        #expect(calls.value.allSatisfy { $0 == 1 })
    }
}
