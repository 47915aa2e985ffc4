import JobKit
import JobKitTesting
import Testing

/// A continuation a task waits on, which the test resumes when it chooses:
/// what the queue sees of real I/O, or of any work it does not run.
private final class OutsideWork: Sendable {
    private let continuation = LockedValue<CheckedContinuation<Void, Never>?>(nil)

    /// Suspends the calling task until ``finish()``.
    func wait() async {
        await withCheckedContinuation { continuation.setValue($0) }
    }

    /// Resumes the waiting task; `false` if none waits yet.
    @discardableResult
    func finish() -> Bool {
        guard let waiting = continuation.withValue({ $0.take() }) else { return false }
        waiting.resume()
        return true
    }
}

/// The state of a task asleep on the queue's clock until the virtual
/// instant `deadline`.
private func sleepingUntil(_ deadline: Duration) -> TestQueue.UnfinishedTask.State {
    .asleep(until: .init(offset: deadline))  // allowed: a virtual deadline, nothing waits for it
}

/// The state of a task asleep on the queue's clock until `seconds` of
/// virtual time.
private func sleepingUntil(seconds: Int64) -> TestQueue.UnfinishedTask.State {
    sleepingUntil(.seconds(seconds))
}

@Suite("TestQueue.unfinishedTasks", .timeLimit(.minutes(1)))
struct UnfinishedTasksTests {
    @Test func aTaskAsleepOnTheClockSaysUntilWhen() throws {
        let queue = TestQueue()
        queue.schedule(name: "poll", priority: nil) {
            try await queue.clock.sleep(for: .seconds(3))  // allowed: queue.clock, virtual time
        }
        try queue.run()

        let tasks = queue.unfinishedTasks
        #expect(tasks.map(\.number) == [1])
        #expect(tasks.map(\.name) == ["poll"])
        #expect(tasks.map(\.state) == [sleepingUntil(seconds: 3)])
        #expect(tasks.map(\.description) == [#"task 1 "poll": asleep on queue.clock until 3.0 seconds"#])
        try queue.advance(by: .seconds(3))
        #expect(queue.unfinishedTasks.isEmpty)
    }

