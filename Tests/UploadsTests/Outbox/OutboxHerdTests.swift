import Foundation
import Testing
import Uploads
import UploadsTesting

/// The herd test: outboxes back online at once, on one `TestQueue`, against
/// a server of fixed capacity that answers `503` with `Retry-After: 5` past
/// it (`Herd`). The Benchmarks' `herd` case runs it with 1,000 and 10,000
/// outboxes.
@Suite("Outbox herd", .timeLimit(.minutes(1)))
struct OutboxHerdTests {
    @Test func fiveHundredOutboxesBackOnlineAtOnceKeepTheServerNearItsCapacity() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("UploadsTests-herd-\(UUID())")
        let report = try Herd.run(Herd.Configuration(outboxes: 500, drainingIn: 5), in: folder)
        #expect(report.publishedCount == 500)
        #expect(report.useful == 500 * Herd.requestsPerPost, "every medium and document stored once")
        #expect(report.peakRatio <= 2, "peak load after the first minute: \(report.line)")
        // In the first minute, the wake window spreads the outboxes' first
        // tries, one request each: 500 over some 12 s, some 42 a second
        // against a capacity of 8.
        #expect(
            Double(report.busiestSecondInFirstMinute) <= 15 * Double(report.capacity),
            "the busiest second of the first minute: \(report.busiestSecondInFirstMinute)")
        #expect(report.timeRatio <= 2, "time to publish every post: \(report.line)")
        #expect(report.rejectedRatio <= 1, "rejected requests per useful one: \(report.line)")
        #expect(!FileManager.default.fileExists(atPath: folder.path))
    }

    /// A herd with every wait in step (each jitter drawn at its ceiling, no
    /// wake window, no pushback delay) misses the goals: the test above
    /// measures something. Smaller, as in-step requests are many; stopped
    /// after 20 virtual minutes.
    @Test func theSameHerdWithItsWaitsInStepMissesTheGoals() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("UploadsTests-herd-\(UUID())")
        var configuration = Herd.Configuration(outboxes: 200, drainingIn: 5)
        configuration.options = { _ in
            Outbox.Options(
                publishing: PublishOptions(retry: RetryPolicy(random: AtTheCeiling())), networkWakeWindow: .zero,
                pushbackDelay: .zero)
        }
        configuration.limit = .seconds(20 * 60)
        let report = try Herd.run(configuration, in: folder)
        #expect(report.peakRatio > 2, "\(report.line)")
        #expect(report.publishedCount > 0 && report.timeRatio > 2, "\(report.line)")
        #expect(report.rejectedRatio > 1, "\(report.line)")
    }
}
