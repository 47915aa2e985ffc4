import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing
import UploadsTesting

@testable import Uploads

/// Failed uploads, a network that is gone, and input the outbox refuses.
extension OutboxTests {
    @Test func aMissingFileFailsThePostKeepsItsRecordAndRetryStartsItAgain() throws {
        defer { folder.remove() }
        let file = try folder.file("clip.mp4", bytes: patternedBytes(300))
        let post = Post(
            text: "clip", videos: [Video(file: file, destination: destination("clip/video.mp4"))],
            destination: destination("clip/post.json"))
        let uploader = InMemoryUploader()
        let outbox = try open(uploader)
        let id = try outbox.add(post)
        try FileManager.default.removeItem(at: file)
        try queue.run()

        let entry = try #require(outbox.entry(id))
        #expect(entry.state == .failed)
        #expect(entry.error as? UploadError == .fileNotFound(file))
        #expect(try record(of: post).status == .failed)
        #expect(try record(of: post).error == UploadError.fileNotFound(file).localizedDescription)

        _ = try folder.file("clip.mp4", bytes: patternedBytes(300))
        try outbox.retry(id)
        #expect(try record(of: post).status == .pending)
        try queue.run()
        #expect(outbox.entry(id)?.state == .published)
        #expect(throws: OutboxError.unknownPost(destination("nowhere"))) {
            try outbox.retry(Outbox.PostID(destination("nowhere")))
        }
        outbox.close()
    }

    @Test func aFailureOfAnEarlierLaunchLoadsAsFailedWithItsReason() throws {
        defer { folder.remove() }
        let post = outboxPost("a", photos: 1, videos: 0)
        let uploader = InMemoryUploader()
        uploader.fail(
            post.media[0].destination,
            with: UploadError.httpStatus(UploadReceipt(destination: post.media[0].destination, status: 403)))
        var outbox = try open(uploader)
        let id = try outbox.add(post)
        try queue.run()
        #expect(outbox.entry(id)?.state == .failed)
        outbox.close()

        outbox = try open(InMemoryUploader())
        try queue.run()
        let entry = try #require(outbox.entry(id))
        #expect(entry.state == .failed)
        #expect(
            entry.error as? OutboxError
                == .failedInEarlierLaunch(reason: "a/photo-0.jpg: the server answered 403 Forbidden"))
        outbox.close()
    }

    @Test func anOfflinePostWaitsForTheNetworkNotFails() throws {
        defer { folder.remove() }
        let post = outboxPost("a", photos: 2, videos: 0)
        let uploader = InMemoryUploader(latency: .seconds(1))
        uploader.fail(post.media[1].destination, with: URLError(.notConnectedToInternet), times: 3)
        let outbox = try open(uploader, retry: exactRetries(3, initial: .seconds(1)))
        let id = try outbox.add(post)
        try queue.advance(by: .seconds(60))
        #expect(outbox.entry(id)?.state == .waitingForNetwork)
        #expect(outbox.entry(id)?.storedMediaCount == 1, "the other medium is stored")
        #expect(uploader.startedDestinations.filter { $0 == post.media[1].destination }.count == 3)

        outbox.networkDidChange()
        try queue.advance(by: .seconds(10))
        #expect(outbox.entry(id)?.state == .published)
        #expect(uploader.startedDestinations.filter { $0 == post.media[0].destination }.count == 1)
        outbox.close()
    }

    @Test func everyFailedAttemptIsToldWithItsDestinationAsPublishingTellsIt() throws {
        defer { folder.remove() }
        let post = outboxPost("a", photos: 2, videos: 0)
        let uploader = InMemoryUploader(latency: .seconds(1))
        uploader.fail(post.media[1].destination, with: URLError(.notConnectedToInternet), times: 2)
        let told = LockedValue<[String]>([])
        var publishing = PublishOptions(retry: exactRetries(3, initial: .seconds(1), maximum: .seconds(2)))
        publishing.onFailedAttempt = { destination, attempt in
            told.withValue { $0.append("\(destination.lastPathComponent) \(attempt.number) \(attempt.nextRetryIn!)") }
        }
        let outbox = try Outbox(
            folder: folder.url.appendingPathComponent("outbox"), uploader: uploader,
            options: Outbox.Options(publishing: publishing), queue: queue)
        let id = try outbox.add(post)
        try queue.advance(by: .seconds(60))

        #expect(outbox.entry(id)?.state == .published)
        let name = post.media[1].destination.lastPathComponent
        #expect(told.value == ["\(name) 1 1.0 seconds", "\(name) 2 2.0 seconds"])
        outbox.close()
    }

    @Test func badInputIsRefusedWithATypedErrorAndNothingAdded() throws {
        defer { folder.remove() }
        let outbox = try open(InMemoryUploader())
        var post = outboxPost("a")
        post.destination = nil
        #expect(throws: UploadError.missingDestination) { try outbox.add(post) }
        let gone = folder.url.appendingPathComponent("gone.mp4")
        let missing = Post(
            text: "", videos: [Video(file: gone, destination: destination("b/v.mp4"))],
            destination: destination("b/post.json"))
        #expect(throws: UploadError.fileNotFound(gone)) { try outbox.add(missing) }
        #expect(outbox.posts.isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.url.path + "/outbox/posts").isEmpty)

        let file = try folder.file("plain", bytes: Data("not a folder".utf8))
        let error = #expect(throws: OutboxError.self) {
            try Outbox(folder: file.appendingPathComponent("outbox"), uploader: InMemoryUploader())
        }
        #expect(
            error?.localizedDescription
                == "\(file.path)/outbox: cannot keep an outbox here: Not a directory")
        #expect(
            throws: InvalidOptionError(option: "publishing.maxConcurrentUploads", reason: "must be at least 1, got 0")
        ) {
            try Outbox(
                folder: folder.url.appendingPathComponent("other"), uploader: InMemoryUploader(),
                options: Outbox.Options(publishing: PublishOptions(maxConcurrentUploads: 0)))
        }
        outbox.close()
    }

    @Test func aPostWaitingForTheNetworkIsTriedAgainAfterAWaitBelowADoublingCappedCeiling() throws {
        defer { folder.remove() }
        let post = outboxPost("a", photos: 1, videos: 0)
        let uploader = InMemoryUploader()
        uploader.fail(post.media[0].destination, with: URLError(.notConnectedToInternet))
        // Each wait is drawn below its ceiling: at the ceiling here.
        let outbox = try open(
            uploader, retry: RetryPolicy(attempts: 1, random: AtTheCeiling()), networkRetryDelay: .seconds(1),
            maxNetworkRetryDelay: .seconds(4))
        try outbox.add(post)
        var tries: [Int] = []
        for _ in 0...12 {
            try queue.run()
            tries.append(uploader.startedDestinations.count)
            try queue.advance(by: .seconds(1))
        }
        // Tried at 0 s, then after waits of 1, 2, 4 and 4 seconds.
        #expect(tries == [1, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5])
        #expect(outbox.posts.map(\.state) == [.waitingForNetwork])
        outbox.close()
        #expect(queue.isIdle, "closing cancels the next try")
    }

    @Test func onAnImmediateQueueAPostWaitingForTheNetworkIsTriedAgainAtOnceAsEveryWaitEndsAtOnce() throws {
        defer { folder.remove() }
        let post = outboxPost("a", photos: 1, videos: 0)
        let uploader = InMemoryUploader()
        uploader.fail(post.media[0].destination, with: URLError(.notConnectedToInternet), times: 2)
        let outbox = try Outbox(
            folder: folder.url.appendingPathComponent("outbox"), uploader: uploader,
            options: Outbox.Options(
                publishing: PublishOptions(retry: RetryPolicy(attempts: 1)), networkRetryDelay: .seconds(600)),
            queue: ImmediateQueue())
        let id = try outbox.add(post)
        #expect(outbox.entry(id)?.state == .published, "the same path as on any queue, with no time passing")
        #expect(
            uploader.startedDestinations == [
                post.media[0].destination, post.media[0].destination, post.media[0].destination, post.destination!,
            ])
        outbox.close()
    }
}
