import Foundation
import JobKit
import JobKitTesting
import Testing
import Uploads
import UploadsTesting

@Suite("InMemoryUploader", .timeLimit(.minutes(1)))
struct InMemoryUploaderTests {
    @Test func recordsUploadsInCompletionOrderAfterTheLatencyInTheQueuesTime() throws {
        let queue = TestQueue()
        let fast = InMemoryUploader(latency: .seconds(1))
        let slow = InMemoryUploader(latency: .seconds(3))
        let shared = RoutingUploader(routes: [destination("b"): fast], fallback: slow)
        let recorder = OutcomeRecorder()
        Job.group([
            shared.upload(Media(bytes: Data("a".utf8), destination: destination("a"), contentType: "text/plain"))
                .discardingValue(),
            shared.upload(Media(bytes: Data("b".utf8), destination: destination("b"), contentType: "text/plain"))
                .discardingValue(),
        ])
        .perform(on: queue, then: recorder.handler)

        try queue.run()
        #expect(fast.runningCount + slow.runningCount == 2)
        try queue.advance(by: .seconds(1))
        #expect(fast.uploads.map(\.bytes) == [Data("b".utf8)])
        #expect(slow.uploads.isEmpty)
        try queue.advance(by: .seconds(2))
        #expect(slow.uploads.map(\.destination) == [destination("a")])
        #expect(recorder.isSucceeded)
    }

    @Test func failsTheGivenNumberOfAttemptsThenSucceeds() throws {
        let uploader = InMemoryUploader()
        uploader.fail(destination("a"), with: TestFailure(id: 1), times: 2)
        let media = Media(bytes: Data("a".utf8), destination: destination("a"), contentType: "text/plain")
        let outcomes = (0..<3).map { _ in
            let recorder = OutcomeRecorder()
            uploader.upload(media).perform(on: ImmediateQueue(), then: recorder.handler)
            return recorder
        }

        #expect(outcomes.map { $0.error as? TestFailure } == [TestFailure(id: 1), TestFailure(id: 1), nil])
        #expect(uploader.uploads.count == 1)
        #expect(uploader.startedDestinations.count == 3)
        #expect(uploader.runningCount == 0)
    }

    @Test func readsFileMediaAndRefusesMissingFiles() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try folder.file("a.jpg", bytes: patternedBytes(64))
        let uploader = InMemoryUploader()
        let missing = folder.url.appendingPathComponent("missing.jpg")
        let found = OutcomeRecorder()
        let notFound = OutcomeRecorder()
        uploader.upload(Photo(file: file, destination: destination("a.jpg")).media)
            .perform(on: ImmediateQueue(), then: found.handler)
        uploader.upload(Photo(file: missing, destination: destination("b.jpg")).media)
            .perform(on: ImmediateQueue(), then: notFound.handler)

        #expect(found.isSucceeded)
        #expect(uploader.uploads.map(\.bytes) == [patternedBytes(64)])
        #expect(notFound.error as? UploadError == .fileNotFound(missing))
        #expect(uploader.startedDestinations == [destination("a.jpg")])
    }
}

@Suite("FaultInjectingUploader", .timeLimit(.minutes(1)))
struct FaultInjectingUploaderTests {
    private func failures(rate: Double, seed: UInt64, count: Int = 200) throws -> [Bool] {
        let uploader = try FaultInjectingUploader(wrapping: InMemoryUploader(), failureRate: rate, seed: seed)
        return (0..<count).map { index in
            let recorder = OutcomeRecorder()
            uploader.upload(Media(bytes: Data(), destination: destination("\(index)"), contentType: "text/plain"))
                .perform(on: ImmediateQueue(), then: recorder.handler)
            guard case .httpStatus(let receipt) = recorder.error as? UploadError else { return false }
            return receipt.status == 503 && receipt.bodyText == "injected fault"
        }
    }

    @Test func failsAboutTheGivenShareOfAttempts() throws {
        #expect(try !failures(rate: 0, seed: 1).contains(true))
        #expect(try !failures(rate: 1, seed: 1).contains(false))
        let half = try failures(rate: 0.5, seed: 1).filter { $0 }.count
        #expect((60...140).contains(half))
    }

    @Test func theSameSeedFailsTheSameAttempts() throws {
        #expect(try failures(rate: 0.3, seed: 42) == failures(rate: 0.3, seed: 42))
        #expect(try failures(rate: 0.3, seed: 42) != failures(rate: 0.3, seed: 43))
    }

    @Test func forwardsTheAttemptsThatDoNotFail() throws {
        let base = InMemoryUploader()
        let uploader = try FaultInjectingUploader(wrapping: base, failureRate: 0)
        uploader.upload(Media(bytes: Data("x".utf8), destination: destination("x"), contentType: "text/plain"))
            .perform(on: ImmediateQueue()) { _ in }
        #expect(base.uploads.map(\.bytes) == [Data("x".utf8)])
    }

    @Test func anInjectedFaultNamesTheMediumsFileNameWhenItHasOne() throws {
        var media = Media(
            bytes: Data("x".utf8), destination: URL(string: "https://social.example/api/v2/media")!,
            contentType: "image/jpeg")
        #expect(
            (FaultInjectingUploader.serviceUnavailable(media) as? UploadError)?.localizedDescription
                == #"api/v2/media: the server answered 503 Service Unavailable ("injected fault")"#)
        media.filename = "beach.jpg"
        #expect(
            (FaultInjectingUploader.serviceUnavailable(media) as? UploadError)?.localizedDescription
                == #"beach.jpg → api/v2/media: the server answered 503 Service Unavailable ("injected fault")"#)
    }
}
