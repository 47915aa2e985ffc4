import Foundation
import JobKit
import JobKitTesting
import Testing
import Uploads
import UploadsTesting

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("RetryPolicy", .timeLimit(.minutes(1)))
struct RetryPolicyTests {
    private static let photo = destination("photos/1.jpg")

    private static func status(_ code: Int, headers: [String: String] = [:]) -> UploadError {
        .httpStatus(UploadReceipt(destination: photo, status: code, headers: headers))
    }

    @Test(arguments: [408, 429, 500, 502, 503, 504])
    func retriesTheStatusesThatCanPass(code: Int) {
        #expect(Self.status(code).isTransient)
        #expect(RetryPolicy(random: Halfway()).delay(beforeRetry: 1, after: Self.status(code)) != nil)
    }

    @Test(arguments: [400, 401, 403, 404, 405, 409, 410, 413, 415, 422, 501])
    func failsAtOnceOnOtherStatuses(code: Int) {
        #expect(!Self.status(code).isTransient)
        #expect(RetryPolicy().delay(beforeRetry: 1, after: Self.status(code)) == nil)
    }

    @Test(arguments: [
        URLError.Code.timedOut, .networkConnectionLost, .cannotConnectToHost, .cannotFindHost, .dnsLookupFailed,
        .notConnectedToInternet,
    ])
    func retriesTransportFailuresThatCanPass(code: URLError.Code) {
        #expect(UploadError.network(Self.photo, URLError(code)).isTransient)
        #expect(RetryPolicy.isTransient(URLError(code)), "a bare URLError from an uploader that does not wrap it")
    }

    @Test func failsAtOnceOnInputAndLocalErrors() {
        let permanent: [any Error] = [
            UploadError.fileNotFound(URL(fileURLWithPath: "/nope.jpg")),
            UploadError.unreadableFile(URL(fileURLWithPath: "/a.jpg"), reason: "permission denied"),
            UploadError.invalidDestination(Self.photo, reason: "not http"),
            UploadError.missingDestination,
            UploadError.writeFailed(URL(fileURLWithPath: "/out/a.jpg"), reason: "read-only file system"),
            UploadError.network(Self.photo, URLError(.badURL)),
            UploadError.network(Self.photo, URLError(.serverCertificateUntrusted)),
            CancellationError(),
            TestFailure(id: 1),
        ]
        for error in permanent {
            #expect(RetryPolicy().delay(beforeRetry: 1, after: error) == nil, "\(error)")
        }
        #expect(RetryPolicy.isTransient(JobError.timedOut))
        #expect(UploadError.timedOut(Self.photo, after: .seconds(30)).isTransient)
    }

    @Test func waitsAreFullJitterUnderAnExponentialCeiling() {
        let policy = RetryPolicy(
            attempts: 10, initialDelay: .seconds(1), maximumDelay: .seconds(8), random: Halfway())
        let waits = (1...6).map { policy.delay(beforeRetry: $0, after: Self.status(503)) }
        #expect(waits == [.milliseconds(500), .seconds(1), .seconds(2), .seconds(4), .seconds(4), .seconds(4)])
        #expect(policy.delay(beforeRetry: 10, after: Self.status(503)) == nil, "no wait after the last attempt")

        // A real generator: every wait between zero and its ceiling, and not
        // all the same.
        let seeded = RetryPolicy(
            attempts: 100, initialDelay: .seconds(1), maximumDelay: .seconds(8),
            random: SeededRandomNumberGenerator(seed: 3))
        let drawn = (1...50).compactMap { _ in seeded.delay(beforeRetry: 4, after: Self.status(503)) }
        #expect(drawn.count == 50)
        #expect(drawn.allSatisfy { $0 >= .zero && $0 < .seconds(8) })
        #expect(Set(drawn).count > 40)
    }

    @Test func aSeededGeneratorGivesTheSameWaitsOnEveryRun() {
        func waits() -> [Duration?] {
            let policy = RetryPolicy(attempts: 5, random: SeededRandomNumberGenerator(seed: 42))
            return (1...4).map { policy.delay(beforeRetry: $0, after: URLError(.timedOut)) }
        }
        #expect(waits() == waits())
    }

