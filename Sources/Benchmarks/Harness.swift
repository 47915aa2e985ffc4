import Dispatch
import JobKitTesting

/// A check inside a benchmark failed: the measured code did not do what it
/// was measured doing.
struct BenchmarkFailure: Error, CustomStringConvertible {
    let description: String

    init(_ description: String) {
        self.description = description
    }
}

/// One contender in a case: runs `n` jobs and returns when all of them ran.
struct Variant: Sendable {
    /// Shown in the table.
    let name: String
    /// Whether the rows below this one, up to the next such variant, are
    /// compared with it rather than with the first variant: for a case that
    /// measures JobKit against hand-written code in two settings.
    var isBaseline = false
    /// Runs one batch of `n` jobs; throws when a result check fails.
    let run: @Sendable (_ n: Int) throws -> Void
}

/// How many batches each variant runs.
struct Schedule: Sendable {
    /// Batches run and thrown away before measuring, per variant.
    var warmups: Int
    /// Measured rounds; each round runs every variant once.
    var rounds: Int
    /// When set, only variants whose name contains it run (for profiling
    /// one variant under callgrind); ratios are then meaningless.
    var only: String? = nil
    /// When set, only the variant with exactly this name runs: how cases 10
    /// and 11 count one variant whose name is part of another's.
    var onlyNamed: String? = nil

    /// Whether the variant named `name` runs.
    func measures(_ name: String) -> Bool {
        if let onlyNamed, name != onlyNamed { return false }
        return only.map { name.contains($0) } ?? true
    }
}

/// One row of a result table.
struct Row: Sendable {
    var name: String
    /// Per-job time of each round, in nanoseconds (or any per-item figure).
    var samples: [Double]
    /// The median of the pair-by-pair ratios baseline ÷ this variant: the
    /// first variant, or the nearest baseline above this one.
    var ratio: Double?
    /// The goal this ratio is held to, if any (e.g. 1.25).
    var goal: Double?

    var median: Double { samples.median }
    var minimum: Double { samples.min() ?? .nan }
}

/// The result of one case.
struct CaseReport: Sendable {
    var title: String
    /// The unit of the rows' figures ("ns/job", "MiB", ...).
    var unit: String
    var rows: [Row]
    var notes: [String] = []
    /// The lines of a table of its own, printed instead of the rows', for
    /// a case that is not a timing.
    var table: [String]?
}

extension Array where Element == Double {
    /// The median; the mean of the two middle values for an even count.
    var median: Double {
        guard !isEmpty else { return .nan }
        let sorted = self.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }
}

/// Monotonic nanoseconds.
@inline(__always)
func now() -> UInt64 {
    DispatchTime.now().uptimeNanoseconds
}

/// Runs `variants` interleaved: after `schedule.warmups` unmeasured batches
/// each, every round runs each variant once, in alternating order (A B C,
/// then C B A, ...), so that a drift in the machine's speed hits all of them
/// alike. Each row's ratio is the median over rounds of
/// `time(baseline) / time(variant)` taken within the same round, where the
/// baseline is the nearest variant above marked `isBaseline`, else the first.
/// Times are read from `clock`: wall time by default, or, say, the
/// process's CPU time.
func measureInterleaved(
    _ variants: [Variant],
    n: Int,
    schedule: Schedule,
    goals: [String: Double] = [:],
    clock: () -> UInt64 = now
) throws -> [Row] {
    let variants = variants.filter { schedule.measures($0.name) }
    for variant in variants {
        for _ in 0..<schedule.warmups { try variant.run(n) }
    }
    var times = Array(repeating: [Double](), count: variants.count)
    for round in 0..<max(schedule.rounds, 1) {
        let order = round % 2 == 0 ? Array(variants.indices) : variants.indices.reversed()
        for index in order {
            let start = clock()
            try variants[index].run(n)
            let elapsed = clock() - start
            times[index].append(Double(elapsed) / Double(max(n, 1)))
        }
    }
    return variants.indices.map { index in
        let baseline = variants.indices[...index].last { variants[$0].isBaseline } ?? 0
        let ratios = zip(times[baseline], times[index]).map { $0 / $1 }
        return Row(
            name: variants[index].name,
            samples: times[index],
            ratio: index == baseline ? nil : ratios.median,
            goal: goals[variants[index].name]
        )
    }
}

// MARK: - Blocking helpers

/// Waits for a callback-style completion on the calling thread.
final class Completion<Value: Sendable>: Sendable {
    private let box = LockedValue<Value?>(nil)
    private let semaphore = DispatchSemaphore(value: 0)

    func complete(_ value: Value) {
        box.setValue(value)
        semaphore.signal()
    }

    /// Blocks until ``complete(_:)`` is called, at most `seconds`.
    func wait(seconds: Int = 600) throws -> Value {
        guard semaphore.wait(timeout: .now() + .seconds(seconds)) == .success, let value = box.value else {
            throw BenchmarkFailure("timed out after \(seconds) s waiting for a completion")
        }
        return value
    }
}

/// Runs `operation` in a detached task and blocks the calling thread (never
/// one of the cooperative pool's) until it returns.
func blockingAwait<T: Sendable>(_ operation: @escaping @Sendable () async throws -> T) throws -> T {
    let completion = Completion<Result<T, any Error>>()
    Task.detached {
        do {
            completion.complete(.success(try await operation()))
        } catch {
            completion.complete(.failure(error))
        }
    }
    return try completion.wait().get()
}
