import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing
import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An `Outbox` publishing with `URLSessionUploader` to the strict Node
/// server (`Fixtures/upload_server.js`), which counts what it receives.
@Suite("Outbox over HTTP", .startsProcesses, .timeLimit(.minutes(1)))
struct OutboxHTTPTests {
    /// The posts once `condition` holds of them (at most 30 seconds).
    static func posts(
        of outbox: Outbox, where condition: @escaping @Sendable ([Outbox.Entry]) -> Bool
    ) async throws -> [Outbox.Entry] {
        try await withTimeLimit(.seconds(30)) {
            for await posts in outbox.changes where condition(posts) { return posts }
            throw CancellationError()
        }
    }

    @Test func postsGoByPriorityWithinTheBudgetAndAPausedOneSendsOnlyTheRest() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try await FixtureServer.with { server in
            func photo(_ path: String, seed: UInt8) -> Photo {
                Photo(bytes: patternedBytes(100_000, seed: seed), destination: server.url(path))
            }
            let normal = Post(
                text: "normal", photos: [photo("normal/0.jpg", seed: 1), photo("normal/1.jpg", seed: 2)],
                destination: server.url("normal/post.json"))
            let high = Post(
                text: "high", photos: [photo("high/0.jpg", seed: 3)], destination: server.url("high/post.json"))
            // The first photo is answered 5 s late, so the high post is
            // added while it is in flight; the second, after a minute, so it
            // is in flight when the post is paused (the pause ends it). On a
            // loaded two-core machine, 2 s and 20 s once proved too short.
            try await server.setRule("normal/0.jpg", ["delay": 5.0])
            try await server.setRule("normal/1.jpg", ["delay": 60.0])
            // 100 kB photos, 150 kB in flight at most: one at a time.
            let options = Outbox.Options(publishing: PublishOptions(maxConcurrentUploads: 4), maxBytesInFlight: 150_000)
            let outbox = try Outbox(
                folder: folder.url.appendingPathComponent("outbox"), uploader: URLSessionUploader(), options: options)

            let paused = try outbox.add(normal)
            // Its body is in; its answer is not.
            _ = try await server.waitForUpload(of: "normal/0.jpg")
            try outbox.add(high, priority: .high)
            _ = try await server.waitForUpload(of: "normal/1.jpg")
            // The high post's document (0 bytes counted) may go beside it.
            _ = try await Self.posts(of: outbox) { $0.first?.state == .published }
            #expect(outbox.posts.map(\.state) == [.published, .uploading])
            try outbox.pause(paused)
            try await server.setRule("normal/1.jpg", ["delay": 0.0])
            try outbox.resume(paused)
            let published = try await Self.posts(of: outbox) { $0.allSatisfy { $0.state == .published } }
            #expect(published.map(\.id.destination) == [high.destination, normal.destination])
            outbox.close()

            let received = try await server.received()
            let paths = received.map(\.path)
            #expect(
                paths.prefix(2) == ["/normal/0.jpg", "/high/0.jpg"]
                    && Set(paths.dropFirst(2).prefix(2)) == ["/high/post.json", "/normal/1.jpg"]
                    && paths.dropFirst(4) == ["/normal/1.jpg", "/normal/post.json"],
                "the high post went next, without stopping the upload in flight; the paused photo went again: \(paths)")
            let photos = received.filter { $0.path.hasSuffix(".jpg") }
            #expect(photos.map(\.length) == Array(repeating: 100_000, count: 4))
            let document = try #require(received.last?.body)
            #expect(document.contains(photos[0].md5) && document.contains(photos[3].md5), "named by their ETags")
            #expect(received.last?.headers["idempotency-key"] != nil)
        }
    }

    /// After a pushback, the outbox's requests ask the server first
    /// (`Expect: 100-continue`): a server that turns one away on its
    /// headers gets none of its body, and one that takes it gets it whole.
    @Test func afterAPushbackRequestsAskFirstAndOneTurnedAwaySendsNoBody() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try await FixtureServer.with { server in
            let post = Post(
                text: "asks",
                photos: [Photo(bytes: patternedBytes(500_000, seed: 4), destination: server.url("asks/0.jpg"))],
                destination: server.url("asks/post.json"))
            // Turned away twice, told to come back in a second each time;
            // without a pushback delay, the outbox waits for that alone.
            try await server.setRule("asks/0.jpg", ["status": 503, "times": 2, "headers": ["Retry-After": "1"]])
            let outbox = try Outbox(
                folder: folder.url.appendingPathComponent("outbox"), uploader: URLSessionUploader(),
                options: Outbox.Options(pushbackDelay: .zero))
            defer { outbox.close() }
            try outbox.add(post)
            _ = try await Self.posts(of: outbox) { $0.first?.state == .published }

            let photos = try await server.received().filter { $0.path == "/asks/0.jpg" }
            #expect(
                photos.map(\.headers["expect"]) == [nil, "100-continue", "100-continue"], "\(photos.map(\.headers))")
            #expect(photos.map(\.length) == [500_000, 0, 500_000], "the second turned away on its headers")
            #expect(photos.map(\.early) == [nil, true, nil] && photos.last?.complete == true)
        }
    }
}
