import Dispatch
import JobKit
import Synchronization

/// Cases 21 and 22: a one-shot source, and a job whose performances
/// share one run, against the code they replace.
enum SharingCases {
    static let queue = DispatchQueue.global()

    // MARK: - 21. Source

    /// `n` sources, each waited for by two performances on
    /// `DispatchQueue.global()` and then finished from this thread, against
    /// a hand-written pending value: callbacks under a lock, each called
    /// through `async` once the value comes.
    static func source(n: Int, schedule: Schedule) throws -> CaseReport {
        let handWritten = "callbacks under a lock, each called through async (hand-written)"
        let variants = [
            Variant(name: "JobKit `JobSource`") { n in
                let sources = (0..<n).map { _ in JobSource<Int>() }
                let sum = Atomic<Int>(0)
                try waitingForAll(2 * n) { group in
                    for source in sources {
                        for _ in 0..<2 {
                            source.job.perform(on: queue) { outcome in
                                sum.add((try? outcome.get()) ?? 0, ordering: .relaxed)
                                group.leave()
                            }
                        }
                    }
                    for (index, source) in sources.enumerated() { source.finish(with: index) }
                }
                try check(sum.load(ordering: .relaxed), n: n)
            },
            Variant(name: handWritten) { n in
                let sources = (0..<n).map { _ in HandWrittenPending<Int>() }
                let sum = Atomic<Int>(0)
                try waitingForAll(2 * n) { group in
                    for source in sources {
                        for _ in 0..<2 {
                            source.wait(on: queue) { value in
                                sum.add(value, ordering: .relaxed)
                                group.leave()
                            }
                        }
                    }
                    for (index, source) in sources.enumerated() { source.finish(with: index) }
                }
                try check(sum.load(ordering: .relaxed), n: n)
            },
        ]
        return CaseReport(
            title: "21. \(n) sources, each waited for by 2 performances on DispatchQueue.global(), then finished",
            unit: "ns/source",
            rows: try measureInterleaved(variants, n: n, schedule: schedule)
        )
    }

    // MARK: - 22. Shared

    /// `n` shared no-op jobs, each performed twice at once on
    /// `DispatchQueue.global()` (the second shares the first's run, or
    /// starts one if the first's has completed), against the in-flight
    /// table an app writes by hand: under a lock, a request going on
    /// gathers callbacks, each called through `async` when it completes.
    static func shared(n: Int, schedule: Schedule) throws -> CaseReport {
        let handWritten = "in-flight callbacks under a lock, each called through async (hand-written)"
        let variants = [
            Variant(name: "JobKit `shared()`") { n in
                let jobs = (0..<n).map { _ in TimingCases.noOp.shared() }
                try waitingForAll(2 * n) { group in
                    for job in jobs {
                        for _ in 0..<2 { job.perform(on: queue) { _ in group.leave() } }
                    }
                }
            },
            Variant(name: handWritten) { n in
                let requests = (0..<n).map { _ in HandWrittenInFlight() }
                try waitingForAll(2 * n) { group in
                    for request in requests {
                        for _ in 0..<2 { request.perform(on: queue) { group.leave() } }
                    }
                }
            },
        ]
        return CaseReport(
            title: "22. \(n) shared no-op jobs, each performed twice at once on DispatchQueue.global()",
            unit: "ns/job",
            rows: try measureInterleaved(variants, n: n, schedule: schedule)
        )
    }

    /// Runs `start` with a group entered `count` times, and waits, at most
    /// ten minutes, until it was left as often.
    private static func waitingForAll(_ count: Int, _ start: (DispatchGroup) -> Void) throws {
        let group = DispatchGroup()
        for _ in 0..<count { group.enter() }
        start(group)
        guard group.wait(timeout: .now() + .seconds(600)) == .success else {
            throw BenchmarkFailure("timed out waiting for the performances")
        }
    }

    /// Throws unless `sum` is what two performances of each of `n` sources
    /// finished with their index add up to.
    private static func check(_ sum: Int, n: Int) throws {
        guard sum == n * (n - 1) else { throw BenchmarkFailure("the performances saw \(sum), not \(n * (n - 1))") }
    }
}

/// A value that is not there yet, as GCD code writes one: the callbacks
/// waiting for it, kept under a lock, each called through `async` once
/// it comes; one that comes after it is called at once, through `async`.
private final class HandWrittenPending<Value: Sendable>: Sendable {
    private struct State {
        var value: Value?
        var callbacks: [(DispatchQueue, @Sendable (Value) -> Void)] = []
    }

    // JobKit's `Lock`: a `Mutex`, which Thread Sanitizer (the smoke tests
    // run under it) can see order the critical sections.
    private let state = Lock(State())

    func wait(on queue: DispatchQueue, _ callback: @escaping @Sendable (Value) -> Void) {
        let value = state.withLock { state -> Value? in
            if state.value == nil { state.callbacks.append((queue, callback)) }
            return state.value
        }
        if let value { queue.async { callback(value) } }
    }

    func finish(with value: Value) {
        let callbacks = state.withLock { state in
            state.value = value
            defer { state.callbacks = [] }
            return state.callbacks
        }
        for (queue, callback) in callbacks { queue.async { callback(value) } }
    }
}

/// A request that callers share while it is in flight, as GCD code
/// writes it: the first caller starts it through `async`, later ones add
/// their callbacks, and its completion calls each through `async`.
private final class HandWrittenInFlight: Sendable {
    // JobKit's `Lock`, as above.
    private let waiting = Lock<[@Sendable () -> Void]?>(nil)

    func perform(on queue: DispatchQueue, _ callback: @escaping @Sendable () -> Void) {
        let starts = waiting.withLock { waiting -> Bool in
            if waiting == nil {
                waiting = [callback]
                return true
            }
            waiting!.append(callback)
            return false
        }
        guard starts else { return }
        queue.async {
            // The request: a no-op.
            let callbacks = self.waiting.withLock { waiting in
                defer { waiting = nil }
                return waiting ?? []
            }
            for callback in callbacks { queue.async(execute: callback) }
        }
    }
}
