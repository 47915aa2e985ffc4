/// Runs `body` once for each seed, each time on a fresh ``TestQueue`` that
/// runs work due at the same time in the order drawn from that seed, and
/// stops at the first seed for which `body` throws.
///
/// Code tested on a FIFO `TestQueue` is tested in one order: the one it was
/// written for. On a concurrent queue, jobs that start together may finish
/// in any order; each seed tries one order of the work items due at the
/// same instant, the same one every time. `body` performs the code under
/// test on the queue it is given, runs the queue, and throws when something
/// is wrong: `try #require(...)` in Swift Testing, an error of your own (or
/// `try XCTUnwrap(...)` of an optional) in XCTest. A failed `#expect` or
/// `XCTAssert` records a failure without throwing, so exploring goes on past
/// it, and its message names no seed. `body` is synchronous: it drives the
/// queue with ``TestQueue/run()`` and ``TestQueue/advance(by:)``.
///
/// ```swift
/// @Test func valuesComeInInputOrderWhateverOrderTheJobsFinishIn() throws {
///     try exploreOrderings(seeds: 0..<200) { queue in
///         let jobs = ["a", "b", "c"].map { name in
///             Job<String> { controller in
///                 controller.queue.enqueue { controller.finish(with: name) }  // finishes later
///             }
///         }
///         let values = LockedValue<[String]?>(nil)
///         Job<[String]>.collect(jobs).perform(on: queue) { values.setValue(try? $0.get()) }
///         try queue.run()
///         try #require(values.value == ["a", "b", "c"])
///     }
/// }
/// ```
///
/// The error names the seed and the line that reproduces it:
/// `let queue = TestQueue(ordering: .shuffled(seed: 17))` runs the failing
/// order again, in a test of its own, under a debugger. The order repeats
/// as long as the work reaches the queue in the same order: work enqueued
/// from other threads (a real network call, a Swift task) joins it when it
/// arrives, and may not.
///
/// - Parameters:
///   - seeds: The seeds to try, in order, such as `0..<500`; each gives
///     one order.
///   - maxSteps: Each queue's ``TestQueue/maxSteps``.
///   - body: The test, run once per seed with that seed's queue.
/// - Throws: ``OrderingFailure`` with the first seed for which `body`
///   threw, and its error. Seeds after it are not tried.
public func exploreOrderings(
    seeds: some Sequence<UInt64>,
    maxSteps: Int = TestQueue.defaultMaxSteps,
    _ body: (TestQueue) throws -> Void
) throws(OrderingFailure) {
    var passed = 0
    for seed in seeds {
        let queue = TestQueue(ordering: .shuffled(seed: seed), maxSteps: maxSteps)
        do {
            try body(queue)
        } catch {
            throw OrderingFailure(seed: seed, maxSteps: maxSteps, seedsPassed: passed, error: error)
        }
        passed += 1
    }
}

/// The first seed for which the body given to
/// ``exploreOrderings(seeds:maxSteps:_:)`` threw, with its error and the
/// line that reproduces it.
public struct OrderingFailure: Error, CustomStringConvertible {
    /// The seed whose order made the body throw.
    public let seed: UInt64
    /// The step limit of the queue it ran on.
    public let maxSteps: Int
    /// How many seeds passed before this one.
    public let seedsPassed: Int
    /// What the body threw.
    public let error: any Error

    /// The queue that runs the failing order again, as Swift to paste into
    /// a test: `TestQueue(ordering: .shuffled(seed: 17))`.
    public var reproduction: String {
        let ordering = TestQueue.Ordering.shuffled(seed: seed)
        return maxSteps == TestQueue.defaultMaxSteps
            ? "TestQueue(ordering: \(ordering))"
            : "TestQueue(ordering: \(ordering), maxSteps: \(maxSteps))"
    }

    /// What failed, in which order, and how to run that order again, in one
    /// line.
    public var description: String {
        "Failed in the order of seed \(seed) (after \(seedsPassed) seeds passed): \(describing(error)). "
            + "To run this order again: let queue = \(reproduction)"
    }
}

/// `error` in a line: its description, or, for the error a failed
/// `#require` of Swift Testing throws (whose description is a dump of its
/// fields), the requirement and where it is. Read by reflection, so that
/// JobKitTesting does not depend on a test framework.
private func describing(_ error: any Error) -> String {
    let mirror = Mirror(reflecting: error)
    guard String(describing: type(of: error)) == "ExpectationFailedError",
        let expression = mirror.descendant("expectation", "evaluatedExpression"),
        let location = mirror.descendant("expectation", "sourceLocation")
    else { return "\(error)" }
    return "#require(\(expression)) failed at \(location)"
}
