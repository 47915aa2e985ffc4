import JobKit
import JobKitTesting
import Synchronization

/// Case 13: one test of the debounced search of JobKitTesting's article
/// "Async code in virtual time", in virtual time on a `TestQueue` against
/// the same test written with real tasks, the
/// continuous clock and a real-time wait with a margin. Each runs `runs`
/// times, while two neighbouring tasks of the process do CPU work in 250 ms
/// slices on the cooperative pool (one thread per core), as a suite's
/// heavier tests do: wall time per run, and how many runs failed.
enum DebounceCase {
    static func run(runs: Int) throws -> CaseReport {
        let neighbours = Neighbours()
        defer { neighbours.stop() }
        var failures = [0, 0]
        var times: [[Double]] = [[], []]
        for _ in 0..<runs {
            for variant in 0..<2 {
                let start = now()
                let passed = variant == 0 ? try virtualTime() : try blockingAwait { try await realTime() }
                times[variant].append(Double(now() - start) / 1e3)
                if !passed { failures[variant] += 1 }
            }
        }
        guard failures[0] == 0 else { throw BenchmarkFailure("the virtual-time test failed \(failures[0]) times") }
        let rows = [
            Row(name: "TestQueue as clock and scheduler (virtual time)", samples: times[0]),
            Row(
                name: "ContinuousClock, real tasks, `Task.sleep` and a 50 ms margin (hand-written)",
                samples: times[1]
            ),
        ]
        // Real time ÷ virtual time, pair by pair: a factor too large for
        // the table's "JobKit ÷ this" column.
        let factor = zip(times[1], times[0]).map { $0 / $1 }.median
        return CaseReport(
            title: "13. A debounce test, \(runs) runs each, beside two CPU-bound neighbours",
            unit: "µs/run",
            rows: rows,
            notes: [
                "Failed runs: \(failures[0]) of \(runs) in virtual time, \(failures[1]) of \(runs) in real time.",
                "Longest run: " + format((times[0].max() ?? 0) / 1e3, digits: 2) + " ms in virtual time, "
                    + format((times[1].max() ?? 0) / 1e3, digits: 0) + " ms in real time.",
                "The real-time test takes " + format(factor, digits: 0)
                    + " times as long as the virtual-time one (median of pairs).",
            ]
        )
    }

    /// The article's test: keys every 100 ms, one search 300 ms after the
    /// last, on one `TestQueue`.
    static func virtualTime() throws -> Bool {
        let queue = TestQueue()
        let searched = LockedValue<[String]>([])
        let model = SearchModel(clock: queue.clock, scheduler: queue) { query in
            searched.withValue { $0.append(query) }
            return [query]
        }
        for query in ["s", "sw", "swi"] {
            model.queryChanged(query)
            try queue.advance(by: .milliseconds(100))
        }
        guard searched.value.isEmpty else { return false }
        try queue.advance(by: .milliseconds(200))
        return searched.value == ["swi"] && model.results == ["swi"]
    }

    /// The same test as it is written without JobKit: real tasks, real
    /// sleeps, and a wait of 300 ms and a 50 ms margin after the last key.
    static func realTime() async throws -> Bool {
        let searched = LockedValue<[String]>([])
        let model = SearchModel { query in
            searched.withValue { $0.append(query) }
            return [query]
        }
        for query in ["s", "sw", "swi"] {
            model.queryChanged(query)
            try await Task.sleep(for: .milliseconds(100))
        }
        guard searched.value.isEmpty else { return false }
        try await Task.sleep(for: .milliseconds(250))
        return searched.value == ["swi"] && model.results == ["swi"]
    }
}

/// Two tasks that keep the cooperative pool busy in 250 ms slices of CPU
/// work, yielding between slices, until stopped.
private final class Neighbours: Sendable {
    private let stopped = Atomic(false)

    init() {
        for _ in 0..<2 {
            Task.detached { [self] in
                var state: UInt64 = 1
                while !stopped.load(ordering: .relaxed) {
                    let end = now() + 250_000_000
                    while now() < end { state = state &* 6_364_136_223_846_793_005 &+ 1 }
                    await Task.yield()
                }
                withExtendedLifetime(state) {}
            }
        }
    }

    func stop() {
        stopped.store(true, ordering: .relaxed)
    }
}

/// The debounced search model of JobKitTesting's article "Async code in
/// virtual time", the code under test.
private final class SearchModel: Sendable {
    private let clock: any Clock<Duration>
    private let scheduler: any TaskScheduling
    private let search: @Sendable (String) async throws -> [String]
    private let state = Mutex<(results: [String], waiting: ScheduledTask<Void>?)>(([], nil))

    init(
        clock: any Clock<Duration> = ContinuousClock(),
        scheduler: any TaskScheduling = DefaultTaskScheduler(),
        search: @escaping @Sendable (String) async throws -> [String]
    ) {
        (self.clock, self.scheduler, self.search) = (clock, scheduler, search)
    }

    var results: [String] { state.withLock { $0.results } }

    func queryChanged(_ query: String) {
        var task: ScheduledTask<Void>? = scheduler.schedule { [self] in
            try await clock.sleep(for: .milliseconds(300))
            let results = try await search(query)
            state.withLock { $0.results = results }
        }
        state.withLock { swap(&$0.waiting, &task) }
        task?.cancel()
    }
}
