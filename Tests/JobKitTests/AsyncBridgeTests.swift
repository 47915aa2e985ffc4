import Dispatch
import JobKit
import JobKitTesting
import Testing

@Suite("Job.value", .timeLimit(.minutes(1)))
struct AsyncValueTests {
    @Test func returnsTheJobsValue() async throws {
        #expect(try await Job.succeeded(42).value == 42)
    }

    @Test func throwsTheJobsError() async {
        await #expect(throws: TestError(id: 7)) {
            try await Job<Int>.failed(TestError(id: 7)).value
        }
    }

    @Test func performsOnTheGivenQueue() async throws {
        let key = DispatchSpecificKey<String>()
        let queue = DispatchQueue(label: "value-on-queue")
        queue.setSpecific(key: key, value: "the queue")
        let job = Job<String?> { controller in
            controller.finish(with: DispatchQueue.getSpecific(key: key))
        }
        #expect(try await job.value(on: queue) == "the queue")
    }

    @Test func awaitsAJobThatCompletesOnAnotherThread() async throws {
        let job = Job<String> { controller in
            DispatchQueue.global().async { controller.finish(with: "later") }
        }
        #expect(try await job.value == "later")
    }

    @Test func abandonedJobThrowsAbandoned() async {
        // Bounded: without the abandonment report this await would never
        // end; it fails with TimeLimitExceeded instead.
        await #expect(throws: JobError.abandoned) {
            try await withTimeLimit(.seconds(10)) {
                try await Job<Int> { _ in }.value(on: ImmediateQueue())
            }
        }
    }

    @Test func aQueueThatDropsTheJobEndsTheAwaitWithAbandoned() async {
        let job = Job<Int> { controller in controller.finish(with: 1) }
        // Bounded: a lost body would otherwise leave the task suspended.
        await #expect(throws: JobError.abandoned) {
            try await withTimeLimit(.seconds(10)) { try await job.value(on: DiscardingQueue()) }
        }
    }

    @Test func cancellingAfterTheJobWasEnqueuedEndsTheAwaitAndTheBodyNeverRuns() async throws {
        let queue = TestQueue()
        let starts = LockedValue(0)
        let job = Job<Int> { controller in
            starts.withValue { $0 += 1 }
            controller.finish(with: 1)
        }
        let task = Task { try await job.value(on: queue) }
        // The body is enqueued once the task has handed its continuation
        // over; bounded, as the task runs on another thread.
        try await withTimeLimit(.seconds(10)) {
            while queue.pendingCount == 0 { await Task.yield() }
        }
        task.cancel()
        await #expect(throws: CancellationError.self) {
            try await withTimeLimit(.seconds(10)) { try await task.value }
        }
        try queue.run()
        #expect(starts.value == 0)
    }

    @Test func cancellingTheAwaitingTaskCancelsTheJobOnce() async throws {
        let cancels = LockedValue(0)
        let (started, didStart) = AsyncStream<Void>.makeStream()
        let job = Job<Int> { controller in
            controller.onCancel { cancels.withValue { $0 += 1 } }
            controller.onCancel { withExtendedLifetime(controller) {} }  // keeps it running
            didStart.yield()
        }
        let task = Task { try await job.value }
        _ = await started.first { true }
        task.cancel()
        task.cancel()
        // Bounded: awaiting another task's value ignores the suite's time
        // limit, and only the cancel can end this job.
        await #expect(throws: CancellationError.self) {
            try await withTimeLimit(.seconds(10)) { try await task.value }
        }
        #expect(cancels.value == 1)
    }

    @Test func alreadyCancelledTaskNeverStartsTheJobAndThrows() async throws {
        let queue = TestQueue()
        let starts = LockedValue(0)
        let job = Job<Int> { controller in
            starts.withValue { $0 += 1 }
            controller.finish(with: 1)
        }
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await job.value(on: queue)
        }
        // Bounded: a job that started anyway would wait on the queue, which
        // runs only after this await.
        await #expect(throws: CancellationError.self) {
            try await withTimeLimit(.seconds(10)) { try await task.value }
        }
        try queue.run()
        #expect(starts.value == 0)
    }

    @Test func cancellingAfterTheJobFinishedChangesNothing() async throws {
        let cancels = LockedValue(0)
        let job = Job<Int> { controller in
            controller.onCancel { cancels.withValue { $0 += 1 } }
            controller.finish(with: 3)
        }
        let task = Task { try await job.value(on: ImmediateQueue()) }
        #expect(try await task.value == 3)
        task.cancel()
        #expect(cancels.value == 0)
    }

    @Test func cancelRacingWithStartIsNeverLostAndRunsOnCancelAtMostOnce() async throws {
        for _ in 0..<500 {
            let starts = LockedValue(0)
            let cancels = LockedValue(0)
            let job = Job<Int> { controller in
                starts.withValue { $0 += 1 }
                controller.onCancel { cancels.withValue { $0 += 1 } }
                controller.onCancel { withExtendedLifetime(controller) {} }  // never finishes
            }
            let task = Task { try await job.value }
            task.cancel()
            // Never hangs: the job never finishes by itself, so only the
            // cancel can end the wait.
            await #expect(throws: CancellationError.self) {
                try await withTimeLimit(.seconds(10)) { try await task.value }
            }
            #expect(cancels.value <= starts.value)
            #expect(starts.value <= 1)
        }
    }

    @Test func cancelRacingWithCompletionEndsTheAwaitOnceWithEither() async throws {
        for round in 0..<300 {
            let (started, didStart) = AsyncStream<Job<Int>.Controller>.makeStream()
            let job = Job<Int> { controller in didStart.yield(controller) }
            let task = Task { try await job.value }
            // Bounded: the body runs on the global queue.
            let controller = try await withTimeLimit(.seconds(10)) {
                try #require(await started.first { _ in true })
            }
            // The job finishes on one thread while the task is cancelled on
            // another: either may win, and the task resumes once.
            DispatchQueue.global().async { controller.finish(with: round) }
            task.cancel()
            // Bounded: a resume lost between the two would hang here.
            do {
                #expect(try await withTimeLimit(.seconds(10)) { try await task.value } == round)
            } catch {
                #expect(error is CancellationError)
            }
        }
    }

    @Test func releasesWhatThePerformanceHeldOnceItReturns() async throws {
        weak var weakCancelObject: Tracked?
        do {
            let cancelObject = Tracked()
            weakCancelObject = cancelObject
            let job = Job<Int> { controller in
                controller.onCancel { withExtendedLifetime(cancelObject) {} }
                controller.finish(with: 1)
            }
            #expect(try await job.value(on: ImmediateQueue()) == 1)
        }
        // Released with the job's body and with the performance's onCancel
        // blocks: nothing of the performance outlives it.
        #expect(weakCancelObject == nil)
    }
}

