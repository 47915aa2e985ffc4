import Foundation
import JobKit
import JobKitTesting
import Testing
import Uploads
import UploadsTesting

@Suite("Publishing", .timeLimit(.minutes(1)))
struct PublishingTests {
    @Test func creatingThePublishingJobUploadsNothingAndEachPerformanceUploadsAgain() throws {
        let uploader = InMemoryUploader()
        let post = samplePost(photoSizes: [10, 20])
        let publishing = Job.publishing(post, using: uploader)
        #expect(uploader.startedDestinations.isEmpty)

        publishing.perform(on: ImmediateQueue()) { _ in }
        publishing.perform(on: ImmediateQueue()) { _ in }
        #expect(uploader.uploads.count == 6)
        #expect(uploader.uploads.filter { $0.destination == post.destination }.count == 2)
    }

    @Test(arguments: [1, 2, 10])
    func uploadsThePostOnceAndOnlyAfterEveryMediaUploadSucceeded(maxConcurrent: Int) throws {
        let queue = TestQueue()
        let uploader = InMemoryUploader(latency: .seconds(1))
        let post = samplePost(photoSizes: [10, 20, 30, 40], videoSizes: [100, 200])
        let recorder = OutcomeRecorder()
        Job.publishing(post, using: uploader, options: PublishOptions(maxConcurrentUploads: maxConcurrent))
            .perform(on: queue, then: recorder.handler)

        while !queue.isIdle {
            try queue.advance(by: .seconds(1))
            let finished = Set(uploader.uploads.map(\.destination))
            if uploader.startedDestinations.contains(post.destination!) {
                #expect(finished.isSuperset(of: post.media.map(\.destination)))
            }
            #expect(uploader.maxRunningCount <= maxConcurrent)
        }
        #expect(recorder.isSucceeded)
        #expect(uploader.startedDestinations.filter { $0 == post.destination }.count == 1)
        #expect(uploader.uploads.last?.destination == post.destination)
        #expect(Set(uploader.uploads.dropLast().map(\.destination)) == Set(post.media.map(\.destination)))
    }

    @Test func aDocumentUploaderOfItsOwnUploadsThePostAndOnlyThePost() throws {
        let media = InMemoryUploader()
        let documents = InMemoryUploader()
        let post = samplePost(photoSizes: [3, 4], videoSizes: [5])
        let recorder = OutcomeRecorder()
        Job.publishing(post, using: media, options: PublishOptions(documentUploader: documents))
            .perform(on: ImmediateQueue(), then: recorder.handler)

        #expect(recorder.isSucceeded)
        #expect(media.uploads.map(\.destination) == post.media.map(\.destination))
        #expect(documents.uploads.map(\.destination) == [post.destination])
        #expect(recorder.value(as: PublishReceipt.self)?.post.destination == post.destination)
    }

    @Test func aDocumentUploaderThatRefusesThePostsDestinationFailsItBeforeAnyUpload() throws {
        struct Refusing: Uploader {
            func validate(destination: URL) throws(UploadError) {
                throw .invalidDestination(destination, reason: "not a status endpoint")
            }
            func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
                .failed(UploadError.invalidDestination(media.destination, reason: "not a status endpoint"))
            }
        }
        let media = InMemoryUploader()
        let post = samplePost(photoSizes: [3])
        let recorder = OutcomeRecorder()
        Job.publishing(post, using: media, options: PublishOptions(documentUploader: Refusing()))
            .perform(on: ImmediateQueue(), then: recorder.handler)

