import Foundation
import JobKitTesting
import TestSupport
import Testing

@testable import Uploads

/// The Playground posting to a Mastodon-compatible server through
/// `--outbox`, killed with SIGKILL at random moments and run again, until
/// its post is published: one status in all, naming every medium, each
/// stored whole.
///
/// A kill after the server stored a medium but before its receipt is on
/// disk sends the medium again at the next run, as a new medium (Mastodon
/// keeps no key for media; the server deletes the unused one a day
/// later). A kill after the server created the status but before its
/// receipt is on disk sends the status again, with its one
/// `Idempotency-Key`, and the server answers with the status it made.
@Suite("Outbox killed, Mastodon", .startsProcesses, .timeLimit(.minutes(2)))
struct OutboxKillMastodonTests {
    static let files = ["photo-1.jpg", "photo-2.jpg", "photo-3.jpg", "video-1.mp4"]

    @Test func killedRunsEndInOneStatusNamingEveryMediumStoredWhole() async throws {
        // The clip is ready at the first question, a second after its upload.
        try await MastodonFixture.with(processingPolls: 1) { server in
            var random = SeededRandomNumberGenerator(seed: 42)
            var kills = 0
            var episodes = 0
            var statusesSent = 0
            var mediaSent = 0
            var bodyBytes = 0
            var postBytes = 0
            while kills < 8 {
                episodes += 1
                let folder = try TemporaryFolder()
                defer { folder.remove() }
                let before = try await server.state()
                let arguments = [
                    "--outbox", folder.url.path, "--scale", "0.1", "--mastodon", server.baseURL.absoluteString,
                    "--token", MastodonFixture.token,
                ]
                var published = false
                while !published {
                    let run = try PlaygroundProcess(arguments)
                    if kills < 8 {
                        let now = try await server.waitFor(bytes: 0, ended: 0, seconds: 0)
                        switch Int.random(in: 0..<10, using: &random) {
                        case 0..<2:
                            await run.firstLine()
                        case 2..<5:
                            _ = try await server.waitFor(
                                bytes: now.bytes + Int.random(in: 1...1_500_000, using: &random), ended: 0, seconds: 2)
                        default:
                            _ = try await server.waitFor(
                                bytes: 0, ended: now.ended + Int.random(in: 1...6, using: &random), seconds: 2)
                        }
                        run.kill()
                    }
                    let status = await run.exit()
                    #expect(!run.timedOut, "the run had not ended after a minute; stdout: \(run.output)")
                    if run.wasKilled {
                        kills += 1
                    } else {
                        #expect(status == 0, "stdout: \(run.output) stderr: \(run.error)")
                        published = status == 0
                        if status != 0 { return }
                    }
                }
                // Once published, a run says so and sends nothing.
                let done = try await server.state()
                let again = try PlaygroundProcess(arguments)
                #expect(await again.exit() == 0)
                #expect(again.output.hasPrefix("Already published"), "stdout: \(again.output)")
                let after = try await server.state()
                #expect(after.requests.count == done.requests.count, "a run after the post was published sent nothing")

                let statuses = after.statuses.dropFirst(before.statuses.count)
                #expect(statuses.count == 1, "one status for post \(episodes)")
                let status = try #require(statuses.first)
                let media = Dictionary(uniqueKeysWithValues: after.media.map { ($0.id, $0) })
                let named = status.mediaIds.compactMap { media[$0] }
                #expect(named.map(\.filename) == Self.files, "every medium, in order")
                for medium in named {
                    let file = folder.url.appendingPathComponent("media/\(medium.filename)")
                    #expect(medium.sha256 == (try await sha256(of: file)), "\(medium.filename) is stored whole")
                    #expect(medium.description?.isEmpty == false)
                }
                let requests = after.requests.dropFirst(before.requests.count)
                let statusRequests = requests.filter { $0.path == "/api/v1/statuses" }
                #expect(Set(statusRequests.map(\.idempotencyKey)).count == 1, "every status request with one key")
                #expect(statusRequests.first?.idempotencyKey != nil)
                statusesSent += statusRequests.count
                mediaSent += requests.filter { $0.path == "/api/v2/media" }.count
                bodyBytes += requests.reduce(0) { $0 + $1.bodyBytes }
                postBytes += named.reduce(0) { $0 + $1.size }
            }
            if ProcessInfo.processInfo.environment["JOBKIT_PRINT_MEASUREMENTS"] != nil {
                print(
                    "Mastodon: \(kills) kills over \(episodes) posts; \(mediaSent) media and \(statusesSent) status "
                        + "requests sent for \(episodes * 4) media and \(episodes) statuses; the server received "
                        + "\(bodyBytes) body bytes for media of \(postBytes) bytes")
            }
        }
    }

    @Test func aStatusWhoseAnswerWasLostIsNotCreatedAgainByTheNextRun() async throws {
        try await MastodonFixture.with(processingPolls: 1) { server in
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            // The server creates the status, then its answer is lost: the
            // run gives up (no retries) and the post waits for the network.
            try await server.fail("/api/v1/statuses", status: 503, afterTheWork: true)
            let arguments = [
                "--outbox", folder.url.path, "--scale", "0.01", "--retries", "0", "--mastodon",
                server.baseURL.absoluteString, "--token", MastodonFixture.token,
            ]
            let first = try PlaygroundProcess(arguments)
            #expect(await first.exit() == 75, "stderr: \(first.error)")
            #expect(first.error.contains("the post waits for the network"))

            let second = try PlaygroundProcess(arguments)
            #expect(await second.exit() == 0, "stderr: \(second.error)")

            let state = try await server.state()
            let sent = state.requests.filter { $0.path == "/api/v1/statuses" }
            #expect(sent.map(\.status) == [503, 200])
            #expect(Set(sent.map(\.idempotencyKey)).count == 1 && sent.first?.idempotencyKey != nil)
            #expect(state.statuses.count == 1, "created once, across the two runs")
            #expect(second.output.contains("  the post: \(state.statuses[0].url)\n"))
            #expect(state.requests.filter { $0.path == "/api/v2/media" }.count == 4, "no medium sent again")
        }
    }
}
