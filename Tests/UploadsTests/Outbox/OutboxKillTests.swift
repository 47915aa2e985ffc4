import Foundation
import JobKitTesting
import TestSupport
import Testing
import Uploads

@testable import Uploads

/// The Playground publishing through `--outbox`, killed with SIGKILL at
/// random moments and run again, until its post is published; against
/// Node's `http` and moto's S3, which count every request and byte they
/// receive.
///
/// After each kill the test reads the outbox's record, as the next run
/// will: a medium it names as stored must never reach the server again.
/// Each post ends published, by one document, with every medium whole.
///
/// Some kills come in the middle of a body, arranged: the server holds the
/// request then arriving, the run is killed, and the server drops the
/// request once the run is gone, with the bytes it read. A kill that comes
/// after the server stored a medium but before its receipt is on disk (a
/// few milliseconds) sends that medium again, with the same
/// `Idempotency-Key`. Uploads to a server on this machine take tens of
/// milliseconds, and some kills come just after an upload ends on purpose,
/// so many kills here land in that window.
@Suite("Outbox killed", .startsProcesses, .timeLimit(.minutes(2)))
struct OutboxKillTests {
    /// A server that counts what it receives, as the kill rounds see it.
    protocol Server: Sendable {
        /// The Playground's arguments that send episode `episode`'s post to
        /// this server.
        func arguments(episode: Int) -> [String]
        /// Forgets what an earlier episode sent, where needed.
        func startEpisode() async throws
        /// Body bytes that have arrived so far, and requests ended.
        func progress() async throws -> (bytes: Int, ended: Int)
        /// Waits until `ended` requests have ended, or two seconds passed.
        func waitFor(ended: Int) async throws
        /// Holds the request whose body is still arriving once `bytes` body
        /// bytes have arrived: the server stops reading it until
        /// ``release()``. Whether one was held within ten seconds.
        func hold(afterBytes bytes: Int) async throws -> Bool
        /// Drops every request held, with the bytes it read and without its
        /// rest, once the server recorded it.
        func release() async throws
        /// Every request so far, in order.
        func requests() async throws -> [Request]
        /// Checks that `medium` is stored whole, with the bytes of `file`.
        func checkStored(_ path: String, file: URL) async throws
        /// Checks that the post's document at `path` is stored, and that
        /// every request that sent it carried `key` where the server sees
        /// it.
        func checkDocument(_ path: String, idempotencyKey key: String) async throws
        /// What this server's requests call the upload of `media` (the
        /// `path` of ``Request``): by default its destination's path.
        func name(of media: Media) -> String
    }

    /// A request a server received.
    struct Request {
        /// The path of what it sent, without the leading slash.
        var path: String
        /// What it sent: the path, and for S3 the operation and part.
        var name: String
        var bytes: Int
        /// Whether it was received whole and answered with a success.
        var isStored: Bool
    }

    /// What a kill left behind.
    struct Kill {
        /// How many requests the server had recorded once the run was gone.
        let requestsBefore: Int
        /// The paths of what the outbox's record names as stored: media with
        /// a receipt, and the document once published.
        let stored: Set<String>
    }

    /// What one test's kills measured.
    struct Tally {
        var kills = 0
        /// Kills that came while the server held a request.
        var killsMidBody = 0
        var episodes = 0
        var bytesReceived = 0
        var postBytes = 0
        /// Bytes of requests not answered with a success: cut short by a
        /// kill, or whose answer the killed run never read (an S3 part
        /// stored that way is found by the next run, and not sent again).
        var interruptedBytes = 0
        /// Bytes of requests that stored again what a request had stored:
        /// a kill came before the outbox recorded the first.
        var repeatedBytes = 0
        /// Requests that stored a post's document, and posts.
        var documentsStored = 0
    }

