import Foundation
import JobKit
import JobKitTesting
import Testing
import Uploads
import UploadsTesting

/// Every upload is retried by exactly one policy: publishing hands its own
/// to the uploader (`upload(_:attempts:progress:)`) and wraps nothing
/// around it. (Against real storage: `S3RetryOwnerTests`.)
@Suite("One owner per retry", .timeLimit(.minutes(1)))
struct RetryOwnerTests {
    static let unavailable = UploadError.httpStatus(
        UploadReceipt(destination: destination("x"), status: 503, body: Data("busy".utf8)))

    /// A policy of `attempts` whose waits are exactly a second.
    static func policy(attempts: Int) -> RetryPolicy {
        exactRetries(attempts, initial: .seconds(1))
    }

    @Test func publishingHandsItsPolicyToTheUploaderAndRetriesNothingAroundIt() throws {
        let queue = TestQueue()
        let uploader = SelfRetryingUploader()
        let post = samplePost(photoSizes: [10])
        let options = PublishOptions(retry: Self.policy(attempts: 4), uploadTimeout: .seconds(9))
        let recorder = OutcomeRecorder()
        Job.publishing(post, using: uploader, options: options).perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(3))

        #expect(recorder.error as? UploadError == Self.unavailable)
        #expect(uploader.performances.value == 1, "publishing performed the upload once: no retry around it")
        #expect(uploader.attemptsGiven.value.map(\.retry.attempts) == [4])
        #expect(uploader.attemptsGiven.value.map(\.timeout) == [.seconds(9)])
    }

    @Test func anUploadJobHandsItsAttemptsToTheUploader() throws {
        let queue = TestQueue()
        let uploader = SelfRetryingUploader()
        let video = Video(bytes: Data(count: 10), destination: destination("video-1.mp4"))
        let recorder = OutcomeRecorder()
        let attempts = UploadAttempts(retry: Self.policy(attempts: 2))
        Job.uploading(video, using: uploader, attempts: attempts).perform(on: queue, then: recorder.handler)

        try queue.advance(by: .seconds(1))
        #expect(uploader.performances.value == 1)
        #expect(uploader.attemptsGiven.value.map(\.retry.attempts) == [2])
        #expect(uploader.requestsSent.value == 2)
        #expect(recorder.error as? UploadError == Self.unavailable)
    }

    @Test func anUploaderThatDoesNotRetryItselfIsRetriedWholeAndToldOfEachFailure() throws {
        let queue = TestQueue()
        let uploader = InMemoryUploader()
        let photo = Photo(bytes: Data(count: 10), destination: destination("a.jpg"))
        uploader.fail(photo.media.destination, with: Self.unavailable)
        let told = LockedValue<[String]>([])
        let attempts = UploadAttempts(retry: Self.policy(attempts: 3)) { attempt in
            told.withValue { $0.append("#\(attempt.number) \(attempt.nextRetryIn.map { "\($0)" } ?? "none")") }
        }
        let recorder = OutcomeRecorder()
        uploader.upload(photo.media, attempts: attempts).perform(on: queue, then: recorder.handler)

        try queue.run()
        #expect(uploader.startedDestinations.count == 1)
        try queue.advance(by: .seconds(2))
        #expect(uploader.startedDestinations.count == 3)
        #expect(recorder.error as? UploadError == Self.unavailable)
        #expect(told.value == ["#1 1.0 seconds", "#2 1.0 seconds", "#3 none"])
    }

    @Test func anAttemptOverItsTimeLimitFailsAsTimedOutAndIsRetried() throws {
        let queue = TestQueue()
        let uploader = InMemoryUploader(latency: .seconds(5))
        let photo = Photo(bytes: Data(count: 10), destination: destination("slow.jpg"))
        let attempts = UploadAttempts(retry: Self.policy(attempts: 2), timeout: .seconds(3))
        let recorder = OutcomeRecorder()
        uploader.upload(photo.media, attempts: attempts).perform(on: queue, then: recorder.handler)

        try queue.advance(by: .seconds(3))
        #expect(uploader.cancelledDestinations.count == 1)
        try queue.advance(by: .seconds(4))
        #expect(uploader.startedDestinations.count == 2)
        #expect(recorder.error as? UploadError == .timedOut(photo.media.destination, after: .seconds(3)))
    }

    @Test func aFaultInjectingUploaderHandsTheAttemptsOnSoTheUploaderBelowStaysTheOnlyOwner() throws {
        let queue = TestQueue()
        let base = SelfRetryingUploader()
        let uploader = try FaultInjectingUploader(wrapping: base, failureRate: 1)
        let post = samplePost(photoSizes: [10])
        let told = LockedValue<[Int]>([])
        let requests = LockedValue<[String?]>([])
        let options = PublishOptions(
            retry: Self.policy(attempts: 2),
            onFailedAttempt: { _, attempt in
                told.withValue { $0.append(attempt.number) }
                requests.withValue { $0.append(attempt.request) }
            })
        let recorder = OutcomeRecorder()
        Job.publishing(post, using: uploader, options: options).perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(1))

        // Each attempt of the base's request fails with the injected fault,
        // and the one policy retries it once: two attempts in all.
        #expect(base.performances.value == 1)
        #expect(base.attemptsGiven.value.map(\.retry.attempts) == [2])
        #expect(told.value == [1, 2])
        #expect(requests.value == [nil, nil], "an attempt of the whole upload names no request")
        #expect(base.requestsSent.value == 0, "a faulted attempt sends nothing")
        guard case .httpStatus(let receipt) = recorder.error as? UploadError else {
            Issue.record("expected the injected 503, got \(String(describing: recorder.error))")
            return
        }
        #expect(String(decoding: receipt.body, as: UTF8.self) == "injected fault")
    }

    @Test func anInjectedURLErrorNamesTheDestinationAsAnyNetworkFailureDoes() throws {
        let queue = TestQueue()
        let uploader = try FaultInjectingUploader(wrapping: InMemoryUploader(), failureRate: 1) { _ in
            URLError(.notConnectedToInternet)
        }
        let photo = Photo(bytes: Data(count: 10), destination: destination("offline.jpg"))
        let recorder = OutcomeRecorder()
        uploader.upload(photo.media, attempts: UploadAttempts(retry: .never)).perform(on: queue, then: recorder.handler)
        try queue.run()

        #expect(
            recorder.error as? UploadError
                == .network(photo.media.destination, URLError(.notConnectedToInternet)))
    }

    @Test(arguments: [
        (UploadAttempts(retry: RetryPolicy(attempts: 0)), "retry.attempts", "must be at least 1, got 0"),
        (UploadAttempts(timeout: .zero), "timeout", "must be above zero, got 0.0 seconds"),
    ])
    func attemptsThatCannotBeMadeFailBeforeAnythingIsSent(
        attempts: UploadAttempts, option: String, reason: String
    ) throws {
        let queue = TestQueue()
        let uploader = InMemoryUploader()
        let photo = Photo(bytes: Data(count: 10), destination: destination("a.jpg"))
        let recorder = OutcomeRecorder()
        uploader.upload(photo.media, attempts: attempts).perform(on: queue, then: recorder.handler)
        try queue.run()

        #expect(recorder.error as? InvalidOptionError == InvalidOptionError(option: option, reason: reason))
        #expect(uploader.startedDestinations.isEmpty)
    }

    @Test func theUploadsNameStaysInsideTheRetryOfAnUploaderRetriedWhole() throws {
        let queue = TestQueue()
        let uploader = InMemoryUploader(latency: .seconds(1))
        let photo = Photo(bytes: Data(count: 2_000), destination: destination("photo-1.jpg"))
        let handle = Job.uploading(photo, using: uploader, attempts: UploadAttempts(retry: Self.policy(attempts: 3)))
            .perform(on: queue) { _ in }
        try queue.run()
        #expect(
            handle.stallReport()?.split(separator: "\n").dropFirst().first
                == "  retry 1/3 ▸ upload photo-1.jpg (running, 1 of 2 kB sent)")
        handle.cancel()
    }
}

/// An uploader that retries its requests itself, as S3Uploader does: each
/// upload is one request, which always fails with a 503, retried by the
/// attempts it is handed.
final class SelfRetryingUploader: Uploader, Sendable {
    /// The attempts handed to each upload.
    let attemptsGiven = LockedValue<[UploadAttempts]>([])
    /// How many times an upload job was performed.
    let performances = LockedValue(0)
    /// How many requests were sent.
    let requestsSent = LockedValue(0)

    func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
        upload(media, attempts: UploadAttempts(retry: .never), progress: progress)
    }

    func upload(
        _ media: Media,
        attempts: UploadAttempts,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        attemptsGiven.withValue { $0.append(attempts) }
        let request = Job<UploadReceipt> { [self] controller in
            requestsSent.withValue { $0 += 1 }
            controller.fail(with: RetryOwnerTests.unavailable)
        }
        let retried = attempts.retrying(request, for: media)
        return Job { [self] controller in
            performances.withValue { $0 += 1 }
            controller.perform(retried) { controller.complete(with: $0) }
        }
    }
}
