import Dispatch
import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing

/// The thread the caller runs on, from synchronous code (`Thread.current`
/// is not available to async code).
private func currentThread() -> ObjectIdentifier {
    ObjectIdentifier(Thread.current)
}

/// A default actor, which runs on the executor its callers prefer.
private actor Counter {
    private(set) var count = 0

    func increment(thread: LockedValue<Set<ObjectIdentifier>>) -> Int {
        thread.withValue { _ = $0.insert(currentThread()) }
        count += 1
        return count
    }
}

@Suite("TestQueue as a task executor", .timeLimit(.minutes(1)))
struct TaskExecutorTests {
    /// A task is a run of items, one waiting at a time, each counted by
    /// `pendingCount` and run by `runNext()`. (How many a `Task.yield()`
    /// takes is the runtime's business: two on Swift 6.3, the yield and
    /// the return to the caller.) The doc example shows a task that runs
    /// only when the queue runs.
    @Test func aTaskIsARunOfItemsOneWaitingAtATime() throws {
        let queue = TestQueue()
        let steps = LockedValue(0)
        Task(executorPreference: queue) {
            for _ in 0..<3 {
                steps.withValue { $0 += 1 }
                await Task.yield()
            }
        }
        var seen: [Int] = []
        while queue.pendingCount > 0 && seen.count < 100 {
            #expect(queue.pendingCount == 1)
            #expect(queue.runNext())
            seen.append(steps.value)
        }
        #expect(seen.first == 1)
        #expect(seen == seen.sorted())
        #expect(steps.value == 3)
        #expect(seen.count >= 4)  // the start, and at least one per yield
        #expect(queue.isIdle)
        #expect(!queue.runNext())
    }

    /// Starts tasks "a" and "b" on `queue`, each logging three steps with
    /// a yield after each, runs the queue, and returns the log.
    private func interleaving(on queue: TestQueue) throws -> [String] {
        let log = LockedValue<[String]>([])
        for name in ["a", "b"] {
            Task(executorPreference: queue) {
                for step in 0..<3 {
                    log.withValue { $0.append("\(name)\(step)") }
                    await Task.yield()
                }
            }
        }
        try queue.run()
        #expect(queue.isIdle)
        return log.value
    }

    @Test func yieldsInterleaveTasksInFIFOOrder() throws {
        #expect(try interleaving(on: TestQueue()) == ["a0", "b0", "a1", "b1", "a2", "b2"])
    }

    /// Child tasks, `async let` and default actors inherit the preference:
    /// each child is an item of the queue, and all of it runs on the
    /// thread that runs the queue.
    @Test func childTasksAsyncLetAndDefaultActorsRunOnTheQueue() throws {
        let queue = TestQueue()
        let threads = LockedValue<Set<ObjectIdentifier>>([])
        let log = LockedValue<[String]>([])
        let counter = Counter()
        Task(executorPreference: queue) {
            await withTaskGroup(of: Void.self) { group in
                for index in 0..<3 {
                    group.addTask {
                        threads.withValue { _ = $0.insert(currentThread()) }
                        log.withValue { $0.append("child \(index)") }
                    }
                }
            }
            async let letValue = {
                threads.withValue { _ = $0.insert(currentThread()) }
                return "async let"
            }()
            let value = await letValue
            log.withValue { $0.append(value) }
            let count = await counter.increment(thread: threads)
            log.withValue { $0.append("actor \(count)") }
        }
        #expect(queue.runNext())  // the task, up to waiting for its children
        #expect(queue.pendingCount == 3)
        #expect(log.value == [])
        try queue.run()
        #expect(log.value == ["child 0", "child 1", "child 2", "async let", "actor 1"])
        #expect(threads.value == [currentThread()])
        #expect(queue.isIdle)
    }

    /// A continuation resumed from another thread sends the task back to
    /// the queue: the resume enqueues an item and runs nothing. Many
    /// tasks, resumed from many threads at once, each come back once.
    @Test(.onThreadOfItsOwn) func continuationsResumedFromOtherThreadsComeBackAsItems() async throws {
        for _ in 0..<50 {
            let queue = TestQueue()
            let continuations = LockedValue<[CheckedContinuation<Int, Never>]>([])
            let results = LockedValue<[Int]>([])
            let threads = LockedValue<Set<ObjectIdentifier>>([])
            let tasks = 8
            for _ in 0..<tasks {
                Task(executorPreference: queue) {
                    let value = await withCheckedContinuation { continuation in
                        continuations.withValue { $0.append(continuation) }
                    }
                    threads.withValue { _ = $0.insert(currentThread()) }
                    results.withValue { $0.append(value) }
                }
            }
            try queue.run()
            #expect(continuations.value.count == tasks)
            let resumed = DispatchGroup()
            for (index, continuation) in continuations.value.enumerated() {
                DispatchQueue.global().async(group: resumed) { continuation.resume(returning: index) }
            }
            #expect(await resumed.completed(within: 10))
            #expect(results.value == [])
            #expect(queue.pendingCount == tasks)
            try queue.run()
            #expect(results.value.sorted() == Array(0..<tasks))
            #expect(threads.value == [currentThread()])
            #expect(queue.isIdle)
        }
    }

