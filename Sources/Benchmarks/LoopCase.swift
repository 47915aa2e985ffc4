import Dispatch
import JobKit
import Synchronization

/// Case 20: a loop written as recursion, the way apps poll with jobs (a
/// `then` whose next job is the loop again), and the same loop with the
/// loop combinator (`repeated(while:)`), each against the loop GCD code
/// writes by hand: one `DispatchQueue.async` per step. Each step's work
/// finishes at once, so the figures are what the loop itself costs.
enum LoopCase {
    static let queue = DispatchQueue.global()

    /// The loop as an app writes it with jobs: a step, then the loop again
    /// until the step's value reaches `last`.
    static func poll(from first: Int, to last: Int) -> Job<Int> {
        Job.succeeded(first).then { value in
            value >= last ? .succeeded(value) : poll(from: value + 1, to: last)
        }
    }

    /// Runs the JobKit loop of `steps` steps on `DispatchQueue.global()`
    /// and waits for its value.
    static func runJobKit(steps: Int) throws {
        let value = try TimingCases.valueAndWait(poll(from: 1, to: steps))
        guard value == steps else { throw BenchmarkFailure("the loop ended at \(value), not \(steps)") }
    }

    /// The same loop with the loop combinator: the step again while its
    /// value is below `last`.
    static func repeating(to last: Int) -> Job<Int> {
        let next = StepCounter()
        return Job { controller in controller.finish(with: next.increment()) }.repeated(while: { $0 < last })
    }

    /// Runs the loop combinator's loop of `steps` steps on
    /// `DispatchQueue.global()` and waits for its value.
    static func runRepeated(steps: Int) throws {
        let value = try TimingCases.valueAndWait(repeating(to: steps))
        guard value == steps else { throw BenchmarkFailure("the loop ended at \(value), not \(steps)") }
    }

    /// Runs the hand-written loop of `steps` steps and waits for its end.
    static func runHandWritten(steps: Int) throws {
        let completion = Completion<Int>()
        HandWrittenLoop(last: steps, done: completion.complete).step(1)
        let value = try completion.wait()
        guard value == steps else { throw BenchmarkFailure("the loop ended at \(value), not \(steps)") }
    }

    static func time(steps: Int, schedule: Schedule) throws -> CaseReport {
        let handWritten = "a `DispatchQueue.async` per step (hand-written)"
        let again = "a `DispatchQueue.async` per step (hand-written), again"
        let variants = [
            Variant(name: "JobKit: `then` recursion") { steps in try runJobKit(steps: steps) },
            Variant(name: handWritten) { steps in try runHandWritten(steps: steps) },
            Variant(name: "JobKit: `repeated(while:)`", isBaseline: true) { steps in try runRepeated(steps: steps) },
            Variant(name: again) { steps in try runHandWritten(steps: steps) },
        ]
        return CaseReport(
            title: "20. A loop of \(steps) steps, written as recursion and with `repeated(while:)`, "
                + "on DispatchQueue.global(): time",
            unit: "ns/step",
            rows: try measureInterleaved(variants, n: steps, schedule: schedule, goals: [handWritten: 1.5, again: 1.5])
        )
    }

    static func memory(steps: Int, rounds: Int, executable: String) throws -> CaseReport {
        let report = try MemoryCase.measureRounds(
            n: steps, rounds: rounds, executable: executable, kinds: MemoryCase.Kind.loops)
        return CaseReport(
            title: "20. The same loops' peak memory (one child process per measurement)",
            unit: "MiB",
            rows: report.rows,
            notes: [
                "The child process's whole peak resident set (VmHWM), its start included, as the issue measured "
                    + "it. JobKit ÷ this compares the JobKit loop of \(steps) steps with each row."
            ]
        )
    }
}

/// A count shared by a loop's steps.
private final class StepCounter: Sendable {
    private let count = Atomic(0)

    func increment() -> Int {
        count.add(1, ordering: .relaxed).newValue
    }
}

/// The loop by hand: each step hops to the queue, does its work (which
/// finishes at once, through a completion handler) and starts the next.
private final class HandWrittenLoop: Sendable {
    let last: Int
    let done: @Sendable (Int) -> Void

    init(last: Int, done: @escaping @Sendable (Int) -> Void) {
        self.last = last
        self.done = done
    }

    /// The step's work, callback-based.
    private func fetch(_ index: Int, completion: (Int) -> Void) {
        completion(index)
    }

    func step(_ index: Int) {
        LoopCase.queue.async {
            self.fetch(index) { value in value >= self.last ? self.done(value) : self.step(value + 1) }
        }
    }
}
