import Dispatch
import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing

/// `performAndWait(on:)` blocks its thread, so every wait here is made on
/// a thread of its own (`offThePool`), never on Swift's cooperative
/// threads; the refusals are asked for without waiting
/// (`WaitRefusal.reason(on:)`), and exit tests show what a refused
/// wait prints.
@Suite("A blocking wait for scripts and tools", .timeLimit(.minutes(1)))
struct PerformAndWaitTests {
    @Test func returnsTheValueOfAJobThatCompletesOnAnotherThread() async throws {
        let job = Job<Int> { controller in
            DispatchQueue.global().async { controller.finish(with: 42) }
        }
        let value = try await offThePool(throwing: { try job.performAndWait() })  // allowed: a thread of its own
        #expect(value == 42)
    }

    @Test func throwsTheErrorOfAJobThatFails() async throws {
        let job = Job<Int>.failed(TestError(id: 6)).named("failing")
        let outcome = await offThePool { Result { try job.performAndWait() } }  // allowed: a thread of its own
        #expect(outcome.failure as? TestError == TestError(id: 6))
    }

    @Test func waitsForAJobOnASerialQueueThatTheThreadDoesNotRun() async throws {
        let serial = DispatchQueue(label: "JobKitTests.serial")
        let name = DispatchSpecificKey<String>()
        serial.setSpecific(key: name, value: "serial")
        let job = Job<String?> { controller in controller.finish(with: DispatchQueue.getSpecific(key: name)) }
        // allowed: a thread of its own
        let value = try await offThePool(throwing: { try job.performAndWait(on: serial) })
        #expect(value == "serial")
    }

    @Test func waitsForAJobOnAnImmediateQueueOutsideAnyJob() async throws {
        let value = try await offThePool(throwing: {  // allowed: a thread of its own
            try Job.succeeded(1).map { $0 + 1 }.performAndWait(on: ImmediateQueue())
        })
        #expect(value == 2)
    }

    @Test func aWaitOnAGlobalQueueFromOneOfItsThreadsIsAllowed() async {
        let reason = await offThePool {
            // allowed: a global queue's thread, waited for on a thread of its own
            DispatchQueue.global().sync { WaitRefusal.reason(on: DispatchQueue.global()) }
        }
        #expect(reason == nil)
        #expect(await offThePool { WaitRefusal.reason(on: DispatchQueue.global(qos: .utility)) } == nil)
    }

    @Test func aWaitInsideABodyOnADispatchQueueForAJobOnAnotherQueueIsAllowed() async throws {
        let serial = DispatchQueue(label: "JobKitTests.outer")
        let outer = Job<Int> { controller in
            // allowed: a serial queue's thread waits for a job on the global queues
            controller.complete(with: Result { try Job.succeeded(5).map { $0 * 2 }.performAndWait() })
        }
        // allowed: a thread of its own
        let value = try await offThePool(throwing: { try outer.performAndWait(on: serial) })
        #expect(value == 10)
    }

    // MARK: Refusals

    @Test func refusesInASwiftTask() {
        let reason = WaitRefusal.reason(on: DispatchQueue.global())
        #expect(reason?.contains("performAndWait(on:) was called in a Swift task") == true)
        #expect(reason?.contains("try await job.value(on: queue)") == true)
    }

    @Test func refusesOnATestQueueWhateverTheThread() async {
        let reason = await offThePool { WaitRefusal.reason(on: TestQueue()) }
        #expect(reason?.contains("performAndWait(on:) on a TestQueue") == true)
        #expect(reason?.contains("run(), runNext() or advance(by:)") == true)
    }

    @Test func refusesOnTheThreadRunningTheQueueOrAQueueTargetingIt() async {
        let serial = DispatchQueue(label: "JobKitTests.held")
        let targeting = DispatchQueue(label: "JobKitTests.targeting", target: serial)
        let other = DispatchQueue(label: "JobKitTests.other")
        let reasons = await offThePool {
            // allowed: queues of the test's own, waited for on a thread of its own
            let onIt = serial.sync { WaitRefusal.reason(on: serial) }
            // allowed: as above
            let onATargetingQueue = targeting.sync { WaitRefusal.reason(on: serial) }
            // allowed: as above
            let onAnother = other.sync { WaitRefusal.reason(on: serial) }
            return (onIt, onATargetingQueue, onAnother, WaitRefusal.reason(on: serial))
        }
        #expect(reasons.0?.contains("on the thread running the queue \"JobKitTests.held\"") == true)
        #expect(reasons.1 == reasons.0)
        #expect(reasons.2 == nil)
        #expect(reasons.3 == nil)
    }

    @Test func refusesOnTheMainThreadForTheMainQueueOnly() async {
        let onMain = await withCheckedContinuation { continuation in
            DispatchQueue.main.async {
                continuation.resume(
                    returning: (
                        WaitRefusal.reason(on: DispatchQueue.main), WaitRefusal.reason(on: DispatchQueue.global())
                    ))
            }
        }
        #expect(onMain.0?.contains("was called on the main thread, which runs the main queue") == true)
        #expect(onMain.1 == nil)
        #expect(await offThePool { WaitRefusal.reason(on: DispatchQueue.main) } == nil)
    }

    @Test func refusesInsideWorkAnInlineQueueRunsABodyOrAHandlerIncluded() async {
        let reasons = await offThePool {
            let inBody = LockedValue<String?>(nil)
            let inHandler = LockedValue<String?>(nil)
            let inInlineWork = LockedValue<String?>(nil)
            Job<Int> { controller in
                inBody.setValue(WaitRefusal.reason(on: DispatchQueue.global()))
                controller.finish(with: 1)
            }.perform(on: ImmediateQueue()) { _ in
                inHandler.setValue(WaitRefusal.reason(on: DispatchQueue.global()))
            }
            ImmediateQueue().enqueue { inInlineWork.setValue(WaitRefusal.reason(on: ImmediateQueue())) }
            return [inBody.value, inHandler.value, inInlineWork.value]
        }
        #expect(reasons.count == 3)
        for reason in reasons {
            #expect(reason?.contains("called inside work that an inline queue (ImmediateQueue) runs") == true)
        }
    }

    @Test func aRefusedWaitStopsTheProcessWithItsReason() async {
        let inATask = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            waitingOnATestQueue()
        }
        let printedInATask = String(decoding: inATask?.standardErrorContent ?? [], as: UTF8.self)
        #expect(printedInATask.contains("JobKit: performAndWait(on:) was called in a Swift task"))

        let onAThread = await #expect(processExitsWith: .failure, observing: [\.standardErrorContent]) {
            await offThePool { waitingOnATestQueue() }
        }
        let printedOnAThread = String(decoding: onAThread?.standardErrorContent ?? [], as: UTF8.self)
        #expect(printedOnAThread.contains("JobKit: performAndWait(on:) on a TestQueue: a TestQueue runs work only"))
    }
}

/// A wait no thread should make, from synchronous code (so that the compiler
/// lets an exit test's async body call it).
private func waitingOnATestQueue() {
    _ = try? Job.succeeded(1).performAndWait(on: TestQueue())  // allowed: refused, in a child process
}
