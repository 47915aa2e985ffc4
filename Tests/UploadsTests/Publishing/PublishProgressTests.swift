import Dispatch
import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing
import Uploads
import UploadsTesting

@Suite("Publish progress", .timeLimit(.minutes(1)))
struct PublishProgressTests {
    @Test func isTheByteWeightedSumOfTheUploads() throws {
        let queue = TestQueue()
        let post = samplePost(photoSizes: [100, 300])
        let slowPhoto = InMemoryUploader(latency: .seconds(10))
        let uploader = RoutingUploader(
            routes: [post.photos[1].media.destination: slowPhoto],
            fallback: InMemoryUploader(latency: .seconds(1))
        )
        let progress = ProgressRecorder()
        Job.publishing(post, using: uploader, progress: progress.handler).perform(on: queue) { _ in }
        // The document is built from the media's receipts: its size counts
        // only once it is built.
        let total: Int64 = 400

        try queue.run()
        // Each in-memory attempt reports half its bytes when it starts.
        let started = try #require(progress.reports.last)
        #expect(started.bytesSent == 50 + 150)
        #expect(progress.reports.last?.bytesTotal == total)
        try queue.advance(by: .seconds(1))
        let afterFirstPhoto = try #require(progress.reports.last)
        #expect(afterFirstPhoto.bytesSent == 100 + 150)
        #expect(afterFirstPhoto.finishedCount == 1)
        #expect(afterFirstPhoto.fractionCompleted == Double(250) / Double(total))
        #expect(afterFirstPhoto.uploads.map(\.destination) == post.media.map(\.destination) + [post.destination!])

        try queue.advance(by: .seconds(9))  // the slow photo is done at 10 s
        let built = try #require(progress.reports.last { $0.uploads.last?.bytesTotal ?? 0 > 0 })
        let documentSize = built.uploads.last?.bytesTotal ?? 0
        #expect(documentSize > 100, "the document's own size, once built")
        #expect(built.bytesTotal == 400 + documentSize)
        #expect(built.fractionCompleted < 1)
        try queue.advance(by: .seconds(1))  // the post is done at 11 s
        #expect(progress.reports.last?.fractionCompleted == 1)
        #expect(progress.neverGoesBackwards)
    }

    @Test func reachesOneOnlyWhenThePostIsUploaded() throws {
        let queue = TestQueue()
        let post = samplePost(photoSizes: [100], videoSizes: [1_000])
        let progress = ProgressRecorder()
        let recorder = OutcomeRecorder()
        Job.publishing(post, using: InMemoryUploader(latency: .seconds(1)), progress: progress.handler)
            .perform(on: queue, then: recorder.handler)

        try queue.advance(by: .seconds(1))
        #expect(progress.reports.allSatisfy { $0.fractionCompleted < 1 })
        let document = try #require(progress.reports.last?.uploads.last)
        #expect(document.bytesTotal > 0, "the document is built once the media are done")
        #expect(document.bytesSent < document.bytesTotal, "the document's own bytes, not the whole post's")
        #expect(!document.isFinished)
        try queue.advance(by: .seconds(1))
        #expect(recorder.isSucceeded)
        #expect(progress.reports.last?.fractionCompleted == 1)
        #expect(progress.reports.last?.isFinished == true)
        #expect(progress.reports.dropLast().allSatisfy { $0.fractionCompleted < 1 })
        #expect(progress.neverGoesBackwards)
    }

    @Test func anUploadThatSentEveryByteAndThenFailedIsNotDone() throws {
        let queue = TestQueue()
        let post = samplePost(photoSizes: [1_000])
        let uploader = ScriptedProgressUploader(script: [[400, 1_000]], failing: 1)
        let progress = ProgressRecorder()
        let recorder = OutcomeRecorder()
        Job.publishing(
            post, using: uploader, options: PublishOptions(retry: .never), progress: progress.handler
        )
        .perform(on: queue, then: recorder.handler)
        try queue.run()

        #expect(recorder.error as? UploadError == unavailable(post.photos[0].media.destination))
        let photo = try #require(progress.reports.last?.uploads.first)
        #expect(photo.bytesSent == 999, "held one byte short: the server never said it has them")
        #expect(!photo.isFinished)
        #expect(progress.reports.allSatisfy { $0.fractionCompleted < 1 && !$0.isFinished })
    }

