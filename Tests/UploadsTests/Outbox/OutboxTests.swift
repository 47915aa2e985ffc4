import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing
import UploadsTesting

@testable import Uploads

/// An uploader that records every attempt it is asked for (destination and
/// idempotency key) and hands it to an `InMemoryUploader`.
final class KeyRecordingUploader: Uploader {
    let base: InMemoryUploader
    private let attempts = LockedValue<[(destination: URL, key: String?)]>([])

    init(_ base: InMemoryUploader) {
        self.base = base
    }

    func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
        let upload = base.upload(media, progress: progress)
        return Job { [attempts] controller in
            attempts.withValue { $0.append((media.destination, media.idempotencyKey)) }
            controller.perform(upload) { controller.complete(with: $0) }
        }
    }

    /// The keys sent to `destination`, one per attempt.
    func keys(for destination: URL?) -> [String?] {
        attempts.value.filter { $0.destination == destination }.map(\.key)
    }
}

/// An uploader that records every medium it is asked to upload and hands
/// it to an `InMemoryUploader`.
final class MediaRecordingUploader: Uploader {
    let base: InMemoryUploader
    let media = LockedValue<[Media]>([])

    init(_ base: InMemoryUploader) {
        self.base = base
    }

    func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
        self.media.withValue { $0.append(media) }
        return base.upload(media, progress: progress)
    }
}

/// A writer whose writes fail, as on a full disk, once `failing` says so.
final class FailingWriter: Sendable {
    let failing = LockedValue(false)
    let writes = LockedValue(0)

    var writer: DurableFileWriter {
        DurableFileWriter { [failing, writes] data, file in
            if failing.value { throw DurableFiles.Failure("cannot write it", errno: ENOSPC) }
            writes.withValue { $0 += 1 }
            try DurableFiles.writeNewFile(data, to: file)
        }
    }
}

@Suite("Outbox", .timeLimit(.minutes(1)))
struct OutboxTests {
    let folder: TemporaryFolder
    let queue = TestQueue()

    init() throws {
        folder = try TemporaryFolder()
    }

    /// An outbox in the test's folder on the test's queue; a post waiting
    /// for the network waits an hour unless the test says otherwise.
    func open(
        _ uploader: any Uploader,
        maxConcurrentUploads: Int = 4,
        maxBytesInFlight: Int64 = 1 << 30,
        retry: RetryPolicy = RetryPolicy(attempts: 1),
        networkRetryDelay: Duration = .seconds(3600),
        maxNetworkRetryDelay: Duration = .seconds(3600),
        writer: DurableFileWriter = .system
    ) throws -> Outbox {
        let options = Outbox.Options(
            publishing: PublishOptions(maxConcurrentUploads: maxConcurrentUploads, retry: retry),
            maxBytesInFlight: maxBytesInFlight, networkRetryDelay: networkRetryDelay,
            maxNetworkRetryDelay: maxNetworkRetryDelay)
        return try Outbox(
            folder: folder.url.appendingPathComponent("outbox"), uploader: uploader, options: options, queue: queue,
            writer: writer)
    }

    /// An outbox whose writes fail once a one-photo post was added to it.
    func openAddingAPostThenFailingWrites() throws -> (FailingWriter, InMemoryUploader, Outbox, Post, Outbox.PostID) {
        let faults = FailingWriter()
        let post = outboxPost("a", photos: 1, videos: 0)
        let uploader = InMemoryUploader(latency: .seconds(1))
        let outbox = try open(uploader, writer: faults.writer)
        let id = try outbox.add(post)
        faults.failing.withValue { $0 = true }
        return (faults, uploader, outbox, post, id)
    }

    /// The files of the outbox's folder `name` ("posts", "media").
    func files(in name: String) throws -> [URL] {
        let folder = folder.url.appendingPathComponent("outbox/\(name)")
        return try FileManager.default.contentsOfDirectory(atPath: folder.path).sorted()
            .map { folder.appendingPathComponent($0) }
    }

