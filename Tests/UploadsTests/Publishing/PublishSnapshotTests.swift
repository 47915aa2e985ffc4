import Foundation
import JobKit
import JobKitTesting
import Testing
import Uploads
import UploadsTesting

@Suite("Publish snapshots", .timeLimit(.minutes(1)))
struct PublishSnapshotTests {
    @Test func aPublishingInFlightNamesEachUploadWithItsBytesSent() throws {
        let queue = TestQueue()
        let uploader = InMemoryUploader(latency: .seconds(1))
        let post = samplePost(photoSizes: [1_000, 2_000, 3_000], videoSizes: [1_800_000])
        let options = PublishOptions(
            maxConcurrentUploads: 2, retry: RetryPolicy(attempts: 3), uploadTimeout: .seconds(30))
        let handle = Job.publishing(post, using: uploader, options: options).perform(on: queue) { _ in }

        try queue.advance(by: .seconds(1))
        #expect(
            handle.stallReport() == """
                2 jobs have not completed:
                  publish ▸ group 2/4 ▸ retry 1/3 ▸ timeout 30 s ▸ upload 2.jpg (running, 1.5 of 3 kB sent)
                  publish ▸ group 2/4 ▸ retry 1/3 ▸ timeout 30 s ▸ upload 0.mp4 (running, 0.9 of 1.8 MB sent)

                publish (running)
                └─ group 2/4 (running)
                   ├─ retry 1/3 (running)
                   │  └─ timeout 30 s (running)
                   │     └─ upload 2.jpg (running, 1.5 of 3 kB sent)  ◀
                   └─ retry 1/3 (running)
                      └─ timeout 30 s (running)
                         └─ upload 0.mp4 (running, 0.9 of 1.8 MB sent)  ◀
                """)

        try queue.advance(by: .seconds(1))
        #expect(
            handle.snapshot().pendingLeaves.map { $0.map(\.title) } == [
                ["publish", "retry 1/3", "timeout 30 s", "upload 1.json"]
            ])

        handle.cancel()
        #expect(handle.snapshot().line == "publish (cancelled)")
        #expect(handle.stallReport() == nil)
    }

    @Test func anUploadThatNeverCallsBackIsTheOneTheReportNames() throws {
        let queue = TestQueue()
        let post = samplePost(photoSizes: [1_000, 2_000], videoSizes: [18_000])
        let uploader = StallingUploader(base: InMemoryUploader(), stalling: post.videos[0].media.destination)
        let handle = Job.publishing(post, using: uploader).perform(on: queue) { _ in }

        try queue.run()
        #expect(queue.isIdle)
        #expect(!handle.isCompleted)
        #expect(
            handle.stallReport()?.split(separator: "\n").prefix(2) == [
                "1 job has not completed:",
                "  publish ▸ group 2/3 ▸ retry 1/3 ▸ upload 0.mp4 (running, 7.6 of 18 kB sent)",
            ])
        handle.cancel()
    }

    @Test func anUploadJobNamesItselfAfterItsDestinationAndSaysWhatItSent() throws {
        let queue = TestQueue()
        let video = Video(bytes: Data(count: 18_000), destination: destination("videos/video-2.mp4"))
        let uploader = StallingUploader(base: InMemoryUploader(), stalling: video.media.destination)
        let handle = Job.uploading(video, using: uploader).perform(on: queue) { _ in }
        #expect(handle.snapshot().line == "job (waiting to start)")

        try queue.run()
        #expect(handle.snapshot().line == "upload video-2.mp4 (running, 7.6 of 18 kB sent)")
        handle.cancel()
        #expect(handle.snapshot().line == "upload video-2.mp4 (cancelled)")
    }

    @Test func beforeItsFirstProgressReportAnUploadSaysNothingIsSentOfItsSize() throws {
        let queue = TestQueue()
        let photo = Photo(bytes: Data(count: 2_500), destination: destination("photos/photo-1.jpg"))
        let silent = Job<UploadReceipt> { controller in
            controller.onCancel { withExtendedLifetime(controller) {} }
        }
        let handle = Job.uploading(photo, using: FixedJobUploader(job: silent)).perform(on: queue) { _ in }
        try queue.run()
        #expect(handle.snapshot().line == "upload photo-1.jpg (running, 0 of 2.5 kB sent)")
        handle.cancel()
    }

    @Test(
        arguments: [
            (0, 512, "0 of 512 bytes sent"),
            (512, 512, "512 of 512 bytes sent"),
            (450, 1_000, "0.5 of 1 kB sent"),
            (4_200_000, 18_000_000, "4.2 of 18 MB sent"),
            (17_600_000, 18_000_000, "18 of 18 MB sent"),
            (12_340_000, 26_000_000, "12 of 26 MB sent"),
            (999_999, 1_000_000, "1 of 1 MB sent"),
            (1_500_000_000, 3_000_000_000, "1.5 of 3 GB sent"),
        ] as [(Int64, Int64, String)])
    func progressSaysTheBytesSentInTheUnitOfTheTotal(sent: Int64, total: Int64, expected: String) {
        #expect(UploadProgress(bytesSent: sent, bytesTotal: total).description == expected)
    }
}

/// Forwards every upload to `base` but one: the upload to `stalling`
/// reports 42% of its bytes sent and then never calls back.
private struct StallingUploader: Uploader {
    let base: any Uploader
    let stalling: URL

    func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
        guard media.destination == stalling else { return base.upload(media, progress: progress) }
        return Job { controller in
            let total = (try? media.byteCount()) ?? 0
            progress(UploadProgress(bytesSent: total * 42 / 100, bytesTotal: total))
            controller.onCancel { withExtendedLifetime(controller) {} }
        }
    }
}

/// Hands out the same job for every upload.
private struct FixedJobUploader: Uploader {
    let job: Job<UploadReceipt>

    func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
        job
    }
}
