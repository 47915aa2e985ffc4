import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing
import UploadsTesting

@testable import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An app's own error that says what it means.
private struct AppError: ClassifiedUploadError {
    var failure: UploadFailure
}

@Suite("UploadFailure: one reading of an error for every policy", .timeLimit(.minutes(1)))
struct UploadFailureTests {
    private static let photo = destination("photos/1.jpg")

    private static func status(_ code: Int, headers: [String: String] = [:]) -> UploadError {
        .httpStatus(UploadReceipt(destination: photo, status: code, headers: headers))
    }

    /// Errors, each with what it means.
    private static let table: [(error: any Error, failure: UploadFailure)] = [
        (status(429, headers: ["Retry-After": "7"]), .pushback(retryAfter: .seconds(7))),
        (status(503), .pushback(retryAfter: nil)),
        (status(408), .transient),
        (status(500), .transient),
        (status(502), .transient),
        (status(504), .transient),
        (status(404), .permanent),
        (status(413), .permanent),
        (UploadError.network(photo, URLError(.timedOut)), .transient),
        (UploadError.network(photo, URLError(.networkConnectionLost)), .transient),
        (UploadError.network(photo, URLError(.cannotConnectToHost)), .transient),
        (UploadError.network(photo, URLError(.cannotFindHost)), .transient),
        (UploadError.network(photo, URLError(.dnsLookupFailed)), .transient),
        (UploadError.network(photo, URLError(.notConnectedToInternet)), .offline),
        (UploadError.network(photo, URLError(.dataNotAllowed)), .offline),
        (UploadError.network(photo, URLError(.internationalRoamingOff)), .offline),
        (UploadError.network(photo, URLError(.callIsActive)), .offline),
        (UploadError.network(photo, URLError(.badURL)), .permanent),
        (UploadError.network(photo, URLError(.serverCertificateUntrusted)), .permanent),
        (URLError(.networkConnectionLost), .transient),
        (URLError(.notConnectedToInternet), .offline),
        (URLError(.badServerResponse), .permanent),
        (UploadError.timedOut(photo, after: .seconds(30)), .transient),
        (JobError.timedOut, .transient),
        (JobError.abandoned, .permanent),
        (UploadError.fileNotFound(URL(fileURLWithPath: "/nope.jpg")), .permanent),
        (UploadError.invalidDestination(photo, reason: "not http"), .permanent),
        (UploadError.missingDestination, .permanent),
        (UploadError.invalidAnswer(photo, reason: "no ETag"), .permanent),
        (CancellationError(), .cancelled),
        (AppError(failure: .pushback(retryAfter: .seconds(60))), .pushback(retryAfter: .seconds(60))),
        (AppError(failure: .offline), .offline),
        (AppError(failure: .cancelled), .cancelled),
        (TestFailure(id: 1), .permanent),
    ]

    @Test func eachErrorHasOneMeaning() {
        for (error, failure) in Self.table {
            #expect(UploadFailure(error) == failure, "\(error)")
        }
    }

