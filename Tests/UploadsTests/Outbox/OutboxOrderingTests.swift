import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing
import UploadsTesting

@testable import Uploads

/// A two-post outbox, one post paused and resumed, in the orders a
/// concurrent queue allows: every upload takes the same latency, so the
/// uploads in flight finish at the same instant and each seed runs them,
/// and the uploads they start, in another order.
// Two minutes: about 11 s alone under Thread Sanitizer, and 53 s in CI's
// Thread Sanitizer pass, beside the rest of UploadsTests on two cores
// (43 s on a machine two to three times slower). On a thread of its own:
// seconds of synchronous work on one of Swift's cooperative threads kept
// the suite's other tests waiting (and the servers they had started were
// killed by a watchdog the waiting test could not call off in time).
@Suite("Outbox in explored orders", .onThreadOfItsOwn, .timeLimit(.minutes(2)))
struct OutboxOrderingTests {
    private struct Broken: Error, CustomStringConvertible {
        let description: String
    }

    @Test func aPausedAndResumedPostKeepsTheOutboxsPromisesIn300Orders() throws {
        let clock = ContinuousClock()
        let began = clock.now
        let pausedInFlight = LockedValue<Set<Set<URL>>>([])
        var run = 0
        try exploreOrderings(seeds: 0..<300) { queue in
            defer { run += 1 }
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            let uploader = InMemoryUploader(latency: .seconds(1))
            let options = Outbox.Options(
                publishing: PublishOptions(maxConcurrentUploads: 3, retry: RetryPolicy(attempts: 1)))
            let location = folder.url.appendingPathComponent("outbox")
            // Unsynced: a sync per record, 30 a seed, would take most of the
            // test's time, and orders, not disks, are its subject.
            var outbox = try Outbox(
                folder: location, uploader: uploader, options: options, queue: queue, writer: .unsynced)
            let normal = outboxPost("normal", photos: 3, videos: 1)
            let high = outboxPost("high", photos: 2, videos: 0)
            let posts = [normal, high]
            let paused = try outbox.add(normal)
            try outbox.add(high, priority: .high)

            // The pause lands after the first uploads finished (even runs)
            // or while they are all in flight (odd runs).
            try queue.advance(by: run.isMultiple(of: 2) ? .seconds(1) : .milliseconds(500))
            let cancelledBefore = uploader.cancelledDestinations.count
            try outbox.pause(paused)
            // A set: the order of the cancels follows a dictionary's, which
            // each process hashes its own way.
            pausedInFlight.withValue { $0.insert(Set(uploader.cancelledDestinations.dropFirst(cancelledBefore))) }
            try queue.advance(by: .milliseconds(1500))
            guard outbox.entry(paused)?.state == .paused else { throw Broken(description: "not paused") }
            try outbox.resume(paused)
            try queue.advance(by: .seconds(20))

            let stored = uploader.uploads.map(\.destination)
            guard Set(stored).count == stored.count else { throw Broken(description: "stored twice: \(stored)") }
            guard uploader.maxRunningCount <= 3 else { throw Broken(description: "over the limit") }
            for post in posts {
                let entry = try #require(outbox.entry(Outbox.PostID(post.destination!)))
                guard entry.state == .published, entry.bytesSent == entry.bytesTotal else {
                    throw Broken(description: "\(entry.id): \(entry.state), \(entry.bytesSent) of \(entry.bytesTotal)")
                }
                let document = try #require(stored.firstIndex(of: post.destination!))
                guard post.media.allSatisfy({ stored.firstIndex(of: $0.destination).map { $0 < document } == true })
                else { throw Broken(description: "\(entry.id) went before its media: \(stored)") }
                let receipts = try #require(entry.receipt?.media)
                guard uploader.uploads[document].bytes == documentBytes(post, receipts) else {
                    throw Broken(description: "\(entry.id)'s document does not name its media's receipts")
                }
            }
            outbox.close()
            guard queue.isIdle else { throw Broken(description: "work left on the queue") }

            let after = InMemoryUploader()
            outbox = try Outbox(folder: location, uploader: after, options: options, queue: queue, writer: .unsynced)
            try queue.advance(by: .seconds(20))
            guard after.startedDestinations.isEmpty else { throw Broken(description: "a relaunch sent again") }
            outbox.close()
        }
        // The seeds paused different sets of uploads in flight: photo 0
        // alone, or photos 1 and 2. (Counted as arrays, in the order of the
        // cancels, they made three or two, as the process hashed.)
        #expect(pausedInFlight.value.count >= 2, "\(pausedInFlight.value)")
        if ProcessInfo.processInfo.environment["JOBKIT_PRINT_MEASUREMENTS"] != nil {
            print("outbox, 300 seeds of exploreOrderings: \(clock.now - began)")
        }
    }
}