@Suite("Job with an async body", .timeLimit(.minutes(1)))
struct AsyncBodyTests {
    @Test func finishesWithTheBodysValue() async throws {
        let job = Job.task { try await Job.succeeded(20).value + 1 }
        #expect(try await job.value == 21)
    }

    @Test func failsWithTheBodysError() async {
        let job = Job<Int>.task { throw TestError(id: 2) }
        await #expect(throws: TestError(id: 2)) { try await job.value }
    }

    @Test func runsNothingUntilPerformedAndStartsOneTaskPerPerformance() async throws {
        let scheduler = ManualTaskScheduler()
        let runs = LockedValue(0)
        let job = Job.task(scheduler: scheduler) { runs.withValue { $0 += 1 } }
        #expect(scheduler.pendingCount == 0)
        job.perform(on: ImmediateQueue()) { _ in }
        job.perform(on: ImmediateQueue()) { _ in }
        #expect(scheduler.pendingCount == 2)
        #expect(runs.value == 0)
        await scheduler.runAll()
        #expect(runs.value == 2)
    }

    @Test func startsItsTaskThroughTheSchedulerWithThePriority() async throws {
        let scheduler = RecordingTaskScheduler()
        let job = Job.task(scheduler: scheduler, priority: .high) { Task.basePriority }
        #expect(try await job.value == .high)
        #expect(scheduler.calls == [.scheduled(priority: .high)])
    }

    @Test func reportsOnTheJobsQueueWhenTheTaskRan() async throws {
        let scheduler = ManualTaskScheduler()
        let queue = TestQueue()
        let recorder = Recorder<String>()
        Job.task(scheduler: scheduler) { "done" }.perform(on: queue, then: recorder.handler)
        try queue.run()
        await scheduler.runAll()
        #expect(recorder.count == 0)  // the handler waits on the queue
        try queue.run()
        #expect(try recorder.last?.get() == "done")
    }

    @Test func cancellingTheJobBeforeItsTaskRanMeansTheBodyNeverRuns() async throws {
        let scheduler = ManualTaskScheduler()
        let runs = LockedValue(0)
        let recorder = Recorder<Void>()
        let handle = Job.task(scheduler: scheduler) { runs.withValue { $0 += 1 } }
            .perform(on: ImmediateQueue(), then: recorder.handler)
        handle.cancel()
        await scheduler.runAll()
        #expect(runs.value == 0)
        #expect(scheduler.pendingCount == 0)
        #expect(isCancellation(recorder.last?.failure))
    }

    @Test func cancellingTheJobCancelsItsRunningTask() async throws {
        let (started, didStart) = AsyncStream<Void>.makeStream()
        let (ended, didEnd) = AsyncStream<Bool>.makeStream()
        let recorder = Recorder<Int>()
        let job = Job<Int>.task {
            didStart.yield()
            // Job.never ends only by cancellation: of this task.
            do {
                _ = try await Job<Int>.never.value
                didEnd.yield(false)
            } catch {
                didEnd.yield(Task.isCancelled && isCancellation(error))
            }
            return 1
        }
        let handle = job.perform(on: ImmediateQueue(), then: recorder.handler)
        _ = await started.first { true }
        handle.cancel()
        #expect(await ended.first { _ in true } == true)
        #expect(isCancellation(recorder.last?.failure))
        #expect(recorder.count == 1)
    }

    @Test func bodyCanRunOnTheMainActor() async throws {
        let job = Job.task { @MainActor in
            MainActor.assertIsolated()
            return 8
        }
        #expect(try await job.value == 8)
    }

    /// The controller initializer and `Job.task` both take a trailing
    /// closure; which one is chosen is written at the call site.
    @Test func controllerInitializerAndTaskBothTypeCheck() async throws {
        let withController = Job { controller in controller.finish(with: 1) }
        let withDollarZero = Job<Int> { $0.finish(with: 2) }
        let voidController = Job<Void> { controller in controller.finish() }
        let asyncBody = Job.task { try await Job.succeeded(3).value }
        let syncBody = Job.task { 4 }
        let voidAsync = Job<Void>.task {}
        #expect(try await withController.value == 1)
        #expect(try await withDollarZero.value == 2)
        try await voidController.value
        #expect(try await asyncBody.value == 3)
        #expect(try await syncBody.value == 4)
        try await voidAsync.value
    }
}
