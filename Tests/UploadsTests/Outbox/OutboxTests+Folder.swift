import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing
import UploadsTesting

@testable import Uploads

/// The outbox's folder: one outbox at a time, its records and copies, and
/// writes that fail.
extension OutboxTests {
    @Test func aSecondOutboxOnTheSameFolderIsRefusedUntilTheFirstCloses() throws {
        defer { folder.remove() }
        let outbox = try open(InMemoryUploader())
        let error = #expect(throws: OutboxError.self) { try open(InMemoryUploader()) }
        #expect(error == .alreadyOpen(folder.url.appendingPathComponent("outbox")))
        #expect(
            error?.localizedDescription.hasSuffix("another Outbox has this folder open, in this process or in another")
                == true)
        outbox.close()
        try open(InMemoryUploader()).close()
    }

    @Test func aCorruptRecordIsMovedAsideAndEveryOtherPostLoads() throws {
        defer { folder.remove() }
        let post = outboxPost("a")
        var outbox = try open(InMemoryUploader(latency: .seconds(1)))
        try outbox.add(post)
        outbox.close()
        let posts = folder.url.appendingPathComponent("outbox/posts")
        try Data("{\"version\":1,".utf8).write(to: posts.appendingPathComponent("torn.json"))
        try Data("{\"version\":1}".utf8).write(to: posts.appendingPathComponent("empty.json"))
        try Data("half a rec".utf8).write(to: posts.appendingPathComponent(".x.json.1234.tmp"))

        outbox = try open(InMemoryUploader())
        #expect(outbox.posts.map(\.id.destination) == [post.destination])
        #expect(outbox.corruptRecords.map(\.file.lastPathComponent) == ["empty.json", "torn.json"])
        #expect(outbox.corruptRecords.map(\.reason) == ["it has no \"destination\"", "it is not JSON"])
        #expect(
            outbox.corruptRecords.first?.description
                == "empty.json: not a record this outbox can read (it has no \"destination\"); moved to \(folder.url.path)/outbox/corrupt/empty.json"
        )
        #expect(
            try FileManager.default.contentsOfDirectory(atPath: posts.path).count == 1,
            "the torn temporary file is gone")
        try queue.run()
        #expect(outbox.posts.map(\.state) == [.published])
        outbox.close()
    }

    @Test func theCopiesOfACorruptRecordStayWithIt() throws {
        defer { folder.remove() }
        try open(InMemoryUploader()).close()
        let outbox = folder.url.appendingPathComponent("outbox")
        try Data("{".utf8).write(to: outbox.appendingPathComponent("posts/0A1B.json"))
        try Data("photo".utf8).write(to: outbox.appendingPathComponent("media/0A1B-0"))
        try Data("stray".utf8).write(to: outbox.appendingPathComponent("media/FFFF-0"))
        try open(InMemoryUploader()).close()
        #expect(try files(in: "media").map(\.lastPathComponent) == ["0A1B-0"])
        #expect(try files(in: "corrupt").map(\.lastPathComponent) == ["0A1B.json"])
    }

    @Test func aWriteThatFailsFailsLoudlyAndLosesNoEarlierRecord() throws {
        defer { folder.remove() }
        let faults = FailingWriter()
        let first = outboxPost("first", photos: 2, videos: 0)
        let second = outboxPost("second", photos: 1, videos: 0)
        var outbox = try open(InMemoryUploader(latency: .seconds(1)), maxConcurrentUploads: 1, writer: faults.writer)
        let id = try outbox.add(first)
        try queue.advance(by: .seconds(1))
        #expect(try record(of: first).media.map { $0.receipt != nil } == [true, false])

        faults.failing.withValue { $0 = true }
        let error = #expect(throws: OutboxError.self) { try outbox.add(second) }
        guard case .writeFailed(_, let reason) = error else { Issue.record("\(String(describing: error))"); return }
        #expect(reason.contains("cannot write it"))
        #expect(outbox.posts.count == 1, "a post whose record was not written is not added")
        try queue.advance(by: .seconds(1))
        let entry = try #require(outbox.entry(id))
        #expect(entry.state == .failed, "the second receipt could not be recorded")
        #expect(entry.error.map { "\($0)" }?.contains("the outbox's record cannot be written") == true)
        #expect(try record(of: first).media.map { $0.receipt != nil } == [true, false], "the earlier record is whole")
        outbox.close()

        faults.failing.withValue { $0 = false }
        outbox = try open(InMemoryUploader(), writer: faults.writer)
        #expect(outbox.posts.map(\.storedMediaCount) == [1])
        try queue.run()
        #expect(outbox.posts.map(\.state) == [.published])
        outbox.close()
    }

    @Test func aReceiptThatCannotBeWrittenHoldsTheDocumentBackUntilRetryWritesIt() throws {
        defer { folder.remove() }
        let (faults, uploader, outbox, post, id) = try openAddingAPostThenFailingWrites()
        try queue.advance(by: .seconds(10))
        #expect(outbox.entry(id)?.state == .failed)
        #expect(
            !uploader.startedDestinations.contains(post.destination!), "no document before its receipts are on disk")
        #expect(try record(of: post).media.map { $0.receipt == nil } == [true])

        faults.failing.withValue { $0 = false }
        try outbox.retry(id)
        try queue.advance(by: .seconds(10))
        #expect(outbox.entry(id)?.state == .published)
        #expect(
            uploader.startedDestinations == [post.media[0].destination, post.destination!],
            "the medium is not sent again")
        #expect(try record(of: post).status == .published)
        outbox.close()
    }

    @Test func aPausedPostWhoseRecordCouldNotBeWrittenStaysPausedWhenRetried() throws {
        defer { folder.remove() }
        let (faults, uploader, outbox, post, id) = try openAddingAPostThenFailingWrites()
        try outbox.pause(id)
        #expect(outbox.entry(id)?.state == .failed, "the pause could not be recorded")
        #expect(try record(of: post).status == .pending)
        faults.failing.withValue { $0 = false }
        try outbox.retry(id)
        #expect(outbox.entry(id)?.state == .paused)
        #expect(try record(of: post).status == .paused)
        try queue.advance(by: .seconds(10))
        #expect(uploader.startedDestinations.isEmpty)
        outbox.close()
    }

    @Test func anOpeningKeepsTheNewerOfTwoRecordsOfAPostAndDropsCopiesNoRecordNames() throws {
        defer { folder.remove() }
        let post = outboxPost("a", photos: 1, videos: 0)
        var outbox = try open(InMemoryUploader())
        try outbox.add(post)
        outbox.close()
        // As a kill between a post's removal and its removal from disk,
        // after it was added again, would leave it.
        var newer = try record(of: post)
        newer.idempotencyKey = "newer"
        newer.sequence += 1
        newer.priority = .high
        newer.media[0].file = folder.url.appendingPathComponent("outbox/media/newer-0")
        try Data(contentsOf: record(of: post).media[0].file).write(to: newer.media[0].file)
        try JSONEncoder().encode(newer).write(to: folder.url.appendingPathComponent("outbox/posts/newer.json"))
        let stray = folder.url.appendingPathComponent("outbox/media/stray-0")
        try Data("copied, then killed".utf8).write(to: stray)

        outbox = try open(InMemoryUploader())
        #expect(outbox.posts.map(\.priority) == [.high])
        #expect(try files(in: "posts").map(\.lastPathComponent) == ["newer.json"])
        #expect(!FileManager.default.fileExists(atPath: stray.path))
        #expect(try files(in: "media").map(\.lastPathComponent) == ["newer-0"], "the copy the record names stays")
        outbox.close()
    }

    @Test func copiesAreFoundInTheFolderWhereverTheFolderMoved() throws {
        defer { folder.remove() }
        let post = outboxPost("a", photos: 1, videos: 0)
        var outbox = try open(InMemoryUploader())
        try outbox.add(post)
        outbox.close()
        let moved = folder.url.appendingPathComponent("moved")
        try FileManager.default.moveItem(at: folder.url.appendingPathComponent("outbox"), to: moved)

        let uploader = InMemoryUploader()
        outbox = try Outbox(
            folder: moved, uploader: uploader,
            options: Outbox.Options(publishing: PublishOptions(retry: RetryPolicy(attempts: 1))), queue: queue)
        try queue.run()
        #expect(outbox.posts.map(\.state) == [.published])
        #expect(uploader.uploads.first?.bytes == patternedBytes(100, seed: 0))
        outbox.close()
    }
}