    @Test func killedRunsAgainstNodeEndInOnePublishedPostEachAndNeverResendAStoredMedium() async throws {
        try await FixtureServer.with { server in
            let tally = try await Self.killRepeatedly(NodeServer(fixture: server), kills: 14, scale: "0.1")
            Self.report("Node", tally)
        }
    }

    @Test(S3Fixture.requirement)
    func killedRunsAgainstS3EndInOnePublishedPostEachAndNeverResendAStoredMedium() async throws {
        try await S3Fixture.with { s3 in
            // At half scale two videos (9 and 13 MB) go up as multipart
            // uploads of two parts, resumed through their manifests.
            let tally = try await Self.killRepeatedly(S3Server(fixture: s3), kills: 6, scale: "0.5")
            Self.report("S3", tally)
        }
    }

    static func report(_ name: String, _ tally: Tally) {
        if ProcessInfo.processInfo.environment["JOBKIT_PRINT_MEASUREMENTS"] != nil {
            print(
                "\(name): \(tally.kills) kills over \(tally.episodes) posts, \(tally.killsMidBody) of them mid-body; "
                    + "the server received "
                    + "\(tally.bytesReceived) body bytes for posts of \(tally.postBytes) bytes in all: "
                    + "\(tally.interruptedBytes) in requests a kill ended unanswered, \(tally.repeatedBytes) in requests "
                    + "that stored again what was stored but not yet recorded; \(tally.documentsStored) documents "
                    + "stored for \(tally.episodes) posts")
        }
        #expect(tally.killsMidBody > 0, "some kills came while the server held a request")
        #expect(tally.interruptedBytes > 0, "some kills came in the middle of an upload")
    }

    /// Runs the Playground on `server`, killing it at random moments, until
    /// `kills` runs were killed, each post then run to its end; checks
    /// every post.
    static func killRepeatedly(_ server: some Server, kills: Int, scale: String) async throws -> Tally {
        var random = SeededRandomNumberGenerator(seed: 25)
        var tally = Tally()
        while tally.kills < kills {
            tally.episodes += 1
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            try await server.startEpisode()
            let episodeStart = try await server.requests().count
            let arguments = ["--outbox", folder.url.path, "--scale", scale] + server.arguments(episode: tally.episodes)
            var episodeKills: [Kill] = []
            var published = false
            while !published {
                let killsLeft = kills - tally.kills
                let run = try PlaygroundProcess(arguments)
                var held = false
                if killsLeft > 0 {
                    held = try await moment(in: run, of: server, folder: folder.url, using: &random)
                    run.kill()
                }
                let status = await run.exit()
                #expect(!run.timedOut, "the run had not ended after a minute; stdout: \(run.output)")
                if killsLeft > 0 {
                    // The run is gone: what the server held ends now.
                    try await server.release()
                }
                if run.wasKilled {
                    tally.kills += 1
                    if held { tally.killsMidBody += 1 }
                    let record = try Self.record(in: folder.url)
                    episodeKills.append(
                        Kill(
                            requestsBefore: try await server.requests().count, stored: record?.stored(by: server) ?? [])
                    )
                } else {
                    #expect(run.process.terminationReason == .exit)
                    #expect(status == 0, "stdout: \(run.output) stderr: \(run.error)")
                    #expect(run.output.contains("Published in") || run.output.hasPrefix("Already published"))
                    published = status == 0
                    if status != 0 { return tally }
                }
            }
            // Once published, a run says so and sends nothing.
            let before = try await server.requests().count
            let again = try PlaygroundProcess(arguments)
            #expect(await again.exit() == 0)
            #expect(again.output.hasPrefix("Already published"), "stdout: \(again.output)")
            let requests = try await server.requests()
            #expect(requests.count == before, "a run after the post was published sent nothing")

            let record = try #require(try Self.record(in: folder.url))
            #expect(record.status == .published)
            for (index, kill) in episodeKills.enumerated() {
                let sentAgain = requests[kill.requestsBefore...].map(\.path).filter { kill.stored.contains($0) }
                #expect(sentAgain.isEmpty, "sent after kill \(index + 1) of post \(tally.episodes), stored before it")
            }
            let episode = requests[episodeStart...]
            let document = server.name(of: record.document)
            for path in record.media.map({ server.name(of: $0.media) }) + [document] {
                #expect(episode.contains { $0.path == path && $0.isStored }, "\(path) was stored for this post")
            }
            for medium in record.media {
                try await server.checkStored(server.name(of: medium.media), file: medium.file)
            }
            try await server.checkDocument(document, idempotencyKey: record.idempotencyKey)
            tally.bytesReceived += episode.reduce(0) { $0 + $1.bytes }
            tally.interruptedBytes += episode.filter { !$0.isStored }.reduce(0) { $0 + $1.bytes }
            var stored: Set<String> = []
            for request in episode where request.isStored && !stored.insert(request.name).inserted {
                tally.repeatedBytes += request.bytes
            }
            tally.documentsStored += episode.filter { $0.path == document && $0.isStored }.count
            tally.postBytes += Int(record.media.reduce(0) { $0 + $1.size } + (record.documentSize ?? 0))
        }
        return tally
    }

