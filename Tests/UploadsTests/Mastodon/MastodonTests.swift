import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing

@testable import Uploads

/// Posting to a Mastodon-compatible server: Node's server of Mastodon's
/// documented contract (`Fixtures/mastodon_server.js`).
@Suite("Mastodon", .startsProcesses, .serialized, .timeLimit(.minutes(1)))
struct MastodonTests {
    /// Waits of 20 ms, doubling up to 80 ms: a video's questions in a
    /// fraction of a second.
    static let quick = MediaProcessing(
        firstWait: .milliseconds(20), maximumWait: .milliseconds(80), timeLimit: .seconds(20),
        statusURL: MediaProcessing.mastodon.statusURL, isReady: MediaProcessing.mastodon.isReady)

    static func server(_ fixture: MastodonFixture, token: String = MastodonFixture.token) throws -> MastodonServer {
        try MastodonServer(url: fixture.baseURL, token: token, processing: quick)
    }

    /// Two photos (one from a file, one in memory) and a video, each with
    /// a description, in `folder`.
    static func post(on server: MastodonServer, in folder: TemporaryFolder) throws -> Post {
        let beach = folder.url.appendingPathComponent("beach.jpg")
        try writePatternedFile(beach, size: 300_000)
        let surf = folder.url.appendingPathComponent("surf.mp4")
        try writePatternedFile(surf, size: 2 * 1024 * 1024 + 12_345)
        return server.post(
            "Surf's up 🌊",
            photos: [
                server.photo(file: beach, description: "Dawn over the bay"),
                server.photo(
                    bytes: patternedBytes(50_000), filename: "sunset.png", description: "Dusk", contentType: "image/png"
                ),
            ],
            videos: [server.video(file: surf, description: "A wave \"breaking\"\non the reef")])
    }

    @Test func publishesOneStatusNamingEveryMediumInOrderOnceTheVideoIsProcessed() async throws {
        try await MastodonFixture.with { fixture in
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            let server = try Self.server(fixture)
            let post = try Self.post(on: server, in: folder)

            let published = try await withTimeLimit(.seconds(30)) {
                try await Job.publishing(post, using: server.mediaUploader, options: server.publishOptions()).value
            }

            let state = try await fixture.state()
            Self.report(state)
            // The media go up together: the server numbers them as they
            // arrive, and the status names them in the post's order.
            let byName = Dictionary(uniqueKeysWithValues: state.media.map { ($0.filename, $0) })
            let inOrder = ["beach.jpg", "sunset.png", "surf.mp4"].compactMap { byName[$0] }
            #expect(inOrder.count == 3 && state.media.count == 3)
            #expect(inOrder.map(\.description) == ["Dawn over the bay", "Dusk", "A wave \"breaking\"\non the reef"])
            #expect(inOrder.map(\.type) == ["image", "image", "video"])
            #expect(inOrder.map(\.contentType) == ["image/jpeg", "image/png", "video/mp4"])
            #expect(inOrder[0].sha256 == (try await sha256(of: folder.url.appendingPathComponent("beach.jpg"))))
            #expect(inOrder[2].sha256 == (try await sha256(of: folder.url.appendingPathComponent("surf.mp4"))))
            #expect(inOrder[2].questions == 2, "the video was asked for until ready")
            let status = try #require(state.statuses.first)
            #expect(state.statuses.count == 1)
            #expect(status.text == "Surf's up 🌊")
            #expect(status.mediaIds == inOrder.map(\.id), "every medium, in the post's order")
            #expect(status.idempotencyKey != nil)
            #expect(MastodonServer.statusURL(in: published.post) == URL(string: status.url))
            #expect(published.media.map { MastodonServer.mediaID(in: $0) } == inOrder.map(\.id))
            let answered: Set<Int> = [200, 202, 206]
            #expect(state.requests.allSatisfy { answered.contains($0.status) })
            let statusRequests = state.requests.filter { $0.path == "/api/v1/statuses" }
            #expect(statusRequests.count == 1)
        }
    }

