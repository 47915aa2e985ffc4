import Dispatch
import JobKit
import JobKitTesting
import Testing

@Suite("ManualTaskScheduler", .timeLimit(.minutes(1)))
struct ManualTaskSchedulerTests {
    @Test func capturesOperationsWithoutRunningThem() {
        let scheduler = ManualTaskScheduler()
        let runs = LockedValue(0)
        scheduler.schedule { runs.withValue { $0 += 1 } }
        #expect(scheduler.pendingCount == 1)
        #expect(!scheduler.isIdle)
        #expect(runs.value == 0)
    }

    @Test func runAllRunsEachOperationToCompletionInOrder() async {
        let scheduler = ManualTaskScheduler()
        let log = LockedValue<[String]>([])
        for index in 0..<3 {
            scheduler.schedule {
                log.withValue { $0.append("start \(index)") }
                for _ in 0..<10 { await Task.yield() }  // room for the next one to start early
                log.withValue { $0.append("end \(index)") }
            }
        }
        await scheduler.runAll()
        #expect(log.value == ["start 0", "end 0", "start 1", "end 1", "start 2", "end 2"])
        #expect(scheduler.isIdle)
    }

    @Test func operationsScheduledWhileRunningWaitForTheNextCall() async {
        let scheduler = ManualTaskScheduler()
        let log = LockedValue<[String]>([])
        scheduler.schedule {
            log.withValue { $0.append("first") }
            scheduler.schedule { log.withValue { $0.append("second") } }
        }
        await scheduler.runAll()
        #expect(log.value == ["first"])
        #expect(scheduler.pendingCount == 1)
        await scheduler.runAll()
        #expect(log.value == ["first", "second"])
        #expect(scheduler.isIdle)
    }

    @Test func runUntilIdleRunsOperationsScheduledByOperations() async throws {
        let scheduler = ManualTaskScheduler()
        let steps = LockedValue(0)
        @Sendable func step() {
            let count = steps.withValue { value -> Int in
                value += 1
                return value
            }
            if count < 5 { scheduler.schedule { step() } }
        }
        scheduler.schedule { step() }
        try await scheduler.runUntilIdle()
        #expect(steps.value == 5)
        #expect(scheduler.isIdle)
    }

    @Test func runUntilIdleStopsAnEndlessReschedulingLoop() async {
        let scheduler = ManualTaskScheduler()
        @Sendable func forever() { scheduler.schedule { forever() } }
        scheduler.schedule { forever() }
        let error = await #expect(throws: ManualTaskScheduler.RunawayError.self) {
            try await scheduler.runUntilIdle(maxRounds: 10)
        }
        #expect(error?.rounds == 10)
        #expect(error?.pendingCount == 1)
        #expect(error?.description.contains("maxRounds") == true)
        #expect(error?.description.contains("raise it with runUntilIdle(maxRounds:)") == true)
    }

    @Test func cancellingACapturedHandleMeansItNeverRuns() async {
        let scheduler = ManualTaskScheduler()
        let runs = LockedValue(0)
        let cancelled = scheduler.schedule { runs.withValue { $0 += 1 } }
        scheduler.schedule { runs.withValue { $0 += 10 } }
        cancelled.cancel()
        #expect(scheduler.pendingCount == 1)
        await scheduler.runAll()
        #expect(runs.value == 10)
        // Bounded: a handle's value ignores the awaiting task's
        // cancellation, so the suite's time limit could not end this wait.
        await #expect(throws: CancellationError.self) {
            try await withTimeLimit(.seconds(10)) { try await cancelled.value }
        }
    }

    @Test func handleReturnsTheValueOnceTheOperationRan() async throws {
        let scheduler = ManualTaskScheduler()
        let handle = scheduler.schedule { 5 }
        let waiter = Task { try await handle.value }
        await scheduler.runAll()
        #expect(try await withTimeLimit(.seconds(10)) { try await waiter.value } == 5)
        #expect(try await handle.value == 5)
    }

    @Test func handleReportsTheOperationsError() async {
        let scheduler = ManualTaskScheduler()
        let handle = scheduler.schedule { () async throws -> Int in throw TestError() }
        await scheduler.runAll()
        await #expect(throws: TestError.self) {
            try await withTimeLimit(.seconds(10)) { try await handle.value }
        }
    }

    @Test func cancellingARunningOperationCancelsItsTask() async {
        let scheduler = ManualTaskScheduler()
        let (started, didStart) = AsyncStream<Void>.makeStream()
        let handle = scheduler.schedule { () async throws -> Int in
            didStart.yield()
            return try await Job<Int>.never.value  // ends only by cancellation
        }
        async let run: Void = scheduler.runAll()
        _ = await started.first { true }
        handle.cancel()
        await run
        await #expect(throws: CancellationError.self) { try await handle.value }
    }

    @Test func recordsCallsAndRunsWithTheirPriorityAndDetachment() async throws {
        let scheduler = ManualTaskScheduler()
        let detached = scheduler.scheduleDetached(name: "sync", priority: .background) { Task.basePriority }
        let main = scheduler.schedule(name: nil, priority: .high) { @MainActor in
            MainActor.assertIsolated()
            return Task.basePriority
        }
        #expect(scheduler.calls == [.detached(name: "sync", priority: .background), .scheduled(priority: .high)])
        await scheduler.runAll()
        #expect(try await detached.value == .background)
        #expect(try await main.value == .high)
    }

    @Test func operationsCanBeScheduledAndCancelledFromManyThreads() async {
        let scheduler = ManualTaskScheduler()
        let runs = LockedValue(0)
        DispatchQueue.concurrentPerform(iterations: 1000) { index in
            let handle = scheduler.schedule { runs.withValue { $0 += 1 } }
            if index.isMultiple(of: 2) { handle.cancel() }
        }
        #expect(scheduler.pendingCount == 500)
        #expect(scheduler.calls.count == 1000)
        await scheduler.runAll()
        #expect(runs.value == 500)
    }
}