    /// Waits for a random moment of `run`: once it printed its first lines
    /// (it is about to add the post, or has resumed it), once a random
    /// share of the first half of what is left has arrived at the server,
    /// which then holds the request arriving (so that most runs are killed
    /// in the middle of a body, before they publish), or once one to three
    /// more requests have ended there (a medium just stored, its receipt
    /// not yet written, perhaps). Whether the server holds a request. A
    /// server's wait gives up when the run may have ended: the kill comes
    /// then.
    static func moment(
        in run: PlaygroundProcess, of server: some Server, folder: URL, using random: inout SeededRandomNumberGenerator
    ) async throws -> Bool {
        let now = try await server.progress()
        switch Int.random(in: 0..<20, using: &random) {
        case 0..<3:
            await run.firstLine()
            return false
        case 3..<12:
            let record = try Self.record(in: folder)
            let left = record.map { record in
                record.media.filter { $0.receipt == nil }.reduce(0) { $0 + Int($1.size) }
            }
            return try await server.hold(
                afterBytes: now.bytes + Int.random(in: 0...max((left ?? 1_000_000) / 2, 1), using: &random))
        default:
            try await server.waitFor(ended: now.ended + Int.random(in: 1...3, using: &random))
            return false
        }
    }

    /// The post's record in the outbox of `folder`, if it was added.
    static func record(in folder: URL) throws -> OutboxRecord? {
        let posts = folder.appendingPathComponent("outbox/posts")
        let files = (try? FileManager.default.contentsOfDirectory(at: posts, includingPropertiesForKeys: nil)) ?? []
        let records = try files.filter { $0.pathExtension == "json" }.map {
            try JSONDecoder().decode(OutboxRecord.self, from: Data(contentsOf: $0))
        }
        #expect(records.count <= 1, "one post, one record")
        return records.first
    }

    /// `destination`'s path, without the leading slash.
    static func path(of destination: URL) -> String {
        String(destination.path.drop { $0 == "/" })
    }
}

extension OutboxKillTests.Server {
    func name(of media: Media) -> String {
        OutboxKillTests.path(of: media.destination)
    }
}

extension OutboxRecord {
    /// What `server`'s requests call what the record names as stored.
    func stored(by server: some OutboxKillTests.Server) -> Set<String> {
        var stored = Set(media.filter { $0.receipt != nil }.map { server.name(of: $0.media) })
        if status == .published { stored.insert(server.name(of: document)) }
        return stored
    }

    /// The post's document as publishing names it: bytes to the post's
    /// destination (their size does not matter here).
    var document: Media {
        Media(bytes: Data(), destination: destination, contentType: "application/json")
    }
}

