import Dispatch
import JobKit
import JobKitTesting
import TestSupport
import Testing

@Suite("always", .timeLimit(.minutes(1)))
struct AlwaysTests {
    /// What a cleanup saw, in order: each outcome as text.
    private final class Cleanups: Sendable {
        private let seen = LockedValue<[String]>([])

        var all: [String] { seen.value }

        func record<T>(_ outcome: Result<T, any Error>) {
            let text =
                switch outcome {
                case .success(let value): "\(value)"
                case .failure(let error) where error is CancellationError: "cancelled"
                case .failure(let error): "\(error)"
                }
            seen.withValue { $0.append(text) }
        }
    }

    @Test func theCleanupSeesASuccessOrAFailureOnceBeforeTheJobReportsItUnchanged() throws {
        let cleanups = Cleanups()
        let order = LockedValue<[String]>([])
        let queue = TestQueue()
        Job.succeeded(7).always { outcome in
            cleanups.record(outcome)
            order.withValue { $0.append("cleanup") }
        }
        .perform(on: queue) { outcome in order.withValue { $0.append("reported \((try? outcome.get()) ?? 0)") } }
        Job<Int>.failed(TestError(id: 3)).always { cleanups.record($0) }.perform(on: queue) { outcome in
            order.withValue { $0.append("failed \((outcome.failure as? TestError)?.id ?? 0)") }
        }
        try queue.run()
        #expect(cleanups.all == ["7", "TestError(id: 3)"])
        #expect(order.value == ["cleanup", "reported 7", "failed 3"])
    }

    @Test func aCancelWhileItRunsCancelsTheJobAndCleansUpOnce() throws {
        let inner = ManualJob<Int>()
        let cleanups = Cleanups()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        let handle = inner.job.always { cleanups.record($0) }.perform(on: queue, then: recorder.handler)
        try queue.run()
        handle.cancel()
        #expect(inner.cancelCount == 1)
        #expect(cleanups.all == ["cancelled"])
        inner.finish(with: 1)
        try queue.run()
        #expect(cleanups.all == ["cancelled"])
        #expect(isCancellation(recorder.last?.failure))
        #expect(recorder.count == 1)
    }

    @Test func aJobCancelledBeforeItStartedCleansUpNothing() throws {
        let inner = ManualJob<Int>()
        let cleanups = Cleanups()
        let queue = TestQueue()
        let handle = inner.job.always { cleanups.record($0) }.always(then: { outcome in
            cleanups.record(outcome)
            return .succeeded
        })
        .perform(on: queue) { _ in }
        handle.cancel()
        try queue.run()
        #expect(inner.startCount == 0)
        #expect(cleanups.all.isEmpty)
        #expect(queue.isIdle)
    }

    @Test func aJobCancelledAfterAlwaysStartedButBeforeItsOwnTurnCleansUpNothing() throws {
        let inner = ManualJob<Int>()
        let cleanups = Cleanups()
        let queue = TestQueue()
        let handle = inner.job.always { cleanups.record($0) }.perform(on: queue) { _ in }
        #expect(queue.runNext())  // the body of always, which enqueues the job's
        handle.cancel()
        try queue.run()
        #expect(inner.startCount == 0)
        #expect(cleanups.all.isEmpty)
    }

    @Test func aZipThatFailsBeforeItsCleanedUpJobStartedCleansUpNothing() throws {
        // The zip starts the first job, whose body waits for its turn on the
        // queue; the second fails at once and the zip cancels the first.
        let opened = ManualJob<Int>()
        let cleanups = Cleanups()
        let closing = ManualJob<Void>()
        let session = opened.job.always(then: { outcome in
            cleanups.record(outcome)
            return closing.job
        })
        let zipped = Job.zip(session, Job<Int>.failed(TestError(id: 1)))
        #expect(outcome(of: zipped)?.failure as? TestError == TestError(id: 1))
        #expect(opened.startCount == 0)
        #expect(cleanups.all.isEmpty)
        #expect(closing.startCount == 0)
    }

    @Test func aTimeoutInsideOrOutsideItCleansUpWithWhatHappened() throws {
        let cleanups = Cleanups()
        let queue = TestQueue()
        Job<Int>.never.always { cleanups.record($0) }.timeout(after: .seconds(5)).perform(on: queue) { _ in }
        Job<Int>.never.timeout(after: .seconds(5)).always { cleanups.record($0) }.perform(on: queue) { _ in }
        try queue.advance(by: .seconds(5))
        #expect(cleanups.all == ["cancelled", "the job timed out and was cancelled"])
        #expect(queue.isIdle)
    }

