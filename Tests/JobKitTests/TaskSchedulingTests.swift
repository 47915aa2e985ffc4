import JobKit
import JobKitTesting
import Testing

private enum Context {
    @TaskLocal static var requestID: String?
}

@Suite("DefaultTaskScheduler", .timeLimit(.minutes(1)))
struct DefaultTaskSchedulerTests {
    let scheduler = DefaultTaskScheduler()

    @Test func runsTheOperationAndTheHandleReturnsItsValue() async throws {
        let handle = scheduler.schedule(name: "answer", priority: nil) { 6 * 7 }
        #expect(try await handle.value == 42)
    }

    @Test func theHandleReportsTheThrownError() async {
        let handle = scheduler.scheduleDetached(name: nil, priority: nil) { () async throws -> Int in
            throw TestError(id: 5)
        }
        #expect(await handle.result.failure as? TestError == TestError(id: 5))
        await #expect(throws: TestError(id: 5)) { try await handle.value }
    }

    @Test func scheduledTasksInheritTaskLocalsAndDetachedOnesDoNot() async throws {
        let (inherited, detached) = Context.$requestID.withValue("r-1") {
            (
                scheduler.schedule { Context.requestID },
                scheduler.scheduleDetached(name: nil, priority: nil) { Context.requestID }
            )
        }
        #expect(try await inherited.value == "r-1")
        #expect(try await detached.value == nil)
    }

    @Test(arguments: [TaskPriority.background, .low, .medium, .high])
    func startsTasksWithTheGivenPriority(priority: TaskPriority) async throws {
        let scheduled = scheduler.schedule(name: nil, priority: priority) { Task.basePriority }
        let detached = scheduler.scheduleDetached(name: nil, priority: priority) { Task.basePriority }
        #expect(try await scheduled.value == priority)
        #expect(try await detached.value == priority)
    }

    @Test func cancellingTheHandleCancelsTheTask() async throws {
        let (started, didStart) = AsyncStream<Void>.makeStream()
        let handle = scheduler.schedule { () async throws -> Int in
            didStart.yield()
            return try await Job<Int>.never.value  // ends only by cancellation
        }
        _ = await started.first { true }
        handle.cancel()
        // Bounded: awaiting the task's result ignores the suite's time limit.
        let result = try await withTimeLimit(.seconds(10)) { await handle.result }
        #expect(isCancellation(result.failure))
    }

    @Test func runsAMainActorOperationOnTheMainActor() async throws {
        let handle = scheduler.schedule { @MainActor in
            MainActor.assertIsolated()
            return "main"
        }
        #expect(try await handle.value == "main")
    }

    @Test func namesTheTaskWhereTheOSSupportsIt() async throws {
        guard #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) else { return }
        let scheduled = scheduler.schedule(name: "uploader", priority: nil) { Task.name }
        let detached = scheduler.scheduleDetached(name: "cleaner", priority: nil) { Task.name }
        #expect(try await scheduled.value == "uploader")
        #expect(try await detached.value == "cleaner")
    }
}

@Suite("ScheduledTask", .timeLimit(.minutes(1)))
struct ScheduledTaskTests {
    @Test func wrapsATask() async throws {
        let task = Task<Int, any Error> { 3 }
        #expect(try await ScheduledTask(task).value == 3)
    }

    @Test func customHandleForwardsCancelAndResult() async throws {
        let cancels = LockedValue(0)
        let handle = ScheduledTask<String>(
            cancel: { cancels.withValue { $0 += 1 } },
            result: { .success("custom") }
        )
        handle.cancel()
        #expect(cancels.value == 1)
        #expect(try await handle.value == "custom")
    }

    @Test func cancellingAFinishedTaskChangesNothing() async throws {
        let handle = DefaultTaskScheduler().schedule { 1 }
        #expect(try await handle.value == 1)
        handle.cancel()
        #expect(try await handle.value == 1)
    }
}