    /// Prints what a post took, when `JOBKIT_PRINT_MEASUREMENTS` is set:
    /// the requests, and the bytes on the wire against the files'.
    static func report(_ state: MastodonFixture.State) {
        guard ProcessInfo.processInfo.environment["JOBKIT_PRINT_MEASUREMENTS"] != nil else { return }
        var wire = 0
        for request in state.requests { wire += request.bodyBytes + request.headerBytes }
        var files = 0
        for medium in state.media { files += medium.size }
        let questions = state.requests.filter { $0.method == "GET" }.count
        print("Mastodon post: \(state.requests.count) requests, \(questions) of them questions")
        print("  \(wire) bytes on the wire (bodies and request headers) for \(files) bytes of files")
    }

    @Test func aStatusWhoseAnswerWasLostIsCreatedOnceWhenSentAgain() async throws {
        try await MastodonFixture.with { fixture in
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            try await fixture.fail("/api/v1/statuses", status: 503, afterTheWork: true)
            let server = try Self.server(fixture)
            let post = server.post(
                "One status", photos: [server.photo(bytes: patternedBytes(1_000), filename: "a.jpg")])
            let options = server.publishOptions(
                PublishOptions(retry: RetryPolicy(attempts: 2, initialDelay: .milliseconds(1))))

            let published = try await withTimeLimit(.seconds(30)) {
                try await Job.publishing(post, using: server.mediaUploader, options: options).value
            }

            let state = try await fixture.state()
            let sent = state.requests.filter { $0.path == "/api/v1/statuses" }
            #expect(sent.map(\.status) == [503, 200], "the first answer lost, the status sent again")
            #expect(Set(sent.map(\.idempotencyKey)).count == 1, "with the same key")
            #expect(state.statuses.count == 1, "created once")
            #expect(MastodonServer.statusURL(in: published.post)?.absoluteString == state.statuses.first?.url)
        }
    }