    @Test func aFailedPublishingNeverReachesOne() throws {
        let post = samplePost(photoSizes: [100, 200])
        let uploader = InMemoryUploader()
        uploader.fail(post.destination!, with: TestFailure(id: 3))
        let progress = ProgressRecorder()
        let recorder = OutcomeRecorder()
        Job.publishing(post, using: uploader, progress: progress.handler)
            .perform(on: ImmediateQueue(), then: recorder.handler)

        #expect(recorder.error as? TestFailure == TestFailure(id: 3))
        #expect(progress.reports.last?.finishedCount == 2)
        #expect(progress.reports.allSatisfy { $0.fractionCompleted < 1 })
    }

    @Test func neverGoesBackwardsWhenAnUploadStartsAgain() throws {
        let queue = TestQueue()
        let post = samplePost(photoSizes: [1_000])
        let uploader = ScriptedProgressUploader(script: [[600, 900], [100, 500, 950, 1_000]], failing: 1)
        let progress = ProgressRecorder()
        let recorder = OutcomeRecorder()
        Job.publishing(
            post,
            using: uploader,
            options: PublishOptions(retry: exactRetries(2, initial: .zero)),
            progress: progress.handler
        )
        .perform(on: queue, then: recorder.handler)
        try queue.run()

        #expect(recorder.isSucceeded)
        #expect(progress.neverGoesBackwards)
        let photoSent = progress.reports.map { $0.uploads[0].bytesSent }.reduce(into: [Int64]()) { changes, sent in
            if changes.last != sent { changes.append(sent) }
        }
        // 1,000 counts only once the upload succeeded: until then 999 at most.
        #expect(photoSent == [600, 900, 950, 999, 1_000])
    }

    @Test(.onThreadOfItsOwn) func isReportedOneAtATimeWhenUploadsReportFromManyThreads() async throws {
        for _ in 0..<20 {
            let post = samplePost(photoSizes: Array(repeating: 10_000, count: 8))
            let concurrentCalls = LockedValue((now: 0, most: 0))
            let progress = ProgressRecorder()
            let done = DispatchSemaphore(value: 0)
            Job.publishing(
                post,
                using: ThreadedProgressUploader(steps: 100),
                options: PublishOptions(maxConcurrentUploads: 8)
            ) { report in
                concurrentCalls.withValue {
                    $0.now += 1; $0.most = max($0.most, $0.now)
                }
                progress.handler(report)
                concurrentCalls.withValue { $0.now -= 1 }
            }
            .perform(on: DispatchQueue.global()) { _ in done.signal() }
            #expect(await done.signalled(within: 30))

            #expect(concurrentCalls.value.most == 1)
            #expect(progress.neverGoesBackwards)
            #expect(progress.reports.last?.fractionCompleted == 1)
        }
    }
}

/// An uploader whose attempts report the given bytes sent, one report per
/// queue step; the first `failing` attempts then fail.
final class ScriptedProgressUploader: Uploader {
    let script: [[Int64]]
    let failing: Int
    private let attempts = LockedValue(0)

    init(script: [[Int64]], failing: Int) {
        self.script = script
        self.failing = failing
    }

    func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
        Job { [self] controller in
            let attempt = attempts.withValue { attempt in
                defer { attempt += 1 }
                return attempt
            }
            let total = (try? media.byteCount()) ?? 0
            for sent in script[min(attempt, script.count - 1)] {
                progress(UploadProgress(bytesSent: sent, bytesTotal: total))
            }
            controller.queue.enqueue { [self] in
                if attempt < failing {
                    controller.fail(with: unavailable(media.destination))
                } else {
                    controller.finish(with: UploadReceipt(destination: media.destination))
                }
            }
        }
    }
}