        guard case .invalidDestination(let destination, _) = recorder.error as? UploadError else {
            Issue.record("not refused: \(String(describing: recorder.error))")
            return
        }
        #expect(destination == post.destination)
        #expect(media.startedDestinations.isEmpty)
    }

    @Test func uploadsTheBytesAndContentTypesOfEachPart() throws {
        let uploader = InMemoryUploader()
        let post = samplePost(photoSizes: [3], videoSizes: [5])
        Job.publishing(post, using: uploader).perform(on: ImmediateQueue()) { _ in }

        let received = Dictionary(uniqueKeysWithValues: uploader.uploads.map { ($0.destination, $0) })
        #expect(received[post.photos[0].media.destination]?.bytes == patternedBytes(3, seed: 0))
        #expect(received[post.photos[0].media.destination]?.contentType == "image/jpeg")
        #expect(received[post.videos[0].media.destination]?.contentType == "video/mp4")
        let document = try #require(received[post.destination!])
        #expect(document.contentType == "application/json")
        let json = try JSONSerialization.jsonObject(with: document.bytes) as? [String: Any]
        #expect(json?["text"] as? String == "Surf's up")
        let photos = json?["photos"] as? [[String: String]]
        #expect(photos?.map { $0["url"] } == [post.photos[0].media.destination.absoluteString])
        #expect(photos?.first?["etag"] == InMemoryUploader.created(post.photos[0].media, patternedBytes(3)).etag)
        let videos = json?["videos"] as? [[String: String]]
        #expect(videos?.map { $0["url"] } == [post.videos[0].media.destination.absoluteString])
    }

    @Test func receiptsComeInInputOrderWhateverTheCompletionOrder() throws {
        let queue = TestQueue()
        let post = samplePost(photoSizes: [10, 20], videoSizes: [30])
        // The first photo is the slowest, the video the fastest.
        let fast = InMemoryUploader(latency: .seconds(1))
        let uploader = RoutingUploader(
            routes: [
                post.photos[0].media.destination: InMemoryUploader(latency: .seconds(3)),
                post.photos[1].media.destination: InMemoryUploader(latency: .seconds(2)),
            ],
            fallback: fast
        )
        let recorder = OutcomeRecorder()
        Job.publishing(post, using: uploader).perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(10))

        let published = try #require(recorder.value(as: PublishReceipt.self))
        #expect(published.media.map(\.destination) == post.media.map(\.destination))
        #expect(published.post.destination == post.destination)
        #expect(fast.uploads.map(\.destination) == [post.videos[0].media.destination, post.destination])
        let document = try #require(fast.uploads.last?.bytes)
        let json = try JSONSerialization.jsonObject(with: document) as? [String: Any]
        let urls = ((json?["photos"] as? [[String: String]]) ?? []) + ((json?["videos"] as? [[String: String]]) ?? [])
        #expect(urls.map { $0["url"] } == post.media.map(\.destination.absoluteString))
        #expect(urls.map { $0["etag"] } == published.media.map(\.etag))
    }

    @Test func aFailedMediaUploadFailsThePublishingAndNoLaterUploadStarts() throws {
        let queue = TestQueue()
        let uploader = InMemoryUploader(latency: .seconds(1))
        let post = samplePost(photoSizes: [10, 20, 30, 40])
        let failing = post.photos[1].media.destination
        uploader.fail(failing, with: unavailable(failing))
        let recorder = OutcomeRecorder()
        let options = PublishOptions(maxConcurrentUploads: 1, retry: exactRetries(3, initial: .seconds(1)))
        Job.publishing(post, using: uploader, options: options).perform(on: queue, then: recorder.handler)

        try queue.advance(by: .seconds(60))
        #expect(recorder.error as? UploadError == unavailable(failing))
        #expect(recorder.outcomes.count == 1)
        #expect(uploader.startedDestinations.filter { $0 == failing }.count == 3)
        #expect(!uploader.startedDestinations.contains(post.photos[2].media.destination))
        #expect(!uploader.startedDestinations.contains(post.destination!))
        #expect(uploader.uploads.map(\.destination) == [post.photos[0].media.destination])
    }

    @Test func theFirstFailureCancelsTheUploadsInFlight() throws {
        let queue = TestQueue()
        let uploader = InMemoryUploader(latency: .seconds(1))
        let post = samplePost(photoSizes: [10, 20, 30])
        uploader.fail(post.photos[0].media.destination, with: TestFailure(id: 1))
        let slow = InMemoryUploader(latency: .seconds(10))
        // Photo 0 fails after 1 s on the fast uploader; the others take 10 s.
        let routed = RoutingUploader(routes: [post.photos[0].media.destination: uploader], fallback: slow)
        let recorder = OutcomeRecorder()
        Job.publishing(post, using: routed).perform(on: queue, then: recorder.handler)

        try queue.advance(by: .seconds(1))
        #expect(recorder.error as? TestFailure == TestFailure(id: 1))
        #expect(Set(slow.cancelledDestinations) == Set(post.photos.dropFirst().map(\.media.destination)))
        #expect(slow.runningCount == 0)
        try queue.advance(by: .seconds(60))
        #expect(slow.uploads.isEmpty)
        #expect(recorder.outcomes.count == 1)
    }

    @Test func aRetriedUploadThatSucceedsLetsThePostThrough() throws {
        let queue = TestQueue()
        let uploader = InMemoryUploader(latency: .seconds(1))
        let post = samplePost(photoSizes: [10, 20])
        uploader.fail(post.photos[1].media.destination, with: URLError(.networkConnectionLost), times: 2)
        let recorder = OutcomeRecorder()
        let options = PublishOptions(retry: exactRetries(3, initial: .seconds(2), maximum: .seconds(60)))
        Job.publishing(post, using: uploader, options: options).perform(on: queue, then: recorder.handler)

        // Attempt 1 fails at 1 s; retry 1 waits 2 s and fails at 4 s; retry 2
        // waits 4 s and succeeds at 9 s; the post is uploaded at 10 s.
        try queue.advance(by: .seconds(9))
        #expect(recorder.outcomes.isEmpty)
        #expect(uploader.uploads.count == 2)
        try queue.advance(by: .seconds(1))
        #expect(recorder.isSucceeded)
        #expect(uploader.uploads.last?.destination == post.destination)
    }

    @Test func cancellingStopsEveryUploadInFlightAndStartsNoOther() throws {
        let queue = TestQueue()
        let uploader = InMemoryUploader(latency: .seconds(10))
        let post = samplePost(photoSizes: [10, 20, 30, 40, 50])
        let recorder = OutcomeRecorder()
        let handle = Job.publishing(post, using: uploader, options: PublishOptions(maxConcurrentUploads: 3))
            .perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(5))
        #expect(uploader.runningCount == 3)

        handle.cancel()
        try queue.run()
        #expect(recorder.error is CancellationError)
        #expect(Set(uploader.cancelledDestinations) == Set(post.photos.prefix(3).map(\.media.destination)))
        #expect(uploader.runningCount == 0)
        try queue.advance(by: .seconds(100))
        #expect(uploader.startedDestinations.count == 3)
        #expect(uploader.uploads.isEmpty)
        #expect(recorder.outcomes.count == 1)
    }

    @Test func eachUploadAttemptHasItsOwnTimeLimit() throws {
        let queue = TestQueue()
        let uploader = InMemoryUploader(latency: .seconds(10))
        let recorder = OutcomeRecorder()
        let options = PublishOptions(retry: exactRetries(2, initial: .seconds(1)), uploadTimeout: .seconds(3))
        Job.publishing(samplePost(photoSizes: [10]), using: uploader, options: options)
            .perform(on: queue, then: recorder.handler)

        try queue.advance(by: .seconds(3))
        #expect(recorder.outcomes.isEmpty)
        #expect(uploader.cancelledDestinations.count == 1)
        try queue.advance(by: .seconds(4))
        #expect(recorder.error as? UploadError == .timedOut(destination("photos/0.jpg"), after: .seconds(3)))
        #expect(uploader.cancelledDestinations.count == 2)
        #expect(uploader.uploads.isEmpty)
    }

    // MARK: - Bad input

    @Test func aMissingFileFailsBeforeAnythingIsUploaded() throws {
        let uploader = InMemoryUploader()
        let missing = URL(fileURLWithPath: "/nonexistent/\(UUID().uuidString).mov")
        var post = samplePost(photoSizes: [10])
        post.videos = [Video(file: missing, destination: destination("videos/missing.mp4"))]
        let recorder = OutcomeRecorder()
        Job.publishing(post, using: uploader).perform(on: ImmediateQueue(), then: recorder.handler)

        #expect(recorder.error as? UploadError == .fileNotFound(missing))
        #expect(uploader.startedDestinations.isEmpty)
    }

    @Test func aFolderInPlaceOfAFileIsUnreadable() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        var post = samplePost(photoSizes: [])
        post.photos = [Photo(file: folder.url, destination: destination("photos/folder.jpg"))]
        let recorder = OutcomeRecorder()
        Job.publishing(post, using: InMemoryUploader()).perform(on: ImmediateQueue(), then: recorder.handler)

        guard case .unreadableFile(let url, _) = recorder.error as? UploadError else {
            Issue.record("expected unreadableFile, got \(String(describing: recorder.error))")
            return
        }
        #expect(url == folder.url)
    }

    @Test func aPostWithoutDestinationFailsBeforeAnythingIsUploaded() throws {
        let uploader = InMemoryUploader()
        let recorder = OutcomeRecorder()
        Job.publishing(samplePost(photoSizes: [10], destination: nil), using: uploader)
            .perform(on: ImmediateQueue(), then: recorder.handler)

        #expect(recorder.error as? UploadError == .missingDestination)
        #expect(uploader.startedDestinations.isEmpty)
        let single = OutcomeRecorder()
        Job.uploading(samplePost(photoSizes: [], destination: nil), using: uploader)
            .perform(on: ImmediateQueue(), then: single.handler)
        #expect(single.error as? UploadError == .missingDestination)
    }

    @Test func aDestinationTheUploaderRefusesFailsBeforeAnythingIsWritten() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let uploader = try DirectoryUploader(root: folder.url.appendingPathComponent("root"))
        var post = samplePost(photoSizes: [10, 20])
        post.photos[1].media.destination = destination("photos/../../escape.jpg")
        let recorder = OutcomeRecorder()
        Job.publishing(post, using: uploader).perform(on: ImmediateQueue(), then: recorder.handler)

        guard case .invalidDestination(let url, _) = recorder.error as? UploadError else {
            Issue.record("expected invalidDestination, got \(String(describing: recorder.error))")
            return
        }
        #expect(url == post.photos[1].media.destination)
        #expect(folder.files().isEmpty)
    }

    @Test(arguments: [
        (PublishOptions(maxConcurrentUploads: 0), "maxConcurrentUploads", "must be at least 1, got 0"),
        (PublishOptions(retry: RetryPolicy(attempts: 0)), "retry.attempts", "must be at least 1, got 0"),
        (PublishOptions(uploadTimeout: .zero), "uploadTimeout", "must be above zero, got 0.0 seconds"),
    ])
    func optionsBelowOneAreRefused(options: PublishOptions, option: String, reason: String) throws {
        let uploader = InMemoryUploader()
        let recorder = OutcomeRecorder()
        Job.publishing(samplePost(photoSizes: [10]), using: uploader, options: options)
            .perform(on: ImmediateQueue(), then: recorder.handler)

        #expect(recorder.error as? InvalidOptionError == InvalidOptionError(option: option, reason: reason))
        #expect(uploader.startedDestinations.isEmpty)
    }
}