    /// The silent case: the queue is idle, `run()` returned, and the task
    /// is suspended on work the queue does not run.
    @Test func aTaskSuspendedOnOutsideWorkIsStrandedWhileTheQueueIsIdle() async throws {
        let queue = TestQueue()
        let outside = OutsideWork()
        let finished = LockedValue(false)
        queue.schedule(name: "fetch", priority: nil) {
            await outside.wait()
            finished.setValue(true)
        }
        try queue.run()

        #expect(queue.isIdle)
        #expect(queue.unfinishedTasks.map(\.state) == [.stranded])
        #expect(
            queue.unfinishedTasks.map(\.description) == [
                #"task 1 "fetch": suspended outside the queue: nothing left on it can resume the task"#
            ])
        #expect(outside.finish())
        // The continuation comes back to the queue as an item, from this thread.
        try queue.run()
        #expect(finished.value)
        #expect(queue.unfinishedTasks.isEmpty)
    }

    /// The escape the README warns of: code that sleeps on the continuous
    /// clock instead of the injected one.
    @Test func aTaskInARealSleepIsStranded() throws {
        let queue = TestQueue()
        let task = queue.schedule(name: "debounce", priority: nil) {
            try await Task.sleep(for: .seconds(3600))  // allowed: cancelled, never waited for
        }
        try queue.advance(by: .seconds(3600))
        #expect(queue.isIdle)
        #expect(queue.unfinishedTasks.map(\.state) == [.stranded])
        // Its cancelled sleep comes back to the queue later, from another
        // thread; the test does not wait for it.
        task.cancel()
    }

    @Test func whileTheQueueHoldsOtherWorkAnUnsleepingTaskIsWaiting() throws {
        let queue = TestQueue()
        let outside = OutsideWork()
        queue.schedule { await outside.wait() }
        queue.schedule(name: "tick", priority: nil) {
            try await queue.clock.sleep(for: .seconds(5))  // allowed: queue.clock, virtual time
        }
        #expect(queue.unfinishedTasks.map(\.state) == [.notStarted, .notStarted])
        #expect(
            queue.unfinishedTasks.map(\.description).last
                == #"task 2 "tick": not started: its first item is due on the queue"#)

        try queue.run()
        #expect(queue.unfinishedTasks.map(\.state) == [.waiting, sleepingUntil(seconds: 5)])
        #expect(
            queue.unfinishedTasks.map(\.description).first
                == "task 1: suspended, not on queue.clock, while the queue holds work")
        try queue.advance(by: .seconds(5))
        #expect(queue.unfinishedTasks.map(\.state) == [.stranded])

        outside.finish()
        try queue.run()
        #expect(queue.unfinishedTasks.isEmpty)
    }

    @Test func aChildTasksSleepCountsAsItsParents() throws {
        let queue = TestQueue()
        queue.schedule(name: "parent", priority: nil) {
            async let child: Void = queue.clock.sleep(for: .seconds(2))  // allowed: queue.clock, virtual time
            try await queue.clock.sleep(for: .seconds(7))  // allowed: queue.clock, virtual time
            try await child
        }
        try queue.run()
        #expect(queue.unfinishedTasks.map(\.state) == [sleepingUntil(seconds: 2)])
        try queue.advance(by: .seconds(2))
        #expect(queue.unfinishedTasks.map(\.state) == [sleepingUntil(seconds: 7)])
        try queue.advance(by: .seconds(5))
        #expect(queue.unfinishedTasks.isEmpty)
    }

    @Test func aCancelledSleepNoLongerCounts() throws {
        let queue = TestQueue()
        let outside = OutsideWork()
        let task = queue.schedule {
            try? await queue.clock.sleep(for: .seconds(60))  // allowed: queue.clock, virtual time
            await outside.wait()
        }
        try queue.run()
        #expect(queue.unfinishedTasks.map(\.state) == [sleepingUntil(seconds: 60)])
        task.cancel()
        #expect(queue.unfinishedTasks.map(\.state) == [.waiting], "no longer asleep: its continuation is due")
        try queue.run()
        #expect(queue.unfinishedTasks.map(\.state) == [.stranded])
        outside.finish()
        try queue.run()
        #expect(queue.unfinishedTasks.isEmpty)
    }

    /// Tasks of many deadlines, started and woken in an order drawn from
    /// each seed: after each step, exactly those whose deadline is still
    /// ahead are unfinished, each asleep until its own deadline.
    @Test(arguments: 0..<20 as Range<UInt64>)
    func exactlyTheSleepersNotYetWokenAreUnfinished(seed: UInt64) throws {
        let queue = TestQueue(ordering: .shuffled(seed: seed))
        let deadlines = (1...12).map { Duration.seconds($0 % 4 + 1) }
        for (index, deadline) in deadlines.enumerated() {
            queue.schedule(name: "\(index)", priority: nil) {
                try await queue.clock.sleep(for: deadline)  // allowed: queue.clock, virtual time
            }
        }
        try queue.run()
        for now in 0...4 {
            if now > 0 { try queue.advance(by: .seconds(1)) }
            let unfinished = queue.unfinishedTasks
            let expected = deadlines.indices.filter { deadlines[$0] > .seconds(now) }
            #expect(unfinished.map(\.name) == expected.map { "\($0)" })
            #expect(unfinished.map(\.state) == expected.map { sleepingUntil(deadlines[$0]) })
        }
    }

    @Test func tasksEndedEveryWayAreNoLongerListed() throws {
        let queue = TestQueue()
        queue.schedule { throw TestError() }
        queue.scheduleDetached(name: "detached", priority: nil) {
            try await queue.clock.sleep(for: .seconds(1))  // allowed: queue.clock, virtual time
        }
        queue.schedule { try await queue.clock.sleep(for: .seconds(1)) }  // allowed: queue.clock, virtual time
            .cancel()  // before it starts
        Job<Void>.task { throw TestError() }.perform(on: queue) { _ in }
        #expect(queue.unfinishedTasks.map(\.state) == [.notStarted, .notStarted, .notStarted])
        try queue.run()
        #expect(queue.unfinishedTasks.map(\.name) == ["detached"])
        #expect(queue.unfinishedTasks.map(\.number) == [2])
        try queue.advance(by: .seconds(1))
        #expect(queue.unfinishedTasks.isEmpty)
    }

    @Test func tasksNotStartedByTheQueueAreNotItsToKnow() throws {
        let queue = TestQueue()
        let finished = LockedValue(false)
        Task(executorPreference: queue) {
            try await queue.clock.sleep(for: .seconds(1))  // allowed: queue.clock, virtual time
            finished.setValue(true)
        }
        try queue.run()
        #expect(queue.unfinishedTasks.isEmpty)
        try queue.advance(by: .seconds(1))
        #expect(finished.value)
    }
}