    /// The record of `post` on disk.
    func record(of post: Post) throws -> OutboxRecord {
        let records = try files(in: "posts").map {
            try JSONDecoder().decode(OutboxRecord.self, from: Data(contentsOf: $0))
        }
        return try #require(records.first { $0.destination == post.destination })
    }

    @Test func publishesAPostItsMediaFirstAndKeepsItsRecord() throws {
        defer { folder.remove() }
        let uploader = InMemoryUploader()
        let outbox = try open(uploader)
        let post = outboxPost("a")
        let id = try outbox.add(post)
        #expect(uploader.startedDestinations.isEmpty, "nothing runs until the queue does")
        #expect(try record(of: post).status == .pending, "the record is on disk when add returns")

        try queue.run()
        #expect(uploader.uploads.map(\.destination) == post.media.map(\.destination) + [post.destination!])
        let entry = try #require(outbox.entry(id))
        #expect(entry.state == .published)
        #expect(entry.storedMediaCount == 3 && entry.bytesSent == entry.bytesTotal && entry.fractionCompleted == 1)
        #expect(entry.receipt?.media.count == 3)
        let record = try record(of: post)
        #expect(record.status == .published && record.media.allSatisfy { $0.receipt != nil })
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: folder.url.path + "/outbox/media").isEmpty,
            "the copies of its in-memory media are gone once it is published")
        #expect(uploader.uploads.last?.bytes == documentBytes(post, record.media.compactMap { $0.receipt?.receipt }))
        outbox.close()
    }

    @Test func aRelaunchSendsEachMediumWithTheFileNameAndFormFieldsTheAppGaveIt() throws {
        defer { folder.remove() }
        var post = outboxPost("a", photos: 2, videos: 1)
        post.photos[0].media.formFields = [
            FormField(name: "description", value: "Dawn"), FormField(name: "focus", value: "0.1,0.2"),
        ]
        post.videos[0].media.filename = "surf \"take 2\".mp4"
        var outbox = try open(InMemoryUploader())
        try outbox.add(post)
        outbox.close()  // as a kill would, before any upload

        let uploader = MediaRecordingUploader(InMemoryUploader())
        outbox = try open(uploader)
        try queue.run()

        let sent = uploader.media.value.filter { $0.destination != post.destination }
        #expect(sent.map(\.destination) == post.media.map(\.destination))
        #expect(sent.map(\.formFields) == post.media.map(\.formFields))
        #expect(
            sent.map { $0.filename ?? $0.defaultFilename } == ["photo-0.jpg", "photo-1.jpg", "surf \"take 2\".mp4"],
            "a copy of bytes in memory is named as the bytes were, not as the outbox's copy")
        #expect(outbox.posts.map(\.state) == [.published])
        outbox.close()

        // A record written before media had names and fields reads as
        // media without them.
        let old =
            try JSONSerialization.jsonObject(with: JSONEncoder().encode(Self.unitRecord(media: 1)))
            as? [String: Any] ?? [:]
        #expect((old["media"] as? [[String: Any]])?.first?.keys.contains("formFields") == false, "none written")
        let read = try JSONDecoder().decode(OutboxRecord.self, from: JSONSerialization.data(withJSONObject: old))
        #expect(read.upload(0).filename == nil && read.upload(0).formFields.isEmpty)
    }

    @Test func aDocumentUploaderOfItsOwnUploadsEachPostAcrossARelaunch() throws {
        defer { folder.remove() }
        let post = outboxPost("a", photos: 2, videos: 1)
        let documents = InMemoryUploader()
        func open(_ media: InMemoryUploader) throws -> Outbox {
            try Outbox(
                folder: folder.url.appendingPathComponent("outbox"), uploader: media,
                options: Outbox.Options(
                    publishing: PublishOptions(retry: RetryPolicy(attempts: 1), documentUploader: documents)),
                queue: queue,
                writer: .system)
        }
        let first = InMemoryUploader(latency: .seconds(1))
        var outbox = try open(first)
        try outbox.add(post)
        try queue.advance(by: .seconds(1))
        outbox.close()

        let second = InMemoryUploader()
        outbox = try open(second)
        try queue.run()

        #expect(outbox.posts.map(\.state) == [.published])
        let sent = Set((first.uploads + second.uploads).map(\.destination))
        #expect(sent == Set(post.media.map(\.destination)))
        #expect(documents.uploads.map(\.destination) == [post.destination])
        outbox.close()
    }

    /// Records whether each upload was told to ask the storage first, and
    /// uploads with the uploader it wraps.
    final class CheckFirstRecorder: Uploader {
        let wrapped: InMemoryUploader
        let asked = LockedValue<[(destination: URL, checksStorageFirst: Bool)]>([])

        init(_ wrapped: InMemoryUploader) {
            self.wrapped = wrapped
        }

        func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
            wrapped.upload(media, progress: progress)
        }

        func upload(
            _ media: Media, attempts: UploadAttempts, progress: @escaping @Sendable (UploadProgress) -> Void
        ) -> Job<UploadReceipt> {
            asked.withValue { $0.append((media.destination, attempts.checksStorageFirst)) }
            return wrapped.upload(media, attempts: attempts, progress: progress)
        }
    }

    @Test func aPostResumedFromTheFolderAsksTheStorageFirstAndANewOneDoesNot() throws {
        defer { folder.remove() }
        let post = outboxPost("a", photos: 3, videos: 0)
        let first = CheckFirstRecorder(InMemoryUploader(latency: .seconds(1)))
        var outbox = try open(first, maxConcurrentUploads: 1)
        try outbox.add(post)
        try queue.advance(by: .seconds(1))
        outbox.close()  // as a kill would, the second upload half-way

        let second = CheckFirstRecorder(InMemoryUploader())
        outbox = try open(second, maxConcurrentUploads: 1)
        try queue.run()
        let fresh = outboxPost("b", photos: 1, videos: 0)
        try outbox.add(fresh)
        try queue.run()

        #expect(first.asked.value.map(\.checksStorageFirst) == [false, false], "a post added in this run")
        #expect(
            second.asked.value.map(\.destination)
                == [post.media[1].destination, post.media[2].destination, post.destination!]
                + fresh.media.map(\.destination) + [fresh.destination!])
        #expect(
            second.asked.value.map(\.checksStorageFirst) == [true, true, true, false, false],
            "the post resumed from the folder, its document too; not the one added after")
        outbox.close()
    }

    @Test func aRelaunchSendsOnlyWhatIsNotStored() throws {
        defer { folder.remove() }
        let first = InMemoryUploader(latency: .seconds(1))
        let post = outboxPost("a", photos: 3, videos: 1)
        var outbox = try open(first, maxConcurrentUploads: 1)
        try outbox.add(post)
        try queue.advance(by: .seconds(2))
        #expect(first.uploads.count == 2)
        outbox.close()  // as a kill would: the third upload stops half-way
        #expect(first.cancelledDestinations == [post.media[2].destination])

        let second = InMemoryUploader(latency: .seconds(1))
        outbox = try open(second, maxConcurrentUploads: 1)
        #expect(outbox.posts.map(\.storedMediaCount) == [2])
        try queue.advance(by: .seconds(10))
        #expect(
            second.startedDestinations == [post.media[2].destination, post.media[3].destination, post.destination!],
            "no stored medium is sent again")
        let receipts = try record(of: post).media.compactMap { $0.receipt?.receipt }
        #expect(second.uploads.last?.bytes == documentBytes(post, receipts))
        #expect(outbox.posts.map(\.state) == [.published])
        outbox.close()
    }

    @Test func aPublishedPostIsNeverUploadedAgainNorAddedTwice() throws {
        defer { folder.remove() }
        let post = outboxPost("a")
        var outbox = try open(InMemoryUploader())
        let id = try outbox.add(post)
        #expect(try outbox.add(post) == id)
        #expect(outbox.posts.count == 1, "the same post added twice is one entry")
        try queue.run()
        outbox.close()

        let again = InMemoryUploader()
        outbox = try open(again)
        #expect(try outbox.add(post, priority: .high) == id)
        try queue.run()
        #expect(again.startedDestinations.isEmpty)
        #expect(outbox.posts.map(\.state) == [.published] && outbox.posts.map(\.priority) == [.normal])
        outbox.close()
    }

    @Test func theDocumentCarriesOneIdempotencyKeyOnEveryAttemptAndAcrossLaunches() throws {
        defer { folder.remove() }
        let post = outboxPost("a", photos: 1, videos: 0)
        let first = KeyRecordingUploader(InMemoryUploader())
        first.base.fail(post.destination!, with: URLError(.notConnectedToInternet))
        var outbox = try open(first, retry: exactRetries(2, initial: .seconds(1)))
        let id = try outbox.add(post)
        try queue.advance(by: .seconds(5))
        #expect(outbox.entry(id)?.state == .waitingForNetwork)
        #expect((outbox.entry(id)?.error as? UploadError)?.isTransient == true)
        #expect(try record(of: post).status == .pending, "waiting is not failing")
        outbox.close()

        let second = KeyRecordingUploader(InMemoryUploader())
        outbox = try open(second)
        try queue.run()
        #expect(outbox.entry(id)?.state == .published)
        let keys = first.keys(for: post.destination) + second.keys(for: post.destination)
        #expect(keys.count == 3 && Set(keys).count == 1 && keys.first! != nil, "\(keys)")
        #expect(second.keys(for: post.media[0].destination).isEmpty)
        #expect(try record(of: post).idempotencyKey == keys.first!)
        outbox.close()
    }

    @Test func postsGoByPriorityThenFirstAddedFirst() throws {
        defer { folder.remove() }
        let uploader = InMemoryUploader(latency: .seconds(1))
        let outbox = try open(uploader, maxConcurrentUploads: 1)
        let low = outboxPost("low", photos: 1, videos: 0)
        let first = outboxPost("first", photos: 1, videos: 0)
        let second = outboxPost("second", photos: 1, videos: 0)
        let high = outboxPost("high", photos: 1, videos: 0)
        try outbox.add(low, priority: .low)
        try outbox.add(first)
        try outbox.add(second)
        try outbox.add(high, priority: .high)
        #expect(outbox.posts.map(\.id.destination) == [high, first, second, low].map(\.destination))

        try queue.advance(by: .seconds(20))
        let inTurn: [URL] = [high, first, second, low].flatMap { (post: Post) -> [URL] in
            post.media.map(\.destination) + [post.destination!]
        }
        #expect(uploader.startedDestinations == inTurn)
        outbox.close()
    }

    @Test func aNewHighPriorityPostGoesNextWithoutInterruptingUploadsInFlight() throws {
        defer { folder.remove() }
        let uploader = InMemoryUploader(latency: .seconds(1))
        let outbox = try open(uploader, maxConcurrentUploads: 2)
        let normal = outboxPost("normal", photos: 3, videos: 0)
        let high = outboxPost("high", photos: 1, videos: 0)
        try outbox.add(normal)
        try queue.run()
        #expect(uploader.runningCount == 2)
        try outbox.add(high, priority: .high)
        try queue.advance(by: .seconds(1))
        #expect(uploader.cancelledDestinations.isEmpty)
        #expect(
            Array(uploader.startedDestinations.dropFirst(2).prefix(2))
                == [high.media[0].destination, normal.media[2].destination],
            "the first free slot goes to the new post, the next to the older one")
        try queue.advance(by: .seconds(10))
        #expect(outbox.posts.map(\.state) == [.published, .published])
        #expect(uploader.maxRunningCount == 2)
        outbox.close()
    }

    @Test func changesTellTheNewestListOfPostsUntilTheOutboxCloses() async throws {
        defer { folder.remove() }
        let outbox = try open(InMemoryUploader(latency: .seconds(1)))
        let changes = outbox.changes
        var iterator = changes.makeAsyncIterator()
        #expect(await iterator.next()?.isEmpty == true, "the list as it is, at once")
        try outbox.add(outboxPost("a"))
        try queue.advance(by: .seconds(10))
        let newest = await iterator.next()
        #expect(newest?.map(\.state) == [.published], "the reader skipped the lists it missed")
        outbox.close()
        #expect(await iterator.next() == nil)
    }

    @Test func postsAddedAndReadFromManyThreadsAtOnceArePublishedOnceEach() async throws {
        defer { folder.remove() }
        for round in 0..<10 {
            let uploader = InMemoryUploader()
            let outbox = try Outbox(
                folder: folder.url.appendingPathComponent("round-\(round)"), uploader: uploader,
                options: Outbox.Options(publishing: PublishOptions(maxConcurrentUploads: 3)))
            let posts = (0..<8).map { outboxPost("\(round)-\($0)", photos: 2, videos: 1) }
            DispatchQueue.concurrentPerform(iterations: 32) { index in
                // Each post is added four times, from four threads.
                _ = try? outbox.add(posts[index % posts.count], priority: Outbox.Priority.allCases[index % 3])
                outbox.networkDidChange()
                _ = outbox.posts
            }
            let published = try await withTimeLimit(.seconds(30)) {
                for await entries in outbox.changes where entries.count == posts.count {
                    if entries.allSatisfy({ $0.state == .published }) { return entries }
                }
                throw CancellationError()
            }
            outbox.close()
            #expect(published.count == posts.count)
            let stored = uploader.uploads.map(\.destination)
            #expect(stored.count == posts.count * 4 && Set(stored).count == stored.count, "each upload once")
            #expect(uploader.maxRunningCount <= 3)
        }
    }

    /// A record of one post of `media` photos.
    static func unitRecord(media count: Int) -> OutboxRecord {
        let media = (0..<count).map {
            OutboxRecord.Medium(
                file: URL(fileURLWithPath: "/photo-\($0).jpg"), destination: destination("a/photo-\($0).jpg"),
                contentType: "image/jpeg", size: 10, isCopy: false, idempotencyKey: "m\($0)")
        }
        return OutboxRecord(
            destination: destination("a/post.json"), text: "a", photoCount: count, media: media, priority: .normal,
            sequence: 0, status: .pending, idempotencyKey: "p")
    }

    @Test func anOutboxLetGoOfGoesOnWhileItsUploadsAreInFlightAndReleasesItsFolderAfterTheLast() throws {
        defer { folder.remove() }
        let post = outboxPost("a", photos: 1, videos: 0)
        weak var released: Outbox?
        do {
            let outbox = try open(InMemoryUploader(latency: .seconds(1)))
            released = outbox
            try outbox.add(post)
            try queue.run()
        }
        #expect(released != nil, "its upload holds it")
        #expect(throws: OutboxError.self, "the folder is still its") { try open(InMemoryUploader()) }
        try queue.advance(by: .seconds(2))
        #expect(released == nil, "it went once the document was stored")
        #expect(try record(of: post).status == .published)
        try open(InMemoryUploader()).close()
    }

    @Test func anOutboxLetGoOfWhileAHostIsHeldGoesAtOnce() throws {
        defer { folder.remove() }
        let post = outboxPost("a", photos: 1, videos: 0)
        let server = ScriptedServer(queue: queue) { _, _ in .status(503, retryAfter: 60) }
        weak var released: Outbox?
        do {
            let outbox = try open(server)
            released = outbox
            let id = try outbox.add(post)
            try queue.advance(by: .seconds(1))
            #expect(outbox.entry(id)?.state == .waitingForNetwork, "it waits out the host's hold")
            #expect(queue.pendingCount > 0, "the hold's end is armed")
        }
        #expect(released == nil, "neither the hold nor the wait holds it")
        let reopened = try open(InMemoryUploader())
        try queue.advance(by: .seconds(600))
        reopened.close()
        #expect(try record(of: post).status == .published)
    }
}