    @Test func maxStepsStopsATaskThatYieldsForever() throws {
        let queue = TestQueue(maxSteps: 100)
        let task = queue.schedule(name: "poller", priority: nil) {
            while !Task.isCancelled { await Task.yield() }
        }
        let error = #expect(throws: TestQueue.RunawayError.self) { try queue.run() }
        #expect(error?.steps == 100)
        #expect(error?.pendingCount == 1)
        #expect(error?.unfinishedTasks.map(\.name) == ["poller"])
        #expect(
            error?.description.hasSuffix(
                "TestQueue(maxSteps:)\n  task 1 \"poller\": suspended, not on queue.clock, while the queue holds work"
            ) == true)
        task.cancel()
        try queue.run()
        #expect(queue.isIdle)
    }

    /// Shuffled order draws among a task's continuation and the rest of
    /// the work due, so seeds give different interleavings, each task's
    /// own steps stay in program order, and a seed gives its order again.
    @Test func shuffledOrderInterleavesTasksBySeed() throws {
        var orders = Set<[String]>()
        for seed in 0..<50 as Range<UInt64> {
            let order = try interleaving(on: TestQueue(ordering: .shuffled(seed: seed)))
            #expect(order.filter { $0.hasPrefix("a") } == ["a0", "a1", "a2"])
            #expect(order.filter { $0.hasPrefix("b") } == ["b0", "b1", "b2"])
            #expect(try interleaving(on: TestQueue(ordering: .shuffled(seed: seed))) == order)
            orders.insert(order)
        }
        #expect(orders.count > 5)
    }

    /// Two tasks write a shared result after an await: the one started
    /// last writes last in FIFO order, which passes; `exploreOrderings`
    /// finds an order where the first one's answer lands last, and its
    /// seed finds it again.
    @Test func exploreOrderingsFindsARaceBetweenTasks() throws {
        @Sendable func lastAnswer(on queue: TestQueue) throws -> String? {
            let shown = LockedValue<String?>(nil)
            for query in ["s", "sw"] {
                Task(executorPreference: queue) {
                    await Task.yield()  // the request
                    shown.setValue(query)
                }
            }
            try queue.run()
            return shown.value
        }
        #expect(try lastAnswer(on: TestQueue()) == "sw")
        let failure = #expect(throws: OrderingFailure.self) {
            try exploreOrderings(seeds: 0..<100) { queue in
                let shown = try lastAnswer(on: queue)
                if shown != "sw" { throw StaleAnswer(shown: shown) }
            }
        }
        #expect(failure?.error is StaleAnswer)
        let seed = try #require(failure?.seed)
        #expect(try lastAnswer(on: TestQueue(ordering: .shuffled(seed: seed))) == "s")
    }
}

/// The answer of an older query shown after a newer one.
private struct StaleAnswer: Error {
    let shown: String?
}

@Suite("TestQueue as a task scheduler", .timeLimit(.minutes(1)))
struct TestQueueSchedulingTests {
    @TaskLocal static var label = "none"

    @Test func scheduledTasksRunWhenTheQueueRuns() async throws {
        let queue = TestQueue()
        let ran = LockedValue(false)
        let task = queue.schedule { () -> Int in
            ran.setValue(true)
            return 42
        }
        #expect(!ran.value)
        #expect(queue.pendingCount == 1)
        try queue.run()
        #expect(ran.value)
        #expect(try await task.value == 42)
        #expect(queue.isIdle)
    }

    @Test func scheduleInheritsTaskLocalsAndScheduleDetachedDoesNot() async throws {
        let queue = TestQueue()
        let (attached, detached) = Self.$label.withValue("outer") {
            (
                queue.schedule(name: "attached", priority: nil) { Self.label },
                queue.scheduleDetached(name: "detached", priority: nil) { Self.label }
            )
        }
        try queue.run()
        #expect(try await attached.value == "outer")
        #expect(try await detached.value == "none")
    }

    @Test func scheduledTasksAreNamed() async throws {
        guard #available(macOS 26.0, iOS 26.0, tvOS 26.0, watchOS 26.0, visionOS 26.0, *) else { return }
        let queue = TestQueue()
        let attached = queue.schedule(name: "attached", priority: nil) { Task.name }
        let detached = queue.scheduleDetached(name: "detached", priority: nil) { Task.name }
        try queue.run()
        #expect(try await attached.value == "attached")
        #expect(try await detached.value == "detached")
    }

    @Test func aTaskCancelledBeforeItRunsSeesItsCancellation() async throws {
        let queue = TestQueue()
        let task = queue.schedule { () -> Bool in Task.isCancelled }
        task.cancel()
        try queue.run()
        #expect(try await task.value)
    }

    /// The tasks a scheduled task starts through the queue run on it too.
    @Test func tasksScheduledByScheduledTasksRunOnTheQueue() async throws {
        let queue = TestQueue()
        let log = LockedValue<[String]>([])
        queue.schedule {
            log.withValue { $0.append("outer") }
            queue.schedule { log.withValue { $0.append("inner") } }
            await Task.yield()
            log.withValue { $0.append("outer again") }
        }
        try queue.run()
        #expect(log.value == ["outer", "inner", "outer again"])
        #expect(queue.isIdle)
    }
}