    /// The server's wish, capped, plus up to as much again: `Halfway`
    /// draws half of it.
    @Test func retryAfterInSecondsSetsTheWaitOn429And503CappedWithAJitterOnTop() {
        let policy = RetryPolicy(attempts: 3, maximumRetryAfter: .seconds(60), random: Halfway())
        #expect(
            policy.delay(beforeRetry: 1, after: Self.status(429, headers: ["Retry-After": "7"])) == .seconds(10.5))
        #expect(
            policy.delay(beforeRetry: 1, after: Self.status(503, headers: ["retry-after": "7"])) == .seconds(10.5))
        #expect(
            policy.delay(beforeRetry: 1, after: Self.status(503, headers: ["Retry-After": "3600"])) == .seconds(90))
        // Other statuses keep the backoff; a header that is no number or
        // date is ignored.
        #expect(
            policy.delay(beforeRetry: 1, after: Self.status(500, headers: ["Retry-After": "7"]))
                == .milliseconds(250))
        #expect(
            policy.delay(beforeRetry: 1, after: Self.status(503, headers: ["Retry-After": "soon"]))
                == .milliseconds(250))
    }

    @Test func retryAfterAsAnHTTPDateCountsFromTheAnswersDate() {
        let headers = ["Retry-After": "Wed, 25 Nov 2026 10:00:30 GMT", "Date": "Wed, 25 Nov 2026 10:00:00 GMT"]
        #expect(UploadReceipt(destination: Self.photo, status: 503, headers: headers).retryAfter == .seconds(30))
        let past = ["Retry-After": "Wed, 25 Nov 2026 09:00:00 GMT", "Date": "Wed, 25 Nov 2026 10:00:00 GMT"]
        #expect(UploadReceipt(destination: Self.photo, status: 503, headers: past).retryAfter == .zero)
        #expect(
            RetryPolicy(random: Halfway()).delay(beforeRetry: 1, after: Self.status(429, headers: headers))
                == .seconds(45))
    }

    /// Mastodon's `429` names no `Retry-After`, but the time its rate limit
    /// starts over; others name it in seconds since 1970, or from now.
    @Test func a429WithoutRetryAfterWaitsForItsRateLimitsReset() {
        let date = "Wed, 25 Nov 2026 10:00:00 GMT"
        func wait(_ status: Int, _ headers: [String: String]) -> Duration? {
            UploadReceipt(destination: Self.photo, status: status, headers: headers.merging(["Date": date]) { $1 })
                .retryAfter
        }
        let mastodon = ["X-RateLimit-Limit": "300", "X-RateLimit-Remaining": "0"]
        #expect(
            wait(429, mastodon.merging(["X-RateLimit-Reset": "2026-11-25T10:05:00.000000Z"]) { $1 }) == .seconds(300))
        #expect(wait(429, ["X-RateLimit-Reset": "2026-11-25T10:00:42Z"]) == .seconds(42))
        #expect(wait(429, ["X-RateLimit-Reset": "2026-11-25T10:00:42.250000Z"]) == .milliseconds(42_250))
        #expect(wait(429, ["X-RateLimit-Reset": "1795600830"]) == .seconds(30), "seconds since 1970")
        #expect(wait(429, ["X-RateLimit-Reset": "30"]) == .seconds(30), "seconds from now")
        #expect(wait(429, ["X-RateLimit-Reset": "2026-11-25T09:00:00Z"]) == .zero, "past")
        #expect(wait(429, ["X-RateLimit-Reset": "tomorrow"]) == nil)
        for hostile in ["inf", "nan", "-1"] {
            #expect(wait(429, ["X-RateLimit-Reset": hostile]) == nil, "\(hostile)")
        }
        #expect(wait(429, ["X-RateLimit-Reset": "1e300"]) == .seconds(365 * 24 * 3600), "a year at most")
        #expect(wait(503, ["Retry-After": "Fri, 31 Dec 9999 23:59:59 GMT"]) == .seconds(365 * 24 * 3600))
        #expect(wait(429, ["X-RateLimit-Reset": "2026-11-25T10:05:00Z", "Retry-After": "7"]) == .seconds(7))
        #expect(wait(503, ["X-RateLimit-Reset": "2026-11-25T10:05:00Z"]) == nil, "a 429's header only")
        #expect(
            UploadFailure(
                UploadError.httpStatus(
                    UploadReceipt(
                        destination: Self.photo, status: 429,
                        headers: ["Date": date, "X-RateLimit-Reset": "2026-11-25T10:01:00Z"])))
                == .pushback(retryAfter: .seconds(60)))
    }

    /// Phones a server turned away in the same second come back spread
    /// over the `Retry-After` that follows it, never before it.
    @Test func theWaitsAfterOneRetryAfterSpreadOverTheSecondItAsksFor() {
        let policy = RetryPolicy(random: SeededRandomNumberGenerator(seed: 3))
        let waits = (0..<1_000).compactMap { _ in
            policy.delay(beforeRetry: 1, after: Self.status(503, headers: ["Retry-After": "5"]))
        }
        #expect(waits.count == 1_000)
        #expect(waits.allSatisfy { $0 >= .seconds(5) && $0 < .seconds(10) })
        let seconds = Dictionary(grouping: waits) { Int($0 / .seconds(1)) }.mapValues(\.count)
        #expect(seconds.keys.sorted() == [5, 6, 7, 8, 9])
        #expect(seconds.values.allSatisfy { (150...250).contains($0) }, "about 200 in each second: \(seconds)")
    }

    @Test(arguments: [
        "Wed, 25 Nov 2026 10:00:30 GMT", "Wednesday, 25-Nov-26 10:00:30 GMT", "Wed Nov 25 10:00:30 2026",
    ])
    func retryAfterAcceptsTheThreeHTTPDateForms(date: String) {
        let headers = ["Retry-After": date, "Date": "Wed, 25 Nov 2026 10:00:00 GMT"]
        #expect(UploadReceipt(destination: Self.photo, status: 503, headers: headers).retryAfter == .seconds(30))
    }

    @Test func aPermanentFailureIsTriedOnceAndATransientOneUpToTheAttempts() throws {
        let queue = TestQueue()
        let uploader = InMemoryUploader(latency: .seconds(1))
        let missing = Self.status(404)
        uploader.fail(destination("a.jpg"), with: missing)
        uploader.fail(destination("b.jpg"), with: Self.status(503))
        let policy = exactRetries(4, initial: .seconds(1))
        let media = ["a.jpg", "b.jpg"].map {
            Media(bytes: Data("x".utf8), destination: destination($0), contentType: "image/jpeg")
        }
        let attempts = LockedValue<[String]>([])
        let recorders = media.map { media in
            let recorder = OutcomeRecorder()
            uploader.upload(media).retry(policy) { attempt in
                let wait = attempt.nextRetryIn.map { "\($0)" } ?? "-"
                attempts.withValue { $0.append("\(media.destination.lastPathComponent) #\(attempt.number) \(wait)") }
            }
            .perform(on: queue, then: recorder.handler)
            return recorder
        }
        try queue.advance(by: .seconds(60))

        #expect(uploader.startedDestinations.filter { $0 == destination("a.jpg") }.count == 1)
        #expect(uploader.startedDestinations.filter { $0 == destination("b.jpg") }.count == 4)
        #expect(recorders[0].error as? UploadError == missing)
        #expect(attempts.value.filter { $0.hasPrefix("a.jpg") } == ["a.jpg #1 -"])
        #expect(
            attempts.value.filter { $0.hasPrefix("b.jpg") }
                == ["b.jpg #1 1.0 seconds", "b.jpg #2 1.0 seconds", "b.jpg #3 1.0 seconds", "b.jpg #4 -"])
    }

    @Test func publishingRetriesNeitherAMissingFileNorAPermanentStatus() throws {
        let queue = TestQueue()
        let uploader = InMemoryUploader(latency: .seconds(1))
        let post = samplePost(photoSizes: [10, 20])
        let refused = post.photos[0].media.destination
        uploader.fail(refused, with: Self.status(413))
        let recorder = OutcomeRecorder()
        let failed = LockedValue<[URL]>([])
        let options = PublishOptions(
            retry: RetryPolicy(attempts: 5),
            onFailedAttempt: { destination, attempt in
                if attempt.nextRetryIn == nil { failed.withValue { $0.append(destination) } }
            })
        Job.publishing(post, using: uploader, options: options).perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(60))

        #expect(uploader.startedDestinations.filter { $0 == refused }.count == 1)
        #expect(failed.value == [refused])
        guard case .httpStatus(let receipt) = recorder.error as? UploadError else {
            Issue.record("expected httpStatus, got \(String(describing: recorder.error))")
            return
        }
        #expect(receipt.status == 413)
    }
}