    /// Mastodon's `429` names no `Retry-After`, but the time its rate limit
    /// starts over: the pushback waits for it.
    @Test func aRateLimitedUploadIsAPushbackUntilTheLimitStartsOver() async throws {
        try await MastodonFixture.with { fixture in
            try await fixture.fail("/api/v2/media", status: 429)
            let server = try Self.server(fixture)
            let post = server.post("Later", photos: [server.photo(bytes: patternedBytes(1_000), filename: "a.jpg")])
            let options = server.publishOptions(PublishOptions(retry: RetryPolicy(attempts: 1)))

            let error = await #expect(throws: UploadError.self) {
                try await Job.publishing(post, using: server.mediaUploader, options: options).value
            }

            guard case .pushback(let wait?) = error.map(UploadFailure.init) else {
                Issue.record("not a pushback with a wait: \(String(describing: error))")
                return
            }
            // A minute from the server's clock: its Date header, which
            // drops the second's fraction, and the reset are one moment's.
            #expect(wait >= .seconds(60) && wait < .seconds(61), "\(wait)")
        }
    }

    @Test func aRefusedTokenFailsAtOnceAndIsNotRetried() async throws {
        try await MastodonFixture.with { fixture in
            let server = try Self.server(fixture, token: "wrong")
            let post = server.post("Nope", photos: [server.photo(bytes: patternedBytes(1_000), filename: "a.jpg")])
            let options = server.publishOptions(
                PublishOptions(retry: RetryPolicy(attempts: 3, initialDelay: .milliseconds(1))))

            let error = await #expect(throws: UploadError.self) {
                try await Job.publishing(post, using: server.mediaUploader, options: options).value
            }

            let message = error.map { "\($0.localizedDescription)" }
            #expect(
                message
                    == #"a.jpg → api/v2/media: the server answered 401 Unauthorized ("The access token is invalid")"#)
            let state = try await fixture.state()
            #expect(state.requests.count == 1)
        }
    }

    @Test func aStatusOfMoreThanFourMediaIsRefusedWithTheServersWords() async throws {
        try await MastodonFixture.with { fixture in
            let server = try Self.server(fixture)
            let photos = (0..<5).map { server.photo(bytes: patternedBytes(1_000), filename: "\($0).jpg") }
            let post = server.post("Too many", photos: photos)

            let error = await #expect(throws: UploadError.self) {
                try await Job.publishing(post, using: server.mediaUploader, options: server.publishOptions()).value
            }

            let message = error.map { "\($0.localizedDescription)" }
            #expect(
                message
                    == #"api/v1/statuses: the server answered 422 Unprocessable Content ("Cannot attach more than 4 files")"#
            )
            let state = try await fixture.state()
            #expect(state.statuses.isEmpty)
        }
    }

    @Test func withoutWaitingForProcessingTheServerRefusesTheStatus() async throws {
        try await MastodonFixture.with { fixture in
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            let impatient = MediaProcessing(statusURL: { _ in nil }, isReady: { _ in true })
            let server = try MastodonServer(url: fixture.baseURL, token: MastodonFixture.token, processing: impatient)
            let post = try Self.post(on: server, in: folder)

            let error = await #expect(throws: UploadError.self) {
                try await Job.publishing(post, using: server.mediaUploader, options: server.publishOptions()).value
            }

            let message = error.map { "\($0.localizedDescription)" }
            #expect(
                message
                    == "api/v1/statuses: the server answered 422 Unprocessable Content "
                    + #"("Cannot attach files that have not finished processing. Try again in a moment!")"#)
        }
    }

    @Test func anOutboxPublishesThePostOnceAcrossARelaunch() async throws {
        try await MastodonFixture.with { fixture in
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            let server = try Self.server(fixture)
            let post = try Self.post(on: server, in: folder)
            let outboxFolder = folder.url.appendingPathComponent("outbox")
            let first = try Outbox(
                folder: outboxFolder, uploader: server.mediaUploader,
                options: Outbox.Options(publishing: server.publishOptions()))
            let id = try first.add(post)
            try await withTimeLimit(.seconds(30)) {
                for await posts in first.changes where posts.first?.state == .published { break }
            }
            first.close()
            let outbox = try Outbox(
                folder: outboxFolder, uploader: server.mediaUploader,
                options: Outbox.Options(publishing: server.publishOptions()))
            #expect(outbox.entry(id)?.state == .published)
            outbox.close()

            let state = try await fixture.state()
            #expect(state.statuses.count == 1)
            let byName = Dictionary(uniqueKeysWithValues: state.media.map { ($0.filename, $0.id) })
            #expect(
                state.statuses.first?.mediaIds == ["beach.jpg", "sunset.png", "surf.mp4"].compactMap { byName[$0] })
            #expect(state.requests.filter { $0.method == "POST" }.count == 4, "three media and one status")
        }
    }

    @Test func idsAndURLsAreReadFromTheStartOfALongAnswer() {
        let long = Data(
            (#"{"id":"109","url":"https://social.example/@a/109","account":{"note":""#
                + String(repeating: "x", count: 5_000)).utf8)
        let receipt = UploadReceipt(
            destination: URL(string: "https://social.example/api/v1/statuses")!, status: 200, body: long)
        #expect(MastodonServer.statusURL(in: receipt) == URL(string: "https://social.example/@a/109"))
        #expect(MastodonServer.mediaID(in: receipt) == "109")
        let numbered = UploadReceipt(destination: receipt.destination, status: 200, body: Data(#"{"id":7}"#.utf8))
        #expect(MastodonServer.mediaID(in: numbered) == "7")
        #expect(
            MastodonServer.mediaID(in: UploadReceipt(destination: receipt.destination, body: Data("stored".utf8)))
                == nil)
    }

    @Test func eachPostGoesToTheStatusesWithAFragmentOfItsOwn() throws {
        let server = try MastodonServer(url: URL(string: "https://social.example")!, token: "t")
        let first = server.post("a")
        let second = server.post("a")
        #expect(first.destination != second.destination)
        #expect(first.destination?.path == "/api/v1/statuses")
        #expect(first.destination?.fragment?.count == 36)
        #expect(server.photo(file: URL(fileURLWithPath: "/p.jpg")).media.destination.path == "/api/v2/media")
    }
}