    @Test func theRetryPolicyTheOutboxAndThePacerReadTheSameMeaning() {
        for (error, failure) in Self.table {
            let isPushback = if case .pushback = failure { true } else { false }
            let canPass = isPushback || failure == .transient || failure == .offline
            #expect(failure.isTransient == canPass, "\(error)")
            #expect(RetryPolicy.isTransient(error) == canPass, "\(error)")
            #expect((RetryPolicy().delay(beforeRetry: 1, after: error) != nil) == canPass, "\(error)")
            #expect((error as? UploadError).map { $0.isTransient == canPass } ?? true, "\(error)")
            #expect(
                OutboxStateMachine.canPass(error) == (canPass || failure == .cancelled),
                "waits for the network: \(error)")
            #expect(OutboxStateMachine.isPushback(error) == isPushback, "\(error)")
        }
    }

    @Test func anUploadRetriedWholeTellsThePacerItsMediumsBytes() throws {
        let gate = RecordingGate()
        var attempts = UploadAttempts(retry: RetryPolicy(attempts: 1))
        attempts.gate = gate
        let photo = Media(bytes: Data(count: 1_234), destination: Self.photo, contentType: "image/jpeg")
        let uploader = InMemoryUploader()
        let stored = Lock(false)
        uploader.upload(photo, attempts: attempts).perform(on: ImmediateQueue()) { outcome in
            stored.withLock { $0 = (try? outcome.get()) != nil }
        }
        #expect(stored.withLock { $0 } && gate.bytes == [1_234])
    }

    @Test func thePacerReadsTheSameMeaningTowardTheHost() throws {
        let url = Self.photo
        let host = OutboxPacer.host(of: url)
        for (error, failure) in Self.table {
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            let queue = TestQueue()
            let outbox = try Outbox(
                folder: folder.url, uploader: InMemoryUploader(),
                options: Outbox.Options(
                    publishing: PublishOptions(maxConcurrentUploads: 4), pushbackDelay: .seconds(10)), queue: queue)
            defer { outbox.close() }
            let gate = OutboxGate(outbox: outbox)
            for _ in 0..<OutboxPacer.transientRunLimit {
                gate.admitting(Job<Void>.failed(error), toward: url, bytes: 0).perform(on: queue) { _ in }
                try queue.run()
            }
            let pacer = outbox.machine.read { $0.pacer }
            switch failure {
            case .pushback, .transient:
                #expect(pacer.isHeld(host), "held: \(error)")
            case .offline:
                #expect(!pacer.isHeld(host), "\(error)")
                #expect(pacer.admitsUpload(toward: host, running: 0) && !pacer.admitsUpload(toward: host, running: 1))
            case .permanent, .cancelled:
                #expect(
                    !pacer.isHeld(host) && pacer.admitsUpload(toward: host, running: 3), "nothing of load: \(error)")
            }
        }
    }

    @Test func aCancellationIsNeverRetriedWhateverThePolicySays() {
        var policy = RetryPolicy()
        policy.isRetryable = { _ in true }
        #expect(policy.delay(beforeRetry: 1, after: CancellationError()) == nil)
        #expect(policy.delay(beforeRetry: 1, after: AppError(failure: .cancelled)) == nil)
        #expect(policy.delay(beforeRetry: 1, after: AppError(failure: .permanent)) != nil, "the policy's say")
    }

    @Test func anAppsPushbackIsWaitedOutAsAServersRetryAfter() {
        let policy = RetryPolicy(maximumRetryAfter: .seconds(100), random: Halfway())
        #expect(
            policy.delay(beforeRetry: 1, after: AppError(failure: .pushback(retryAfter: .seconds(60)))) == .seconds(90))
        #expect(
            policy.delay(beforeRetry: 1, after: AppError(failure: .pushback(retryAfter: .seconds(600))))
                == .seconds(150), "capped, then the jitter")
        #expect(
            policy.delay(beforeRetry: 1, after: Self.status(503, headers: ["Retry-After": "60"])) == .seconds(90))
    }

    @Test func aServersErrorCodeSaysWhatAStatusDoesNot() {
        var receipt = UploadReceipt(destination: Self.photo, status: 400)
        #expect(UploadFailure(UploadError.httpStatus(receipt)) == .permanent)
        receipt.serverError = UploadReceipt.ServerError(code: "RequestTimeout", message: "Idle.", failure: .transient)
        #expect(UploadFailure(UploadError.httpStatus(receipt)) == .transient)
        #expect(
            UploadError.httpStatus(receipt).localizedDescription.hasSuffix("400 Bad Request (RequestTimeout: Idle.)"))
        receipt.status = 503
        #expect(UploadFailure(UploadError.httpStatus(receipt)) == .pushback(retryAfter: nil), "the status first")
        receipt.status = 200
        receipt.serverError?.failure = nil
        #expect(UploadFailure(UploadError.httpStatus(receipt)) == .permanent)
    }

    @Test func anObjectStoragesErrorDocumentIsReadIntoTheReceipt() {
        func answer(_ status: Int, _ code: String) -> UploadReceipt {
            XMLErrorDocument.reading(
                UploadReceipt(
                    destination: Self.photo, status: status,
                    body: Data("<Error><Code>\(code)</Code><Message>m</Message></Error>".utf8)))
        }
        for code in ["InternalError", "SlowDown", "ServiceUnavailable", "RequestTimeout"] {
            #expect(UploadFailure(UploadError.httpStatus(answer(200, code))) == .transient, "\(code)")
            #expect(UploadFailure(UploadError.httpStatus(answer(400, code))) == .transient, "\(code)")
        }
        #expect(UploadFailure(UploadError.httpStatus(answer(400, "InvalidPart"))) == .permanent)
        #expect(answer(400, "InvalidPart").serverError?.code == "InvalidPart")
        #expect(XMLErrorDocument.reading(UploadReceipt(destination: Self.photo, status: 400)).serverError == nil)
    }
}

