import Dispatch
import JobKit
import Synchronization

/// Cases 15 to 17: race, every outcome and zip, against the code they
/// replace.
enum CombinatorCases {
    static let queue = DispatchQueue.global()

    /// A job whose body finishes at once.
    static let noOp = TimingCases.noOp

    // MARK: - 15. Race

    /// `n` races of two no-op jobs, all at once: each race's first job to
    /// finish wins, and the other is cancelled (if it had not started, it
    /// never starts).
    static func race(n: Int, schedule: Schedule) throws -> CaseReport {
        let contestants = [noOp, noOp]
        let handWritten = "atomic first-wins flag + DispatchWorkItem.cancel (hand-written)"
        let variants = [
            Variant(name: "JobKit `Job.race`") { n in try performAtOnce(Job.race(contestants), times: n) },
            Variant(name: handWritten) { n in
                let group = DispatchGroup()
                for _ in 0..<n {
                    group.enter()
                    HandWrittenRace(contestants: 2) { _ in group.leave() }.start(on: queue)
                }
                try wait(for: group)
            },
        ]
        return CaseReport(
            title: "15. \(n) races of 2 no-op jobs on DispatchQueue.global(), the loser cancelled",
            unit: "ns/race",
            rows: try measureInterleaved(variants, n: n, schedule: schedule, goals: [handWritten: 1.0])
        )
    }

    // MARK: - 16. Every outcome

    /// Every outcome of `n` no-op jobs, against `collect` of the same.
    static func outcomes(n: Int, schedule: Schedule) throws -> CaseReport {
        let jobs = Array(repeating: noOp, count: n)
        let collect = "JobKit `Job.collect`"
        let variants = [
            Variant(name: "JobKit `Job.collectOutcomes`") { n in
                let outcomes = try TimingCases.valueAndWait(Job.collectOutcomes(jobs))
                guard outcomes.count == n, outcomes.allSatisfy({ (try? $0.get()) != nil }) else {
                    throw BenchmarkFailure("collectOutcomes gave \(outcomes.count) outcomes, not \(n) successes")
                }
            },
            Variant(name: collect) { n in
                let values: [Void] = try TimingCases.valueAndWait(Job.collect(jobs))
                guard values.count == n else { throw BenchmarkFailure("collect gave \(values.count) values, not \(n)") }
            },
        ]
        return CaseReport(
            title: "16. Every outcome of \(n) no-op jobs on DispatchQueue.global()",
            unit: "ns/job",
            rows: try measureInterleaved(variants, n: n, schedule: schedule, goals: [collect: 1.0])
        )
    }

    // MARK: - 17. Zip

    /// `n` zips of two no-op jobs, all at once, against the same by hand
    /// with a `DispatchGroup` per zip.
    static func zip(n: Int, schedule: Schedule) throws -> CaseReport {
        let handWritten = "DispatchGroup enter/leave + async, notify (hand-written)"
        let variants = [
            Variant(name: "JobKit `Job.zip`") { n in try performAtOnce(Job.zip(noOp, noOp), times: n) },
            Variant(name: handWritten) { n in
                let group = DispatchGroup()
                for _ in 0..<n {
                    group.enter()
                    let values = HandWrittenPair()
                    let both = DispatchGroup()
                    both.enter()
                    queue.async {
                        values.first = ()
                        both.leave()
                    }
                    both.enter()
                    queue.async {
                        values.second = ()
                        both.leave()
                    }
                    both.notify(queue: queue) {
                        _ = (values.first!, values.second!)
                        group.leave()
                    }
                }
                try wait(for: group)
            },
        ]
        return CaseReport(
            title: "17. \(n) zips of 2 no-op jobs on DispatchQueue.global()",
            unit: "ns/zip",
            rows: try measureInterleaved(variants, n: n, schedule: schedule, goals: [handWritten: 1.0])
        )
    }

    /// Performs `job` `times` times at once, and waits until every
    /// performance completed.
    private static func performAtOnce<T>(_ job: Job<T>, times: Int) throws {
        let group = DispatchGroup()
        for _ in 0..<times {
            group.enter()
            job.perform(on: queue) { _ in group.leave() }
        }
        try wait(for: group)
    }

    /// Waits for `group`, at most ten minutes.
    private static func wait(for group: DispatchGroup) throws {
        guard group.wait(timeout: .now() + .seconds(600)) == .success else {
            throw BenchmarkFailure("timed out waiting for the races")
        }
    }
}

/// A race by hand, as GCD code writes it: each contestant a work item on the
/// queue; the first to run takes an atomic flag, cancels the other work
/// items (one not started never runs) and reports.
///
/// Unchecked: `items` is written by `start(on:)` before any item is
/// enqueued (the enqueue publishes it), then read and emptied only by the
/// winner, which the flag makes one.
private final class HandWrittenRace: @unchecked Sendable {
    private let won = Atomic<Bool>(false)
    private let contestants: Int
    private let report: @Sendable (Int) -> Void
    private var items: [DispatchWorkItem] = []

    init(contestants: Int, report: @escaping @Sendable (Int) -> Void) {
        self.contestants = contestants
        self.report = report
    }

    func start(on queue: DispatchQueue) {
        // Each item holds the race until it runs or is cancelled; the
        // winner empties `items`, which ends the cycle.
        items = (0..<contestants).map { index in DispatchWorkItem { self.finish(index) } }
        for item in items { queue.async(execute: item) }
    }

    /// A contestant's body: it finishes at once.
    private func finish(_ index: Int) {
        guard !won.exchange(true, ordering: .acquiringAndReleasing) else { return }
        for (other, item) in items.enumerated() where other != index { item.cancel() }
        items = []
        report(index)
    }
}

/// The two values of a zip by hand.
///
/// Unchecked: each value is written by one work item before it leaves the
/// pair's `DispatchGroup`, and read by its `notify` block, after both left.
private final class HandWrittenPair: @unchecked Sendable {
    var first: Void?
    var second: Void?
}
