import JobKit
import JobKitTesting

/// Case 5: synchronous jobs on the test doubles. A million-job sequence on
/// `ImmediateQueue` must run in linear time with a flat stack.
enum TestQueueCases {
    static func run(million: Int, schedule: Schedule) throws -> CaseReport {
        let tenth = max(million / 10, 1)
        let step = Job<Void> { $0.finish() }
        let jobs = Array(repeating: step, count: million)
        let tenthJobs = Array(jobs.prefix(tenth))

        // Skipped when profiling one variant (`--only`).
        let stackDepth = schedule.only == nil ? try sequenceStackDepth(count: million) : 0

        // Each variant runs its own fixed size: `n` below only scales the
        // per-item figure.
        let variants = [
            Variant(name: "`Job.sequence` of \(million) on ImmediateQueue") { _ in
                try performImmediately(Job.sequence(jobs))
            },
            Variant(name: "`Job.sequence` of \(tenth) on ImmediateQueue (×10)") { _ in
                for _ in 0..<10 { try performImmediately(Job.sequence(tenthJobs)) }
            },
            Variant(name: "`Job.group` of \(million) on ImmediateQueue") { _ in
                try performImmediately(Job.group(jobs))
            },
            Variant(name: "TestQueue: enqueue \(million) items, then `run()`") { n in
                try enqueueThenRun(n, on: TestQueue(maxSteps: .max))
            },
            Variant(name: "`Job.sequence` of \(million) on TestQueue") { _ in
                let queue = TestQueue(maxSteps: .max)
                let outcome = LockedValue<Result<Void, any Error>?>(nil)
                Job.sequence(jobs).perform(on: queue) { outcome.setValue($0) }
                try queue.run()
                guard let result = outcome.value else { throw BenchmarkFailure("sequence on TestQueue did not finish") }
                try result.get()
            },
            Variant(name: "TestQueue(ordering: .shuffled(seed: 1)): enqueue \(million) items, then `run()`") { n in
                try enqueueThenRun(n, on: TestQueue(ordering: .shuffled(seed: 1), maxSteps: .max))
            },
            Variant(name: "TestQueue: enqueue \(million) delayed items, cancel half, then `advance(by:)`") { n in
                try enqueueCancelThenAdvance(n, on: TestQueue(maxSteps: .max))
            },
        ]
        var rows = try measureInterleaved(variants, n: million, schedule: schedule)
        for index in rows.indices { rows[index].ratio = nil }
        guard rows.count == variants.count else {
            return CaseReport(title: "5. (profiling: \(rows.count) variant)", unit: "ns/job", rows: rows)
        }
        let linearity = (median: rows[0].median / rows[1].median, minimum: rows[0].minimum / rows[1].minimum)
        let itemsPerSecond = 1e9 / rows[3].median
        let shuffledItemsPerSecond = 1e9 / rows[5].median
        let delayedItemsPerSecond = 1e9 / rows[6].median
        let sleepers = try sleepingTasks(count: tenth, rounds: max(schedule.rounds, 1))
        return CaseReport(
            title: "5. \(million) synchronous jobs on the test queues",
            unit: "ns/job",
            rows: rows,
            notes: [
                "Linear time: per-job time of one sequence of \(million) ÷ ten of \(tenth) = "
                    + format(linearity.median, digits: 2) + " (medians), " + format(linearity.minimum, digits: 2)
                    + " (minimums); 1.00 is linear.",
                "Flat stack: the deepest step of a \(million)-step sequence ran \(stackDepth) bytes below "
                    + "the first one.",
                "TestQueue throughput: " + format(itemsPerSecond / 1e6, digits: 2) + " million items/s in FIFO order, "
                    + format(shuffledItemsPerSecond / 1e6, digits: 2) + " million shuffled, "
                    + format(delayedItemsPerSecond / 1e6, digits: 2) + " million delayed (half of them cancelled).",
                "Tasks on `queue.clock`: \(tenth) tasks asleep for a second wake in one `advance(by:)` in "
                    + format(sleepers.wake * 1e3, digits: 1) + " ms, "
                    + format(Double(tenth * sleepers.itemsPerWake) / sleepers.wake / 1e6, digits: 2)
                    + " million items/s (\(sleepers.itemsPerWake) items a wake: the sleep's and the task's); "
                    + "starting them and putting them to sleep took "
                    + format(sleepers.start * 1e3, digits: 1) + " ms (medians of \(max(schedule.rounds, 1)) rounds).",
            ]
        )
    }

    /// Enqueues `n` items that count themselves on `queue`, runs it, and
    /// throws unless every item ran.
    static func enqueueThenRun(_ n: Int, on queue: TestQueue) throws {
        let counter = Counter()
        for _ in 0..<n { queue.enqueue { counter.increment() } }
        try queue.run()
        guard counter.value == n else { throw BenchmarkFailure("TestQueue ran \(counter.value) of \(n)") }
    }

