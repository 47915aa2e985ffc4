import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing
import UploadsTesting

@testable import Uploads

/// Pausing, resuming and removing posts, and the budget of bytes in flight.
extension OutboxTests {
    @Test func pauseStopsAPostKeepsWhatIsStoredAndResumeSendsOnlyTheRest() throws {
        defer { folder.remove() }
        let uploader = InMemoryUploader(latency: .seconds(1))
        let post = outboxPost("a", photos: 3, videos: 0)
        var outbox = try open(uploader, maxConcurrentUploads: 1)
        let id = try outbox.add(post)
        try queue.advance(by: .seconds(1.5))
        try outbox.pause(id)
        #expect(uploader.cancelledDestinations == [post.media[1].destination])
        #expect(outbox.entry(id)?.state == .paused && outbox.entry(id)?.storedMediaCount == 1)
        #expect(try record(of: post).status == .paused)
        try queue.advance(by: .seconds(60))
        #expect(uploader.startedDestinations.count == 2, "a paused post sends nothing")
        outbox.close()

        let again = InMemoryUploader(latency: .seconds(1))
        outbox = try open(again, maxConcurrentUploads: 1)
        try queue.advance(by: .seconds(60))
        #expect(outbox.entry(id)?.state == .paused, "a pause holds across launches")
        #expect(again.startedDestinations.isEmpty)
        try outbox.resume(id)
        #expect(try record(of: post).status == .pending)
        try queue.advance(by: .seconds(60))
        #expect(again.startedDestinations == [post.media[1].destination, post.media[2].destination, post.destination!])
        #expect(outbox.entry(id)?.state == .published)
        #expect(throws: OutboxError.unknownPost(destination("nowhere"))) {
            try outbox.pause(Outbox.PostID(destination("nowhere")))
        }
        outbox.close()
        #expect(throws: OutboxError.closed(folder.url.appendingPathComponent("outbox"))) { try outbox.resume(id) }
    }

    @Test func pauseAllAndResumeAllTakeEveryPostThatIsNotOver() throws {
        defer { folder.remove() }
        let uploader = InMemoryUploader(latency: .seconds(1))
        let outbox = try open(uploader, maxConcurrentUploads: 2)
        let done = try outbox.add(outboxPost("done", photos: 1, videos: 0))
        try queue.advance(by: .seconds(2))
        let first = try outbox.add(outboxPost("first", photos: 2, videos: 0))
        let second = try outbox.add(outboxPost("second", photos: 2, videos: 0))
        try queue.advance(by: .seconds(0.5))
        outbox.pauseAll()
        #expect(outbox.posts.map(\.state) == [.published, .paused, .paused])
        #expect(uploader.cancelledDestinations.count == 2 && uploader.runningCount == 0)
        let later = try outbox.add(outboxPost("later", photos: 1, videos: 0))
        try queue.advance(by: .seconds(10))
        #expect(outbox.entry(later)?.state == .published, "a post added after pauseAll is not paused")
        outbox.resumeAll()
        try queue.advance(by: .seconds(10))
        #expect([done, first, second, later].map { outbox.entry($0)?.state } == Array(repeating: .published, count: 4))
        outbox.close()
    }

    @Test func removeStopsAPostAndDeletesItsRecordAndCopies() throws {
        defer { folder.remove() }
        let uploader = InMemoryUploader(latency: .seconds(1))
        let post = outboxPost("a", photos: 2, videos: 0)
        var outbox = try open(uploader, maxConcurrentUploads: 1)
        let id = try outbox.add(post)
        #expect(try files(in: "media").count == 2)
        try queue.advance(by: .seconds(1.5))
        try outbox.remove(id)
        #expect(uploader.cancelledDestinations == [post.media[1].destination])
        #expect(outbox.posts.isEmpty)
        #expect(try files(in: "posts").isEmpty && files(in: "media").isEmpty)
        #expect(throws: OutboxError.unknownPost(post.destination!)) { try outbox.remove(id) }
        outbox.close()

        outbox = try open(uploader, maxConcurrentUploads: 1)
        #expect(outbox.posts.isEmpty)
        try outbox.add(post)
        try queue.advance(by: .seconds(10))
        #expect(outbox.entry(id)?.state == .published, "added again, it is a new post")
        #expect(uploader.startedDestinations.filter { $0 == post.media[0].destination }.count == 2)
        outbox.close()
    }

    @Test func theBudgetOfBytesInFlightHoldsAndALargerFileGoesAlone() throws {
        defer { folder.remove() }
        let uploader = InMemoryUploader(latency: .seconds(1))
        let outbox = try open(uploader, maxConcurrentUploads: 4, maxBytesInFlight: 250)
        let small = outboxPost("small", photos: 2, videos: 0, size: 100)
        let large = Post(
            text: "large", videos: [Video(bytes: patternedBytes(1000), destination: destination("large/video.mp4"))],
            destination: destination("large/post.json"))
        let tiny = outboxPost("tiny", photos: 1, videos: 0, size: 10)
        try outbox.add(small)
        try outbox.add(large)
        try outbox.add(tiny)
        var running: [[URL]] = []
        for _ in 0..<6 {
            try queue.run()
            let started = uploader.startedDestinations
            let finished = uploader.uploads.map(\.destination)
            running.append(started.filter { !finished.contains($0) })
            try queue.advance(by: .seconds(1))
        }
        #expect(
            running == [
                small.media.map(\.destination),
                [small.destination!],
                [large.media[0].destination],
                [large.destination!, tiny.media[0].destination],
                [tiny.destination!],
                [],
            ],
            "200 bytes fit in 250; 1000 do not, and go alone; the small post's document (0 bytes counted) goes beside")
        #expect(outbox.posts.allSatisfy { $0.state == .published })
        outbox.close()
    }

    @Test func anUploadThatExactlyFillsTheBudgetStartsBesideTheOthers() throws {
        defer { folder.remove() }
        let uploader = InMemoryUploader(latency: .seconds(1))
        let outbox = try open(uploader, maxConcurrentUploads: 4, maxBytesInFlight: 300)
        let post = outboxPost("full", photos: 3, videos: 0, size: 100)
        let id = try outbox.add(post)
        try queue.run()
        #expect(
            uploader.startedDestinations == post.media.map(\.destination),
            "100 + 100 + 100 bytes fill 300 exactly: all three go at once")
        try queue.advance(by: .seconds(2))
        #expect(outbox.entry(id)?.state == .published)
        outbox.close()
    }
}
