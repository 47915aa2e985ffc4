import Dispatch
import JobKit
import JobKitTesting
import Testing

@Suite("RecordingTaskScheduler", .timeLimit(.minutes(1)))
struct RecordingTaskSchedulerTests {
    @Test func recordsEveryCallInOrder() async throws {
        let scheduler = RecordingTaskScheduler()
        scheduler.schedule(name: "load", priority: .high) {}
        scheduler.scheduleDetached(name: "clean", priority: .low) {}
        scheduler.schedule {}
        try await scheduler.waitForTasks()
        #expect(
            scheduler.calls == [
                .scheduled(name: "load", priority: .high),
                .detached(name: "clean", priority: .low),
                .scheduled(),
            ]
        )
        #expect(
            scheduler.calls.map(\.description) == [
                #"schedule(name: "load", priority: .high)"#,
                #"scheduleDetached(name: "clean", priority: .low)"#,
                "schedule()",
            ])
    }

    @Test func startsRealTasksWithThePriorityAskedFor() async throws {
        let scheduler = RecordingTaskScheduler()
        let handle = scheduler.scheduleDetached(name: nil, priority: .background) { Task.basePriority }
        #expect(try await handle.value == .background)
    }

    @Test func waitForTasksReturnsAtOnceWhenNothingRuns() async throws {
        let scheduler = RecordingTaskScheduler()
        try await scheduler.waitForTasks(timeout: .zero)
        #expect(scheduler.runningCount == 0)
    }

    @Test func waitsForTasksStartedByItsTasks() async throws {
        let scheduler = RecordingTaskScheduler()
        let (gate, openGate) = AsyncStream<Void>.makeStream()
        let log = LockedValue<[String]>([])
        scheduler.schedule {
            scheduler.schedule {
                _ = await gate.first { true }
                log.withValue { $0.append("child") }
            }
            log.withValue { $0.append("parent") }
        }
        // The child cannot finish before the gate opens: waiting must time out.
        let timeout = await #expect(throws: RecordingTaskScheduler.WaitTimeout.self) {
            try await scheduler.waitForTasks(timeout: .milliseconds(50))
        }
        #expect((timeout?.runningCount ?? 0) >= 1)
        openGate.yield()
        try await scheduler.waitForTasks(timeout: .seconds(30))
        #expect(log.value.sorted() == ["child", "parent"])
        #expect(scheduler.runningCount == 0)
    }

    @Test func timeoutErrorNamesHowManyTasksAreStillRunning() async throws {
        let scheduler = RecordingTaskScheduler()
        let (gate, openGate) = AsyncStream<Void>.makeStream(bufferingPolicy: .unbounded)
        for _ in 0..<2 {
            scheduler.schedule { _ = await gate.first { true } }
        }
        let error = await #expect(throws: RecordingTaskScheduler.WaitTimeout.self) {
            try await scheduler.waitForTasks(timeout: .milliseconds(20))
        }
        #expect(error?.runningCount == 2)
        #expect(error?.description == "2 tasks still running after 0.02 seconds")
        openGate.finish()  // ends every wait on the gate
        try await scheduler.waitForTasks(timeout: .seconds(30))
    }

    @Test func everyWaiterResumesWhenTheLastTaskFinishes() async throws {
        let scheduler = RecordingTaskScheduler()
        let (gate, openGate) = AsyncStream<Void>.makeStream()
        scheduler.schedule { _ = await gate.first { true } }
        let waiters = (0..<3).map { _ in Task { try await scheduler.waitForTasks(timeout: .seconds(30)) } }
        openGate.yield()
        for waiter in waiters { try await waiter.value }
        #expect(scheduler.runningCount == 0)
    }

    @Test func cancellingTheWaiterThrowsCancellationError() async throws {
        let scheduler = RecordingTaskScheduler()
        let (gate, openGate) = AsyncStream<Void>.makeStream()
        scheduler.schedule { _ = await gate.first { true } }
        let waiter = Task { try await scheduler.waitForTasks(timeout: .seconds(30)) }
        waiter.cancel()
        await #expect(throws: CancellationError.self) { try await waiter.value }
        openGate.yield()
        try await scheduler.waitForTasks(timeout: .seconds(30))
    }

    @Test func countsTasksStartedFromManyThreadsAtOnce() async throws {
        let scheduler = RecordingTaskScheduler()
        let runs = LockedValue(0)
        DispatchQueue.concurrentPerform(iterations: 200) { _ in
            scheduler.schedule {
                runs.withValue { $0 += 1 }
                scheduler.scheduleDetached(name: nil, priority: nil) { runs.withValue { $0 += 1 } }
            }
        }
        try await scheduler.waitForTasks(timeout: .seconds(60))
        #expect(runs.value == 400)
        #expect(scheduler.calls.count == 400)
        #expect(scheduler.runningCount == 0)
    }
}
