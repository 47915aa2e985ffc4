import Foundation
import JobKit
import JobKitTesting
import Testing
import Uploads
import UploadsTesting

@Suite("DirectoryUploader", .timeLimit(.minutes(1)))
struct DirectoryUploaderTests {
    @Test func writesBytesAndFilesBelowTheRootCreatingFolders() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let source = try folder.file("source/surf.mov", bytes: patternedBytes(700_000))
        let root = folder.url.appendingPathComponent("root")
        let uploader = try DirectoryUploader(root: root, chunkSize: 64 * 1024)
        let recorder = OutcomeRecorder()
        Job.sequence([
            Job.uploading(
                Photo(bytes: patternedBytes(1_000), destination: destination("posts/1/beach.jpg")), using: uploader
            ).discardingValue(),
            Job.uploading(Video(file: source, destination: destination("posts/1/videos/surf.mov")), using: uploader)
                .discardingValue(),
        ])
        .perform(on: ImmediateQueue(), then: recorder.handler)

        #expect(recorder.isSucceeded)
        #expect(try Data(contentsOf: root.appendingPathComponent("posts/1/beach.jpg")) == patternedBytes(1_000))
        #expect(try Data(contentsOf: root.appendingPathComponent("posts/1/videos/surf.mov")) == patternedBytes(700_000))
        #expect(folder.files() == ["root/posts/1/beach.jpg", "root/posts/1/videos/surf.mov", "source/surf.mov"])
    }

    @Test func writesAtomicallyAndReportsProgressChunkByChunk() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let queue = TestQueue()
        let uploader = try DirectoryUploader(root: folder.url, chunkSize: 100)
        let target = folder.url.appendingPathComponent("photos/a.jpg")
        _ = try folder.file("photos/a.jpg", bytes: Data("old".utf8))
        let reports = LockedValue<[UploadProgress]>([])
        let recorder = OutcomeRecorder()
        Job.uploading(Photo(bytes: patternedBytes(250), destination: destination("photos/a.jpg")), using: uploader) {
            progress in reports.withValue { $0.append(progress) }
        }
        .perform(on: queue, then: recorder.handler)

        #expect(queue.runNext())
        #expect(queue.runNext())
        // Two chunks written: the old file is still whole, the new one is
        // hidden beside it.
        #expect(try Data(contentsOf: target) == Data("old".utf8))
        #expect(folder.files().count == 2)
        #expect(reports.value.map(\.bytesSent) == [100, 200])
        try queue.run()
        #expect(recorder.isSucceeded)
        #expect(try Data(contentsOf: target) == patternedBytes(250))
        #expect(folder.files() == ["photos/a.jpg"])
        #expect(reports.value == [100, 200, 250].map { UploadProgress(bytesSent: $0, bytesTotal: 250) })
    }

    @Test func cancellingMidwayLeavesNothingBehind() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let queue = TestQueue()
        let uploader = try DirectoryUploader(root: folder.url, chunkSize: 100)
        let recorder = OutcomeRecorder()
        let handle = Job.uploading(
            Photo(bytes: patternedBytes(1_000), destination: destination("a.jpg")), using: uploader
        )
        .perform(on: queue, then: recorder.handler)
        _ = queue.runNext()
        _ = queue.runNext()
        #expect(folder.files().count == 1)

        handle.cancel()
        // Removed at once, not at the copy's next step, so a process that
        // exits right after cancelling leaves nothing either.
        #expect(folder.files().isEmpty)
        try queue.run()
        #expect(recorder.error is CancellationError)
        #expect(folder.files().isEmpty)
    }

    @Test func pacesChunksAtTheSimulatedSpeedInTheQueuesTime() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let queue = TestQueue()
        let uploader = try DirectoryUploader(root: folder.url, bytesPerSecond: 100, chunkSize: 100)
        let recorder = OutcomeRecorder()
        Job.uploading(Photo(bytes: patternedBytes(1_000), destination: destination("a.jpg")), using: uploader)
            .perform(on: queue, then: recorder.handler)

        try queue.advance(by: .seconds(9))
        #expect(recorder.outcomes.isEmpty)
        try queue.advance(by: .seconds(1))
        #expect(recorder.isSucceeded)
        #expect(queue.now == .seconds(10))
    }

    @Test(arguments: [
        "photos/../../escape.jpg",
        "photos/%2E%2E/%2E%2E/escape.jpg",
        "..",
        "",
        "photos/",
    ])
    func refusesDestinationsThatLeaveTheRootOrNameNoFile(path: String) throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let uploader = try DirectoryUploader(root: folder.url.appendingPathComponent("root"))
        let target = URL(string: "https://uploads.example.com/\(path)")!
        #expect(throws: UploadError.self) { try uploader.validate(destination: target) }

        let recorder = OutcomeRecorder()
        Job.uploading(Photo(bytes: patternedBytes(10), destination: target), using: uploader)
            .perform(on: ImmediateQueue(), then: recorder.handler)
        guard case .invalidDestination(let refused, _) = recorder.error as? UploadError else {
            Issue.record("expected invalidDestination, got \(String(describing: recorder.error))")
            return
        }
        #expect(refused == target)
        #expect(folder.files().isEmpty)
    }

    /// `root-evil` is a sibling whose path starts with the root's: a check
    /// of "inside" by a bare prefix would let it through.
    @Test(arguments: ["outside", "root-evil"])
    func refusesASymbolicLinkThatPointsOutOfTheRoot(to sibling: String) throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let root = folder.url.appendingPathComponent("root")
        let outside = folder.url.appendingPathComponent(sibling)
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: outside, withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(at: root.appendingPathComponent("link"), withDestinationURL: outside)
        let uploader = try DirectoryUploader(root: root)
        let target = destination("link/deeper/escape.jpg")
        #expect(throws: UploadError.self) { try uploader.validate(destination: target) }

        let recorder = OutcomeRecorder()
        Job.uploading(Photo(bytes: patternedBytes(10), destination: target), using: uploader)
            .perform(on: ImmediateQueue(), then: recorder.handler)
        guard case .invalidDestination = recorder.error as? UploadError else {
            Issue.record("expected invalidDestination, got \(String(describing: recorder.error))")
            return
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: outside.path).isEmpty)
    }

    @Test func refusesADanglingLinkOutOfTheRootBeforeTheFirstUpload() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let root = folder.url.appendingPathComponent("root")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(
            at: folder.url.appendingPathComponent("outside"), withIntermediateDirectories: true)
        // root/dangling -> ../outside/new, whose target does not exist.
        try FileManager.default.createSymbolicLink(
            atPath: root.appendingPathComponent("dangling").path, withDestinationPath: "../outside/new")
        let uploader = try DirectoryUploader(root: root)
        let target = destination("dangling/x.txt")
        let error = #expect(throws: UploadError.self) { try uploader.validate(destination: target) }
        guard case .invalidDestination(_, let reason) = error else {
            Issue.record("expected invalidDestination, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("links outside the root"))

        // Publishing refuses the post before anything is uploaded.
        let post = Post(
            text: "escape",
            photos: [Photo(bytes: patternedBytes(10), destination: destination("fine.jpg"))],
            videos: [Video(bytes: patternedBytes(10), destination: target)],
            destination: destination("post.json")
        )
        let recorder = OutcomeRecorder()
        Job.publishing(post, using: uploader).perform(on: ImmediateQueue(), then: recorder.handler)
        guard case .invalidDestination = recorder.error as? UploadError else {
            Issue.record("expected invalidDestination, got \(String(describing: recorder.error))")
            return
        }
        #expect(try FileManager.default.contentsOfDirectory(atPath: root.path) == ["dangling"])
        #expect(!FileManager.default.fileExists(atPath: folder.url.appendingPathComponent("outside/new").path))
    }

    @Test func aDanglingLinkInsideTheRootIsRefusedToo() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try FileManager.default.createSymbolicLink(
            atPath: folder.url.appendingPathComponent("later").path, withDestinationPath: "not-yet")
        let error = #expect(throws: UploadError.self) {
            try DirectoryUploader(root: folder.url).validate(destination: destination("later/x.txt"))
        }
        guard case .invalidDestination(_, let reason) = error else {
            Issue.record("expected invalidDestination, got \(String(describing: error))")
            return
        }
        #expect(reason.contains("does not exist"))
    }

    @Test func followsASymbolicLinkThatStaysInsideTheRoot() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let root = folder.url
        try FileManager.default.createDirectory(
            at: root.appendingPathComponent("real"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            at: root.appendingPathComponent("alias"),
            withDestinationURL: root.appendingPathComponent("real")
        )
        let recorder = OutcomeRecorder()
        Job.uploading(
            Photo(bytes: patternedBytes(10), destination: destination("alias/a.jpg")),
            using: try DirectoryUploader(root: root)
        )
        .perform(on: ImmediateQueue(), then: recorder.handler)

        #expect(recorder.isSucceeded)
        #expect(try Data(contentsOf: root.appendingPathComponent("real/a.jpg")) == patternedBytes(10))
    }

    @Test func aMissingSourceFileFailsWithoutWritingAnything() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let missing = folder.url.appendingPathComponent("missing.mov")
        let recorder = OutcomeRecorder()
        Job.uploading(
            Video(file: missing, destination: destination("videos/v.mp4")),
            using: try DirectoryUploader(root: folder.url)
        )
        .perform(on: ImmediateQueue(), then: recorder.handler)

        #expect(recorder.error as? UploadError == .fileNotFound(missing))
        #expect(try FileManager.default.contentsOfDirectory(atPath: folder.url.path).isEmpty)
    }
}