@Suite("Readable errors", .timeLimit(.minutes(1)))
struct ReadableErrorTests {
    /// The receipt of a form's file, named with a quote and a line break,
    /// that the server refused with `body`.
    static func formReceipt(status: Int, body: String) -> UploadReceipt {
        var receipt = UploadReceipt(
            destination: URL(string: "https://social.example/api/v2/media")!, status: status, body: Data(body.utf8))
        receipt.filename = "beach \"2\"\n.jpg"
        return receipt
    }

    @Test func eachErrorIsOneSentenceNamingTheFile() {
        let video = URL(string: "https://media.example.com/posts/1/video.mp4?X-Amz-Signature=secret")!
        let cases: [(any Error, String)] = [
            (
                UploadError.httpStatus(UploadReceipt(destination: video, status: 413)),
                "posts/1/video.mp4: the server answered 413 Payload Too Large"
            ),
            (
                UploadError.httpStatus(
                    UploadReceipt(destination: video, status: 500, body: Data("  oops\nstack trace  ".utf8))),
                "posts/1/video.mp4: the server answered 500 Internal Server Error (\"oops stack trace\")"
            ),
            (
                UploadError.httpStatus(
                    Self.formReceipt(status: 422, body: #"{"error":"Validation failed: File content type is invalid"}"#)
                ),
                "beach \"2\" .jpg → api/v2/media: the server answered 422 Unprocessable Content "
                    + "(\"Validation failed: File content type is invalid\")"
            ),
            (
                UploadError.httpStatus(
                    Self.formReceipt(status: 401, body: #"{"message": "401: Unauthorized", "code": 0}"#)),
                "beach \"2\" .jpg → api/v2/media: the server answered 401 Unauthorized (\"401: Unauthorized\")"
            ),
            (
                UploadError.httpStatus(Self.formReceipt(status: 413, body: #"{"errors": ["too large"]}"#)),
                "beach \"2\" .jpg → api/v2/media: the server answered 413 Payload Too Large "
                    + "(\"{\"errors\": [\"too large\"]}\")"
            ),
            (
                UploadError.network(video, URLError(.cannotConnectToHost)),
                "posts/1/video.mp4: could not connect to the server (URLError.cannotConnectToHost)"
            ),
            (
                UploadError.network(video, URLError(.timedOut)),
                "posts/1/video.mp4: the server did not answer in time (URLError.timedOut)"
            ),
            (UploadError.timedOut(video, after: .seconds(30)), "posts/1/video.mp4: timed out after 30 s"),
            (UploadError.timedOut(video, after: .milliseconds(1500)), "posts/1/video.mp4: timed out after 1.5 s"),
            (UploadError.fileNotFound(URL(fileURLWithPath: "/videos/surf.mov")), "/videos/surf.mov: no such file"),
            (UploadError.missingDestination, "the post has no destination for its document"),
            (JobError.timedOut, "the job timed out and was cancelled"),
            (
                AllFailedError(errors: [UploadError.missingDestination, JobError.timedOut]),
                "all 2 jobs failed: the post has no destination for its document; the job timed out and was cancelled"
            ),
        ]
        for (error, expected) in cases {
            #expect(error.localizedDescription == expected)
            #expect(!error.localizedDescription.contains("secret"), "a presigned URL's query never shows")
            #expect(!error.localizedDescription.contains("\n"))
        }
    }

    @Test func aLongAnswerIsCutToOneShortLine() {
        let body = Data(String(repeating: "x", count: 2_000).utf8)
        let error = UploadError.httpStatus(UploadReceipt(destination: destination("a.jpg"), status: 400, body: body))
        #expect(error.localizedDescription.count < 140)
        #expect(error.localizedDescription.hasSuffix("…\")"))
    }
}
