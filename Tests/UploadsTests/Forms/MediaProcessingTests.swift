import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing

@testable import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Waiting until a server has made a medium ready, in virtual time on a
/// `TestQueue`: the questions a server is asked are scripted answers.
@Suite("Media processing", .timeLimit(.minutes(1)))
struct MediaProcessingTests {
    static let endpoint = URL(string: "https://social.example/api/v2/media")!
    static let status = URL(string: "https://social.example/api/v1/media/109")!

    let queue = TestQueue()

    /// The upload's answer: accepted, to be asked for at ``status``.
    static let accepted = UploadReceipt(destination: endpoint, status: 202, body: Data(#"{"id":"109"}"#.utf8))

    static func answer(_ status: Int) -> UploadReceipt {
        UploadReceipt(destination: Self.status, status: status, body: Data(#"{"id":"109","url":null}"#.utf8))
    }

    /// A server that gives `answers` to the questions, in turn (the last
    /// one again once they ran out), and records when each was asked.
    final class ScriptedServer: Sendable {
        let answers: LockedValue<[Result<UploadReceipt, UploadError>]>
        let asked = LockedValue<[Duration]>([])
        let queue: TestQueue

        init(_ answers: [Result<UploadReceipt, UploadError>], queue: TestQueue) {
            self.answers = LockedValue(answers)
            self.queue = queue
        }

        func check(_ url: URL) -> Job<UploadReceipt> {
            Job { [self] controller in
                #expect(url == MediaProcessingTests.status)
                asked.withValue { $0.append(queue.now) }
                let answer = answers.withValue { $0.count > 1 ? $0.removeFirst() : $0[0] }
                controller.complete(with: answer.mapError { $0 })
            }
        }
    }

    func wait(
        _ processing: MediaProcessing = .mastodon, answering answers: [Result<UploadReceipt, UploadError>]
    ) -> (ScriptedServer, OutcomeRecorder, JobHandle) {
        let server = ScriptedServer(answers, queue: queue)
        let outcome = OutcomeRecorder()
        let handle = processing.waitUntilReady(Self.accepted, filename: "surf.mp4", check: server.check)
            .perform(on: queue, then: outcome.handler)
        return (server, outcome, handle)
    }

    @Test func asksAfterWaitsThatDoubleUntilTheServerSaysReady() throws {
        let (server, outcome, _) = wait(answering: [
            .success(Self.answer(206)), .success(Self.answer(206)), .success(Self.answer(200)),
        ])

        try queue.advance(by: .seconds(6.9))
        #expect(server.asked.value == [.seconds(1), .seconds(3)], "after 1 s, then 2 s more")
        #expect(outcome.outcomes.isEmpty, "still processing")
        try queue.advance(by: .milliseconds(100))

        #expect(server.asked.value == [.seconds(1), .seconds(3), .seconds(7)])
        let receipt = try #require(outcome.value(as: UploadReceipt.self))
        #expect(receipt.status == 200 && receipt.destination == Self.status, "the answer that said ready")
        #expect(receipt.filename == "surf.mp4")
        #expect(queue.pendingCount == 0)
    }

    @Test func waitsNoLongerThanTheMaximumBetweenQuestions() throws {
        let processing = MediaProcessing(
            firstWait: .seconds(1), maximumWait: .seconds(5), timeLimit: .seconds(60),
            statusURL: { _ in Self.status }, isReady: { $0.status == 200 })
        let (server, _, handle) = wait(processing, answering: [.success(Self.answer(206))])
        try queue.advance(by: .seconds(30))
        #expect(server.asked.value == [1, 3, 7, 12, 17, 22, 27].map { .seconds($0) })
        handle.cancel()
    }

    @Test func pastItsTimeLimitFailsWithTheLastAnswerAndLeavesNothingOnTheQueue() throws {
        let processing = MediaProcessing(
            timeLimit: .seconds(20), statusURL: { _ in Self.status }, isReady: { $0.status == 200 })
        let (server, outcome, _) = wait(processing, answering: [.success(Self.answer(206))])

        try queue.advance(by: .seconds(19))
        #expect(outcome.outcomes.isEmpty)
        try queue.advance(by: .seconds(1))

        var last = Self.answer(206)
        last.filename = "surf.mp4"
        #expect(outcome.error as? UploadError == .notProcessed(last, after: .seconds(20)))
        #expect(
            (outcome.error as? UploadError)?.localizedDescription
                == "surf.mp4 → api/v1/media/109: still being processed after 20 s")
        #expect((outcome.error as? UploadError)?.isTransient == false, "not sent again")
        #expect(server.asked.value == [1, 3, 7, 15].map { .seconds($0) })
        #expect(queue.pendingCount == 0, "no question is left waiting")
    }

    @Test func anAnswerThatCanPassIsAskedAgainAndOneThatCannotFailsNamingTheFile() throws {
        let unavailable = UploadError.httpStatus(UploadReceipt(destination: Self.status, status: 503))
        let lost = UploadError.network(Self.status, URLError(.networkConnectionLost))
        let (server, outcome, _) = wait(answering: [
            .failure(unavailable), .failure(lost), .success(Self.answer(200)),
        ])
        try queue.advance(by: .seconds(7))
        #expect(server.asked.value.count == 3)
        #expect(outcome.value(as: UploadReceipt.self)?.status == 200)

        let gone = UploadError.httpStatus(
            UploadReceipt(destination: Self.status, status: 404, body: Data(#"{"error":"Record not found"}"#.utf8)))
        let (refusing, refused, _) = wait(answering: [.success(Self.answer(206)), .failure(gone)])
        try queue.advance(by: .seconds(60))
        #expect(refusing.asked.value.count == 2, "not asked again")
        #expect(
            (refused.error as? UploadError)?.localizedDescription
                == #"surf.mp4 → api/v1/media/109: the server answered 404 Not Found ("Record not found")"#)
        #expect(queue.pendingCount == 0)
    }

    @Test func cancellingStopsTheQuestionsAndLeavesNothingOnTheQueue() throws {
        let (server, outcome, handle) = wait(answering: [.success(Self.answer(206))])
        try queue.advance(by: .seconds(3))
        #expect(server.asked.value.count == 2)
        #expect(handle.snapshot().line.hasPrefix("wait until surf.mp4 is processed (running"), "a stall names it")

        handle.cancel()
        try queue.advance(by: .seconds(600))

        #expect(server.asked.value.count == 2)
        #expect(outcome.error is CancellationError)
        #expect(queue.pendingCount == 0)
    }

    @Test func aMediumReadyAtOnceIsNotAskedFor() throws {
        let server = ScriptedServer([.success(Self.answer(200))], queue: queue)
        let outcome = OutcomeRecorder()
        let ready = UploadReceipt(destination: Self.endpoint, status: 200, body: Data(#"{"id":"109"}"#.utf8))
        MediaProcessing.mastodon.waitUntilReady(ready, filename: "beach.jpg", check: server.check)
            .perform(on: queue, then: outcome.handler)
        try queue.run()
        #expect(outcome.value(as: UploadReceipt.self) == ready)
        #expect(server.asked.value.isEmpty)
    }

    @Test func mastodonAsksForA202sIDOnTheSameServerUntilItAnswers200() {
        let mastodon = MediaProcessing.mastodon
        #expect(mastodon.statusURL(Self.accepted) == Self.status)
        let numbered = UploadReceipt(destination: Self.endpoint, status: 202, body: Data(#"{"id":7}"#.utf8))
        #expect(mastodon.statusURL(numbered) == URL(string: "https://social.example/api/v1/media/7")!)
        let odd = UploadReceipt(destination: Self.endpoint, status: 202, body: Data(#"{"id":"a/b?c"}"#.utf8))
        #expect(mastodon.statusURL(odd) == URL(string: "https://social.example/api/v1/media/a%2Fb%3Fc")!)
        #expect(mastodon.statusURL(Self.answer(200)) == nil, "a 200 is ready")
        #expect(mastodon.isReady(Self.answer(200)))
        #expect(!mastodon.isReady(Self.answer(206)))
        #expect(mastodon.wait(before: 0) == .seconds(1) && mastodon.wait(before: 5) == .seconds(30))
    }
}

/// `MultipartFormUploader` with ``MediaProcessing`` against Node's server:
/// a form answered `202`, then a status asked for until it says ready.
@Suite("MultipartFormUploader, media processed later", .startsProcesses, .serialized, .timeLimit(.minutes(1)))
struct MultipartFormProcessingTests {
    /// Waits of 20 ms, doubling up to 80 ms: five questions in a quarter
    /// of a second.
    static let quick = MediaProcessing(
        firstWait: .milliseconds(20), maximumWait: .milliseconds(80), timeLimit: .seconds(20),
        statusURL: MediaProcessing.mastodon.statusURL, isReady: MediaProcessing.mastodon.isReady)

    /// The server answers the form `202` with a medium to ask for.
    static func accepting(_ server: FixtureServer) async throws {
        try await server.setRule(
            "api/v2/media", ["ok_status": 202, "answer": #"{"id":"7","url":null}"#, "answer_type": "application/json"])
    }

    @Test func anUploadEndsOnceTheServerSaysTheMediumIsReady() async throws {
        try await FixtureServer.with { server in
            try await Self.accepting(server)
            try await server.setRule(
                "api/v1/media/7",
                [
                    "status": 206, "times": 4, "ok_status": 200, "answer": #"{"id":"7","url":"https://cdn/7.mp4"}"#,
                    "answer_type": "application/json",
                ])
            let uploader = try MultipartFormUploader(
                headers: ["Authorization": "Bearer s3cret"], processing: Self.quick)
            let video = Video(bytes: patternedBytes(100_000), destination: server.url("api/v2/media"))

            let receipt = try await withTimeLimit(.seconds(20)) {
                try await Job.uploading(video, using: uploader, attempts: UploadAttempts()).value
            }

            #expect(receipt.status == 200)
            #expect(receipt.bodyText.contains("https://cdn/7.mp4"))
            #expect(receipt.filename == "media")
            let received = try await server.received()
            #expect(
                received.map(\.method) == ["POST", "GET", "GET", "GET", "GET", "GET"], "one upload, five questions")
            #expect(received.allSatisfy { $0.headers["authorization"] == "Bearer s3cret" })
            #expect(
                received.dropFirst().allSatisfy { $0.path == "/api/v1/media/7" && $0.headers["content-type"] == nil })
        }
    }

    /// Were the wait part of an attempt, a policy that retries every
    /// failure would send the medium again when the wait fails.
    @Test func theWaitIsNotAnAttemptSoItsFailureNeverSendsTheMediumAgain() async throws {
        try await FixtureServer.with { server in
            try await Self.accepting(server)
            try await server.setRule(
                "api/v1/media/7", ["status": 404, "times": 10, "answer": #"{"error":"Record not found"}"#])
            var named = Photo(bytes: patternedBytes(1_000), destination: server.url("api/v2/media"))
            named.media.filename = "beach.jpg"
            let photo = named
            var policy = RetryPolicy(attempts: 3, initialDelay: .milliseconds(1))
            policy.isRetryable = { _ in true }
            let retryingAll = policy

            let error = await #expect(throws: UploadError.self) {
                try await withTimeLimit(.seconds(20)) {
                    try await Job.uploading(
                        photo, using: MultipartFormUploader(processing: Self.quick),
                        attempts: UploadAttempts(retry: retryingAll)
                    ).value
                }
            }

            let message = error.map { "\($0.localizedDescription)" }
            #expect(message == #"beach.jpg → api/v1/media/7: the server answered 404 Not Found ("Record not found")"#)
            let received = try await server.received()
            #expect(received.map(\.method) == ["POST", "GET"], "one upload, one question")
        }
    }
}