/// Node's `http` server, each episode's post below a path of its own.
struct NodeServer: OutboxKillTests.Server {
    let fixture: FixtureServer

    func arguments(episode: Int) -> [String] {
        ["--server", fixture.url("post-\(episode)").absoluteString]
    }

    func startEpisode() async throws {}

    func progress() async throws -> (bytes: Int, ended: Int) {
        let now = try await fixture.waitFor(bytes: 0, ended: 0)
        return (now.bytes, now.ended)
    }

    func waitFor(ended: Int) async throws {
        _ = try await fixture.waitFor(bytes: 0, ended: ended, seconds: 2)
    }

    func hold(afterBytes bytes: Int) async throws -> Bool {
        try await fixture.hold(afterBytes: bytes)
    }

    func release() async throws {
        try await fixture.release()
    }

    func requests() async throws -> [OutboxKillTests.Request] {
        try await fixture.received().map {
            let path = String($0.path.dropFirst())
            return .init(path: path, name: path, bytes: $0.length, isStored: $0.complete)
        }
    }

    func checkStored(_ path: String, file: URL) async throws {
        let sent = try await fixture.received().filter { $0.path == "/" + path }
        #expect(sent.last { $0.complete }?.sha256 == (try await sha256(of: file)), "\(path) is stored whole")
        // Sent again after a kill that came before its receipt was
        // recorded: with its one key, which a server that honours it uses
        // to store it once.
        let keys = Set(sent.map { $0.headers["idempotency-key"] })
        #expect(keys.count == 1 && keys.first != nil, "\(path) is sent with one key: \(keys)")
    }

    func checkDocument(_ path: String, idempotencyKey key: String) async throws {
        let sent = try await fixture.received().filter { $0.path == "/" + path }
        #expect(sent.contains { $0.complete }, "the post is stored")
        #expect(
            sent.allSatisfy { $0.headers["idempotency-key"] == key },
            "every attempt of the post carries its one key: \(sent.map { $0.headers["idempotency-key"] })")
    }
}

/// moto's S3, behind the presigning backend, emptied for each episode:
/// an outbox resuming a post asks the storage first, and the last
/// episode's objects (the same media at the same keys) would be found
/// stored.
struct S3Server: OutboxKillTests.Server {
    let fixture: S3Fixture

    func arguments(episode: Int) -> [String] {
        ["--s3", fixture.baseURL.appendingPathComponent("presign").absoluteString]
    }

    func startEpisode() async throws {
        // The killed run's last request may still be in flight.
        try await fixture.clean(waitingUpTo: 10)
    }

    func progress() async throws -> (bytes: Int, ended: Int) {
        let requests = try await fixture.requests()
        return (requests.reduce(0) { $0 + $1.bytes }, requests.filter { $0.status != nil }.count)
    }

    func waitFor(ended: Int) async throws {
        _ = try await fixture.wait(for: nil, count: ended, timeout: 2)
    }

    func hold(afterBytes bytes: Int) async throws -> Bool {
        try await fixture.hold(afterBytes: bytes)
    }

    func release() async throws {
        try await fixture.release()
    }

    func requests() async throws -> [OutboxKillTests.Request] {
        try await fixture.requests().map {
            let path = $0.key ?? ""
            return .init(
                path: path, name: "\($0.operation) \(path) \($0.partNumber ?? 0)", bytes: $0.bytes,
                isStored: (200..<300).contains($0.status ?? 0))
        }
    }

    func checkStored(_ path: String, file: URL) async throws {
        let object = try await fixture.object(path)
        #expect(object.sha256 == (try await sha256(of: file)), "\(path) is stored whole")
    }

    func checkDocument(_ path: String, idempotencyKey key: String) async throws {
        // S3 keeps no idempotency key: a document stored twice is the same
        // object, and the kill checks say no document is sent after its
        // receipt is recorded.
        let object = try await fixture.object(path)
        #expect(object.exists, "the post is stored")
    }
}
