import JobKit
import JobKitTesting
import XCTest

/// `exploreOrderings` from XCTest: it reports failure by throwing, so a
/// throwing test method fails with its message, and `XCTAssertThrowsError`
/// sees it. (No time limit here: the bodies run on `TestQueue`s bounded by
/// `maxSteps`, and nothing waits.)
final class ExploreOrderingsXCTests: XCTestCase {
    private struct Unexpected: Error {
        let message: String
    }

    func testAPassingBodyPassesEverySeed() throws {
        let runs = LockedValue(0)
        try exploreOrderings(seeds: 0..<20) { queue in
            let done = LockedValue(false)
            Job<Void> { controller in controller.queue.enqueue { controller.finish() } }
                .perform(on: queue) { _ in done.setValue(true) }
            try queue.run()
            guard done.value else { throw Unexpected(message: "the job did not finish") }
            runs.withValue { $0 += 1 }
        }
        XCTAssertEqual(runs.value, 20)
    }

    func testAFailingBodyThrowsTheFirstFailingSeed() {
        XCTAssertThrowsError(
            try exploreOrderings(seeds: 0..<20) { queue in
                let order = LockedValue<[Int]>([])
                for index in 0..<2 { queue.enqueue { order.withValue { $0.append(index) } } }
                try queue.run()
                guard order.value == [0, 1] else { throw Unexpected(message: "1 ran before 0") }
            }
        ) { error in
            guard let failure = error as? OrderingFailure else { return XCTFail("\(error)") }
            XCTAssertEqual(failure.reproduction, "TestQueue(ordering: .shuffled(seed: \(failure.seed)))")
            XCTAssertEqual(failure.seedsPassed, Int(failure.seed))
            XCTAssertEqual((failure.error as? Unexpected)?.message, "1 ran before 0")
        }
    }
}