    /// Enqueues `n` items that count themselves on `queue`, due over a
    /// second (many at the same millisecond), cancels every other one,
    /// advances the clock past them all, and throws unless exactly the
    /// others ran.
    static func enqueueCancelThenAdvance(_ n: Int, on queue: TestQueue) throws {
        let counter = Counter()
        var handles: [DelayedWork] = []
        handles.reserveCapacity(n)
        for index in 0..<n {
            handles.append(queue.enqueue(after: .milliseconds(index % 1_000)) { counter.increment() })
        }
        for index in stride(from: 0, to: n, by: 2) { handles[index].cancel() }
        try queue.advance(by: .seconds(1))
        guard counter.value == n / 2, queue.isIdle else {
            throw BenchmarkFailure("TestQueue ran \(counter.value) of \(n / 2) delayed items")
        }
    }

    /// Starts `count` tasks on a test queue that each sleep a second on
    /// `queue.clock`, runs the queue until they all sleep, and wakes them
    /// with one `advance(by:)`, `rounds` times. Returns the medians of the
    /// seconds taken to start them and to wake them, and the items one
    /// wake runs (counted apart, on a few tasks whose deadline has
    /// passed). Throws unless every task woke and left the queue idle.
    static func sleepingTasks(count: Int, rounds: Int) throws -> (start: Double, wake: Double, itemsPerWake: Int) {
        var starts: [Double] = []
        var wakes: [Double] = []
        for _ in 0..<rounds {
            let queue = TestQueue(maxSteps: .max)
            let clock = queue.clock
            let counter = Counter()
            let start = now()
            for _ in 0..<count {
                queue.schedule {
                    try await clock.sleep(for: .seconds(1))
                    counter.increment()
                }
            }
            try queue.run()
            let asleep = now()
            guard counter.value == 0, queue.pendingCount == count else {
                throw BenchmarkFailure("\(queue.pendingCount) of \(count) tasks asleep on the clock")
            }
            try queue.advance(by: .seconds(1))
            let woken = now()
            guard counter.value == count, queue.isIdle else {
                throw BenchmarkFailure("\(counter.value) of \(count) tasks woke on the clock")
            }
            starts.append(Double(asleep - start) / 1e9)
            wakes.append(Double(woken - asleep) / 1e9)
        }
        // Items per wake: tasks whose deadline has passed sleep until an
        // item due now, so `runNext()` counts what a wake runs.
        let queue = TestQueue()
        let tasks = 100
        for _ in 0..<tasks {
            queue.schedule { try await queue.clock.sleep(until: queue.clock.now) }
        }
        for _ in 0..<tasks { queue.runNext() }
        var items = 0
        while queue.runNext() { items += 1 }
        return (starts.median, wakes.median, items / tasks)
    }

    /// Performs `job` on an `ImmediateQueue`, so it completes before this
    /// returns; throws its error, or when it did not complete.
    static func performImmediately<T>(_ job: Job<T>) throws {
        let outcome = LockedValue<Result<T, any Error>?>(nil)
        job.perform(on: ImmediateQueue()) { outcome.setValue($0) }
        guard let result = outcome.value else { throw BenchmarkFailure("job did not complete on ImmediateQueue") }
        _ = try result.get()
    }

    /// How far below the first step the deepest step of a `count`-step
    /// synchronous sequence ran, in bytes. Throws if the stack grew with
    /// the sequence (more than 256 KiB).
    static func sequenceStackDepth(count: Int) throws -> Int {
        let addresses = LockedValue<(top: UInt, lowest: UInt)?>(nil)
        let step = Job<Void> { controller in
            let address = currentStackAddress()
            addresses.withValue { value in
                value = (value?.top ?? address, min(value?.lowest ?? address, address))
            }
            controller.finish()
        }
        try performImmediately(Job.sequence(Array(repeating: step, count: count)))
        guard let (top, lowest) = addresses.value else { throw BenchmarkFailure("no step ran") }
        let depth = Int(top - min(top, lowest))
        guard depth < 256 * 1024 else {
            throw BenchmarkFailure("the stack grew by \(depth) bytes over \(count) synchronous steps")
        }
        return depth
    }
}

/// A counter touched from one thread at a time (the thread that runs the
/// test queue), kept behind a lock so the compiler can check it.
final class Counter: Sendable {
    private let box = LockedValue(0)

    var value: Int { box.value }

    func increment() {
        box.withValue { $0 += 1 }
    }
}

/// The address of a local variable: how deep the stack is right now.
@inline(never)
func currentStackAddress() -> UInt {
    var marker = 0
    return withUnsafeMutablePointer(to: &marker) { UInt(bitPattern: $0) }
}