/// The stall report of a `Job.task` performed on a `TestQueue` says where
/// its task waits.
@Suite("Job.task's stall report on a TestQueue", .timeLimit(.minutes(1)))
struct JobTaskStallReportTests {
    @Test func saysWhenTheTaskIsAsleepOnTheClock() throws {
        let queue = TestQueue()
        let handle = Job.task {
            try await queue.clock.sleep(for: .seconds(10))  // allowed: queue.clock, virtual time
        }
        .named("poll")
        .perform(on: queue) { _ in }
        try queue.run()

        #expect(handle.snapshot().detail == "its task is asleep on queue.clock until 10.0 seconds")
        #expect(
            handle.stallReport()?.contains("poll (running, its task is asleep on queue.clock until 10.0 seconds)")
                == true)
        try queue.advance(by: .seconds(10))
        #expect(handle.stallReport() == nil)
    }

    @Test func namesTheTaskStrandedOutsideTheQueue() throws {
        let queue = TestQueue()
        let outside = OutsideWork()
        let outcome = LockedValue<Result<Void, any Error>?>(nil)
        let profile = Job.task { await outside.wait() }.named("profile")
        let handle = Job.group([profile, .succeeded]).named("load").perform(on: queue) { outcome.setValue($0) }
        try queue.run()

        #expect(queue.isIdle)
        let report = handle.stallReport() ?? ""
        #expect(
            report.hasPrefix(
                "1 job has not completed:\n  load: group 1/2 ▸ profile (running, its task is suspended outside "
                    + "the queue: nothing left on it can resume the task)\n"),
            "\(report)")
        outside.finish()
        try queue.run()
        #expect(throws: Never.self) { try outcome.value?.get() }
        #expect(handle.stallReport() == nil)
    }

    /// A detail of the job's own shows on a test queue as in the app.
    @Test func aDetailOfTheJobsOwnWins() throws {
        let queue = TestQueue()
        let handle = Job.task {
            try await queue.clock.sleep(for: .seconds(10))  // allowed: queue.clock, virtual time
        }
        .named("upload") { "3 of 9 MB sent" }
        .perform(on: queue) { _ in }
        try queue.run()
        #expect(handle.snapshot().detail == "3 of 9 MB sent")
        handle.cancel()
        try queue.run()
        #expect(queue.unfinishedTasks.isEmpty)
    }

    /// On a queue that does not start tasks, the job says nothing of its task.
    @Test func onOtherQueuesTheJobHasNoDetail() {
        let handle = Job.task {
            try await Task.sleep(for: .seconds(3600))  // allowed: cancelled, never waited for
        }
        .perform(on: ImmediateQueue()) { _ in }
        #expect(handle.snapshot().detail == nil)
        #expect(handle.snapshot().state.isPending)
        handle.cancel()
    }
}