@Suite("UploadFailure: an app's own errors in the outbox", .timeLimit(.minutes(1)))
struct UploadFailureOutboxTests {
    let folder: TemporaryFolder
    let queue = TestQueue()

    init() throws {
        folder = try TemporaryFolder()
    }

    private func open(_ uploader: any Uploader, pushbackDelay: Duration = .zero) throws -> Outbox {
        try Outbox(
            folder: folder.url.appendingPathComponent("outbox"), uploader: uploader,
            options: Outbox.Options(
                publishing: PublishOptions(maxConcurrentUploads: 1, retry: RetryPolicy(attempts: 1)),
                networkRetryDelay: .seconds(3600), maxNetworkRetryDelay: .seconds(3600), pushbackDelay: pushbackDelay),
            queue: queue)
    }

    @Test(arguments: [
        (AppError(failure: .offline) as any Error, Outbox.State.waitingForNetwork),
        (AppError(failure: .transient), .waitingForNetwork),
        (URLError(.dataNotAllowed), .waitingForNetwork),
        (JobError.timedOut, .waitingForNetwork),
        (AppError(failure: .permanent), .failed),
        (TestFailure(id: 1), .failed),
    ])
    func aFailureThatCanPassWaitsAndOneThatCannotFails(error: any Error, state: Outbox.State) throws {
        defer { folder.remove() }
        let post = outboxPost("a", photos: 1, videos: 0)
        let uploader = InMemoryUploader()
        uploader.fail(post.media[0].destination, with: error, times: 1)
        let outbox = try open(uploader)
        let id = try outbox.add(post)
        try queue.run()
        #expect(outbox.entry(id)?.state == state)
        if state == .waitingForNetwork {
            outbox.networkDidChange()
            try queue.advance(by: outbox.options.networkWakeWindow)
            #expect(outbox.entry(id)?.state == .published)
        }
        outbox.close()
    }

    @Test func anAppsPushbackHoldsItsHostForTheWaitItAsks() throws {
        defer { folder.remove() }
        let first = outboxPost("a", photos: 1, videos: 0)
        let second = outboxPost("b", photos: 1, videos: 0)
        let uploader = InMemoryUploader()
        uploader.fail(
            first.media[0].destination, with: AppError(failure: .pushback(retryAfter: .seconds(30))), times: 1)
        let outbox = try open(uploader)
        let ids = try [outbox.add(first), outbox.add(second)]
        try queue.run()
        #expect(uploader.startedDestinations == [first.media[0].destination])
        try queue.advance(by: .seconds(29))
        #expect(uploader.startedDestinations.count == 1, "the host is held: the other post waits too")
        #expect(ids.compactMap { outbox.entry($0)?.state } == [.waitingForNetwork, .queued])
        try queue.advance(by: .seconds(2))
        #expect(ids.compactMap { outbox.entry($0)?.state } == [.published, .published])
        outbox.close()
    }
}