    @Test func aJobThatDropsItsControllerIsCleanedUpAsAbandoned() {
        let cleanups = Cleanups()
        let dropping = Job<Int> { _ in }
        #expect(outcome(of: dropping.always { cleanups.record($0) })?.failure as? JobError == .abandoned)
        #expect(cleanups.all == ["\(JobError.abandoned)"])
    }

    @Test func everyPerformanceCleansUpOnce() throws {
        let cleanups = LockedValue(0)
        let job = Job.succeeded(1).always { _ in cleanups.withValue { $0 += 1 } }
        for _ in 0..<3 { _ = outcome(of: job) }
        #expect(cleanups.value == 3)
    }

    @Test func theThenFormReportsOnlyOnceItsCleanupJobCompletedAndKeepsTheOutcome() throws {
        let cleanup = ManualJob<Void>()
        let cleanups = Cleanups()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        Job.succeeded(7).always(then: { outcome in
            cleanups.record(outcome)
            return cleanup.job
        })
        .perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(cleanups.all == ["7"])
        #expect(cleanup.startCount == 1)
        #expect(recorder.count == 0)
        cleanup.fail(with: TestError(id: 9))
        try queue.run()
        // The cleanup's failure does not change the outcome.
        #expect(try recorder.last?.get() == 7)
    }

    @Test func aCancelCompletesTheThenFormAtOnceAndItsCleanupJobRunsToItsEnd() throws {
        let inner = ManualJob<Int>()
        let cleanup = ManualJob<Void>()
        let cleanups = Cleanups()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        let handle = inner.job.always(then: { outcome in
            cleanups.record(outcome)
            return cleanup.job
        })
        .perform(on: queue, then: recorder.handler)
        try queue.run()
        handle.cancel()
        try queue.run()
        #expect(isCancellation(recorder.last?.failure))
        #expect(cleanups.all == ["cancelled"])
        #expect(cleanup.startCount == 1)
        #expect(cleanup.cancelCount == 0)
        #expect(cleanup.finish())
        try queue.run()
        #expect(recorder.count == 1)
    }

    @Test func aCancelDuringTheCleanupJobDoesNotCancelIt() throws {
        let cleanup = ManualJob<Void>()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        let handle = Job.succeeded(1).always(then: { _ in cleanup.job }).perform(on: queue, then: recorder.handler)
        try queue.run()
        handle.cancel()
        try queue.run()
        #expect(isCancellation(recorder.last?.failure))
        #expect(cleanup.cancelCount == 0)
        #expect(cleanup.finish())
    }

    @Test func aTrailingClosureThatReturnsAJobPicksTheThenForm() throws {
        let cleanup = ManualJob<Void>()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        Job.succeeded(1).always { _ in cleanup.job }.perform(on: queue, then: recorder.handler)
        try queue.run()
        // The cleanup job was performed, and is waited for.
        #expect(cleanup.startCount == 1)
        #expect(recorder.count == 0)
        cleanup.finish()
        try queue.run()
        #expect(try recorder.last?.get() == 1)
    }

    @Test func aCleanupJobThatRunsShowsInTheSnapshot() throws {
        let cleanup = ManualJob<Void>()
        let queue = TestQueue()
        let handle = Job.succeeded(1).always(then: { _ in cleanup.job.named("closing the session") })
            .named("upload")
            .perform(on: queue) { _ in }
        try queue.run()
        #expect(handle.snapshot().title == "upload")
        #expect(handle.snapshot().children.map(\.line) == ["closing the session (running)"])
        cleanup.finish()
        try queue.run()
    }

    @Test(.onThreadOfItsOwn) func cleansUpOnceWhenACancelRacesTheJobsCompletionOnManyThreads() async throws {
        for _ in 0..<300 {
            let cleanups = LockedValue(0)
            let thenCleanups = LockedValue(0)
            let inner = ManualJob<Int>()
            let done = DispatchSemaphore(value: 0)
            let handle = inner.job.always { _ in cleanups.withValue { $0 += 1 } }
                .always(then: { _ in
                    thenCleanups.withValue { $0 += 1 }
                    return .succeeded
                })
                .perform(on: ImmediateQueue()) { _ in done.signal() }
            race {
                handle.cancel()
            } _: {
                inner.finish(with: 1)
            }
            #expect(await done.signalled(within: 10))
            #expect(cleanups.value == 1)
            #expect(thenCleanups.value == 1)
        }
    }
}
