import Foundation
import JobKitTesting
import TestSupport
import Testing
import Uploads
import UploadsTesting

/// Runs the built `Playground` executable, as a user would, and checks what
/// it prints, what it writes and how it exits.
@Suite("Playground", .startsProcesses, .timeLimit(.minutes(1)))
struct PlaygroundTests {
    struct Run {
        let status: Int32
        let output: String
        let error: String
    }

    /// Runs the Playground with tiny media and no simulated speed, so a run
    /// takes a fraction of a second; with `workFolder`, the run makes its
    /// folder there (`--work-folder`), so a test sees everything it leaves.
    /// With `signal`, sends it that signal once it printed `moment`: by
    /// default once its first upload finished (its first "✓" line). The
    /// run's pipes are read off Swift's cooperative threads, which the
    /// suites running beside need.
    private func playground(
        _ arguments: [String], fast: Bool = true, workFolder: URL? = nil, interruptedWith signal: Int32? = nil,
        at moment: String = "✓"
    ) async throws -> Run {
        let run = try PlaygroundProcess(
            arguments + (fast ? ["--scale", "0.01", "--speed", "0"] : [])
                + (workFolder.map { ["--work-folder", $0.path] } ?? []),
            killedAfter: 30)
        if let signal {
            await run.read(until: moment, thenSend: signal)
        }
        let status = await run.exit()
        #expect(!run.timedOut, "the Playground had not exited after 30 seconds and was killed")
        if signal != SIGKILL {
            #expect(run.process.terminationReason == .exit, "the run exits by itself, handling the signal")
        }
        return Run(status: status, output: run.output, error: run.error)
    }

    @Test func publishesTheSamplePostIntoTheOutputFolder() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let work = try TemporaryFolder()
        defer { work.remove() }
        let run = try await playground(["--output", folder.url.path], workFolder: work.url)

        #expect(run.status == 0, "stderr: \(run.error)")
        #expect(run.error.isEmpty)
        #expect(run.output.contains("Published in"))
        #expect(run.output.contains("6 photos, 3 videos and the post"))
        #expect(!run.output.contains("\r"), "plain lines when the output is not a terminal")
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.url.path).isEmpty)
        let uploaded = folder.files()
        let expected =
            (1...6).map { "posts/beach-day/photo-\($0).jpg" } + (1...3).map { "posts/beach-day/video-\($0).mp4" }
            + ["posts/beach-day.json"]
        #expect(uploaded == expected.sorted())
        for name in expected.dropLast() {
            #expect(run.output.contains("✓ \(name)"))
        }
        let photo = try FileManager.default.attributesOfItem(
            atPath: folder.url.appendingPathComponent(expected[0]).path)
        #expect((photo[.size] as? NSNumber)?.intValue == 2_400_000 / 100)
        let document = try Data(contentsOf: folder.url.appendingPathComponent("posts/beach-day.json"))
        let json = try JSONSerialization.jsonObject(with: document) as? [String: Any]
        let photos = try #require(json?["photos"] as? [[String: String]])
        #expect(photos.count == 6)
        #expect((json?["videos"] as? [[String: String]])?.count == 3)
        #expect(photos.first?["url"] == "https://uploads.example.com/posts/beach-day/photo-1.jpg")
        #expect(photos.allSatisfy { $0["etag"]?.hasPrefix("\"") == true }, "each medium's ETag, from its receipt")
    }

    @Test func exitsWithOneErrorLineWhenEveryAttemptFails() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let work = try TemporaryFolder()
        defer { work.remove() }
        let run = try await playground(
            ["--output", folder.url.path, "--fail-rate", "1", "--retries", "1"],
            workFolder: work.url
        )

        #expect(run.status == 1)
        let errorLines = run.error.split(separator: "\n")
        #expect(errorLines.count == 1)
        // The first three photos start together; whichever runs out of
        // retries first (the jittered waits decide) fails the post, and the
        // error line names it.
        let failed = try #require(
            errorLines.first?.firstMatch(
                of: #/^error: publishing failed, the post was not published: (posts/beach-day/photo-[123]\.jpg): /#)?
                .1)
        #expect(
            errorLines.first?.hasSuffix(": the server answered 503 Service Unavailable (\"injected fault\")") == true)
        let failure = "✗ \(failed): the server answered 503 Service Unavailable (\"injected fault\"); "
        #expect(run.output.contains(failure + "retry 1 of 1 in "))
        #expect(run.output.contains(failure + "no retries left"))
        // What else was under way when it failed, cancelled by the failure;
        // the upload that failed is the error line's.
        #expect(
            run.output.contains(
                "When it failed, these were running, and were cancelled:\n    publish (running)\n    └─ group 0/9 (running)\n"
            ))
        #expect(!run.output.contains("upload \(failed.split(separator: "/").last ?? "")"))
        #expect(!run.output.contains("Published in"))
        #expect(folder.files().isEmpty)
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.url.path).isEmpty)
    }

    @Test func aSuccessfulRunWithoutOutputOrKeepLeavesNothing() async throws {
        let work = try TemporaryFolder()
        defer { work.remove() }
        let published = try await playground([], workFolder: work.url)
        #expect(published.status == 0, "stderr: \(published.error)")
        #expect(published.output.contains("  removed at exit; pass --keep or --output DIR to keep the files"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.url.path).isEmpty)

        let failing = try TemporaryFolder()
        defer { failing.remove() }
        let failed = try await playground(["--fail-rate", "1", "--retries", "0"], workFolder: failing.url)
        #expect(failed.status == 1)
        #expect(failed.output.contains("no retries"))
        #expect(!failed.output.contains("up to 0"))
        #expect(try FileManager.default.contentsOfDirectory(atPath: failing.url.path).isEmpty)
    }

    @Test func keepKeepsOnlyThePublishedPostInTheWorkFolder() async throws {
        let work = try TemporaryFolder()
        defer { work.remove() }
        let published = try await playground(["--keep"], workFolder: work.url)
        #expect(published.status == 0, "stderr: \(published.error)")
        let runs = try FileManager.default.contentsOfDirectory(atPath: work.url.path)
        #expect(runs.count == 1)
        let run = try #require(runs.first)
        #expect(run.hasPrefix("JobKitPlayground-"))
        #expect(published.output.contains("  into \(work.url.path)/\(run)/uploaded\n"))
        #expect(published.output.contains("  kept (--keep)"))
        #expect(work.files().allSatisfy { $0.hasPrefix("\(run)/uploaded/posts/") })
        #expect(work.files().count == 10)
    }

    @Test func retriesInjectedFailuresAndStillPublishes() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let work = try TemporaryFolder()
        defer { work.remove() }
        let run = try await playground(
            ["--output", folder.url.path, "--fail-rate", "0.3", "--seed", "3", "--retries", "5", "--concurrency", "1"],
            workFolder: work.url
        )

        #expect(run.status == 0, "stderr: \(run.error)")
        // One upload at a time: the attempts, and so the seeded faults, come
        // in the same order on every run.
        #expect(run.output.contains("✗ "), "the seed makes some attempts fail")
        #expect(run.output.contains("Published in"))
        #expect(folder.files().count == 10)
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.url.path).isEmpty)
    }

    @Test func publishesToAServerWithServer() async throws {
        try await FixtureServer.with { server in
            let work = try TemporaryFolder()
            defer { work.remove() }
            let run = try await playground(["--server", server.baseURL.absoluteString], workFolder: work.url)

            #expect(run.status == 0, "stderr: \(run.error)")
            #expect(run.output.contains("the post: \(server.url("posts/beach-day.json").absoluteString)"))
            let received = try await server.received()
            #expect(received.count == 10)
            #expect(received.allSatisfy { $0.method == "PUT" && $0.complete })
            #expect(received.last?.path == "/posts/beach-day.json")
            #expect(try FileManager.default.contentsOfDirectory(atPath: work.url.path).isEmpty)
            #expect(
                received.first { $0.path == "/posts/beach-day/video-2.mp4" }?.length == 26_000_000 / 100)
        }
    }

    /// `--background`: the outbox's transfers go by the double of a
    /// background session, and the app is suspended, killed and
    /// relaunched midway; the new outbox rejoins the transfer the system
    /// carried on (the server holds it until the relaunch), and each
    /// upload reaches the server once.
    @Test func anOutboxRunInTheBackgroundRejoinsItsTransferAfterTheRelaunch() async throws {
        try await FixtureServer.with { server in
            let work = try TemporaryFolder()
            defer { work.remove() }
            let outbox = work.url.appendingPathComponent("outbox")
            try await server.setRule("posts/beach-day/photo-1.jpg", ["hold_after": 65_536])
            let run = try PlaygroundProcess(
                [
                    "--server", server.baseURL.absoluteString, "--outbox", outbox.path, "--background",
                    "--concurrency", "1", "--scale", "0.1", "--speed", "0",
                ],
                killedAfter: 30)
            await run.read(until: "relaunched")
            // The app left the screen once its first bytes went; the server
            // holds the photo once 64 KiB arrived, which on a busy machine
            // may come after the relaunch.
            let arrived = try await server.waitFor(bytes: 65_536, ended: 0)
            #expect(arrived.ok, "the first photo's 64 KiB arrived: \(arrived.bytes) bytes")
            #expect(try await server.release(resuming: true) == 1, "the first photo was held, and carried on")
            let status = await run.exit()
            #expect(!run.timedOut)

            #expect(status == 0, "stderr: \(run.error)")
            let life = run.output.split(separator: "\n").filter { line in
                ["suspended", "killed", "relaunched", "rejoined"].contains { line.hasPrefix("  \($0)") }
            }
            #expect(
                life == [
                    "  suspended: the system carries 1 transfer on", "  killed by the system; the transfers go on",
                    "  relaunched: the new outbox rejoins them", "  rejoined 1 transfer; none sent twice",
                ], "\(run.output)")
            #expect(run.output.contains("Published in"))
            let received = try await server.received()
            #expect(received.count == 10, "each upload once: \(received.map(\.path))")
            #expect(Set(received.map(\.path)).count == 10)
            #expect(received.allSatisfy { $0.complete })
            #expect(TemporaryFolder.files(in: outbox.appendingPathComponent("outbox/transfers")) == [])
        }
    }

    @Test func postsToAMastodonCompatibleServerAndOnceThroughAnOutbox() async throws {
        // The clip is ready at the first question, a second after its upload.
        try await MastodonFixture.with(processingPolls: 1) { server in
            let work = try TemporaryFolder()
            defer { work.remove() }
            let mastodon = ["--mastodon", server.baseURL.absoluteString, "--token", MastodonFixture.token]

            let run = try await playground(mastodon, workFolder: work.url)

            #expect(run.status == 0, "stderr: \(run.error)")
            var state = try await server.state()
            let status = try #require(state.statuses.first)
            #expect(run.output.contains("  the post: \(status.url)\n"))
            #expect(run.output.contains("3 photos, 1 video and the post"))
            #expect(run.output.contains("  ✓ video-1.mp4  "))
            let byName = Dictionary(uniqueKeysWithValues: state.media.map { ($0.filename, $0) })
            let names = ["photo-1.jpg", "photo-2.jpg", "photo-3.jpg", "video-1.mp4"]
            #expect(status.mediaIds == names.compactMap { byName[$0]?.id }, "4 media, in order")
            #expect(names.allSatisfy { byName[$0]?.description?.isEmpty == false }, "each with a description")
            #expect(byName["video-1.mp4"]?.questions == 1)

            let outbox = work.url.appendingPathComponent("outbox").path
            let first = try await playground(mastodon + ["--outbox", outbox])
            #expect(first.status == 0, "stderr: \(first.error)")
            let again = try await playground(mastodon + ["--outbox", outbox])
            #expect(again.status == 0, "stderr: \(again.error)")
            #expect(again.output.hasPrefix("Already published: \"A day at the beach: three photos and a clip.\"\n"))
            state = try await server.state()
            #expect(state.statuses.count == 2, "one of the run without the outbox, one through it")
            #expect(again.output.contains("  the post: \(state.statuses[1].url)\n"))
            #expect(state.requests.count == 12, "each of two runs: 4 media, one question, one status")
        }
    }

    @Test(TusFixture.requirement)
    func publishesThroughATusServerAndOnceThroughAnOutbox() async throws {
        try await TusFixture.with(.resumableUpload) { tus in
            let work = try TemporaryFolder()
            defer { work.remove() }
            let arguments = ["--tus", tus.endpoint.absoluteString]

            let run = try await playground(arguments, workFolder: work.url)

            #expect(run.status == 0, "stderr: \(run.error)")
            #expect(run.output.contains("to the tus server at \(tus.endpoint.absoluteString)"))
            #expect(run.output.contains("  ✓ video-3.mp4  "))
            var requests = try await tus.requests()
            #expect(requests.filter { $0.method == "POST" }.count == 10, "9 media and the post, each created once")
            #expect(try await tus.unfinishedUploads().isEmpty, "each stored whole")
            let post = try #require(requests.last { $0.method == "POST" }?.location)
            let postURL = try #require(URL(string: post, relativeTo: tus.baseURL)?.absoluteURL)
            #expect(run.output.contains("  the post: \(postURL.absoluteString) (201)\n"))

            let outbox = work.url.appendingPathComponent("outbox").path
            let first = try await playground(arguments + ["--outbox", outbox])
            #expect(first.status == 0, "stderr: \(first.error)")
            let sent = try await tus.requests().count
            let again = try await playground(arguments + ["--outbox", outbox])
            #expect(again.status == 0, "stderr: \(again.error)")
            #expect(again.output.hasPrefix("Already published: \"A day at the beach: six photos and three clips.\"\n"))
            requests = try await tus.requests()
            #expect(requests.count == sent, "once published, nothing is sent")
            #expect(requests.filter { $0.method == "POST" }.count == 20)
            #expect(try await tus.unfinishedUploads().isEmpty)
        }
    }

    @Test func aPresigningBackendThatAnswersWithoutAURLIsSaidAsItIsAndTheRunEnds() async throws {
        try await FixtureServer.with { server in
            // Node's fixture stores what it is sent and answers 201 "stored":
            // not a presigning backend.
            let backend = server.url("presign").absoluteString
            let reason = "the presigning backend at \(backend) answered 201 with no URL"
            // The first refusal cancels the presign calls in flight, which
            // once deadlocked FoundationNetworking about one run in three
            // (see S3Presigner): eight runs, each bounded.
            for _ in 0..<8 {
                let work = try TemporaryFolder()
                defer { work.remove() }
                let run = try await playground(["--s3", backend, "--retries", "0"], workFolder: work.url)

                #expect(run.status == 1, "\(run.output)")
                #expect(run.output.contains(": \(reason); not retried"), "\(run.output)")
                #expect(run.error == "error: publishing failed, the post was not published: \(reason)\n")
            }
        }
    }

    @Test func aServerThatNeverAnswersTimesOutAndTheErrorLineSaysSo() async throws {
        try await FixtureServer.with { server in
            // Node answers photo-1 only after 20 s; the Playground's time
            // limit per attempt is 1.5 s, ample for the other tiny uploads.
            try await server.setRule("posts/beach-day/photo-1.jpg", ["delay": 20])
            let work = try TemporaryFolder()
            defer { work.remove() }
            let run = try await playground(
                ["--server", server.baseURL.absoluteString, "--timeout", "1.5", "--retries", "1"], workFolder: work.url)

            #expect(run.status == 1)
            #expect(run.output.contains(", 1.5 s per attempt"))
            #expect(run.output.contains("✗ posts/beach-day/photo-1.jpg: timed out after 1.5 s; retry 1 of 1 in "))
            #expect(
                run.error
                    == "error: publishing failed, the post was not published: "
                    + "posts/beach-day/photo-1.jpg: timed out after 1.5 s\n")
            #expect(try FileManager.default.contentsOfDirectory(atPath: work.url.path).isEmpty)
        }
    }

    @Test(arguments: [(SIGINT, "Ctrl-C"), (SIGTERM, "SIGTERM"), (SIGHUP, "SIGHUP")])
    func aSignalCancelsEveryUploadAndExitsWithOneErrorLine(signal: Int32, name: String) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let work = try TemporaryFolder()
        defer { work.remove() }
        // About 3 s of uploads at 1 MB/s each, interrupted halfway, when
        // the three videos (1.2 to 2.6 s each) are sending. At the first
        // "✓", under Thread Sanitizer, the signal once came as the other
        // two photos had finished and the next had not started: no upload
        // was running.
        let run = try await playground(
            ["--output", folder.url.path, "--scale", "0.1", "--speed", "1"], fast: false, workFolder: work.url,
            interruptedWith: signal, at: "… 50%")
        let printed = run.output
        let errorText = run.error

        #expect(run.status == 128 + signal)
        #expect(
            errorText.split(separator: "\n") == [
                "error: publishing cancelled (\(name)); uploads in flight were stopped and the post was not published"
            ])
        #expect(!printed.contains("Published in"))
        // What was running when the signal came, uploads and bytes sent.
        let tree = try #require(printed.split(separator: "Stopped while these were running:\n").last)
        #expect(tree.hasPrefix("    publish (running)\n    └─ group "))
        #expect(tree.contains(#/└─ upload (photo-\d\.jpg|video-\d\.mp4) \(running, [\d.]+ of [\d.]+ (kB|MB) sent\)/#))
        let written = folder.files()
        #expect(!written.isEmpty && written.count < 9)
        #expect(!written.contains("posts/beach-day.json"))
        #expect(written.allSatisfy { !$0.contains(".upload-") }, "no half-written file is left: \(written)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: work.url.path).isEmpty)
    }

    @Test func anOutboxRunStoppedMidwayIsResumedByTheNextWhichThenSaysItIsPublished() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let arguments = ["--outbox", folder.url.path, "--scale", "0.1"]
        let uploaded = folder.url.appendingPathComponent("uploaded")

        // Stopped once a medium is stored: the outbox keeps its record.
        let stopped = try await playground(arguments + ["--speed", "1"], fast: false, interruptedWith: SIGINT)
        #expect(stopped.status == 128 + SIGINT)
        let line = try #require(
            stopped.error.wholeMatch(
                of: #/error: stopped \(Ctrl-C\) with (\d) of 9 media stored; it stays in (.+): (.+)\n/#),
            "stderr: \(stopped.error)")
        #expect(line.output.3 == "run again with the same --outbox to resume")
        let stored = try #require(Int(line.output.1))
        #expect((1..<9).contains(stored))
        #expect(URL(fileURLWithPath: String(line.output.2)).standardizedFileURL == folder.url.standardizedFileURL)
        let storedFiles = Set(
            try FileManager.default.contentsOfDirectory(
                atPath: uploaded.appendingPathComponent("posts/beach-day").path))
        #expect(storedFiles.count >= stored)

        // The next run resumes the post and sends the rest.
        let resumed = try await playground(arguments + ["--speed", "0"], fast: false)
        #expect(resumed.status == 0, "stderr: \(resumed.error)")
        #expect(resumed.output.contains("  resuming: \(stored) of 9 media already stored\n"))
        #expect(resumed.output.contains("Published in"))
        #expect(resumed.output.contains("  this run sent \(9 - stored) of 9 media; an earlier run stored the others\n"))
        // The folder uploader's hidden temporary files aside: the stopped
        // run may have exited while an upload it had just started, and
        // cancelled, was creating one.
        let published = TemporaryFolder.files(in: uploaded).filter { !$0.contains("/.") }
        #expect(published.count == 10 && published.contains("posts/beach-day.json"))
        let dates = try modificationDates(published, in: uploaded)

        // Once published, a run says so and sends nothing.
        let again = try await playground(arguments + ["--speed", "0"], fast: false)
        #expect(again.status == 0, "stderr: \(again.error)")
        #expect(again.output.hasPrefix("Already published: \"A day at the beach: six photos and three clips.\"\n"))
        #expect(again.output.contains("nothing was sent"))
        #expect(!again.output.contains("Publishing"))
        #expect(TemporaryFolder.files(in: uploaded).filter { !$0.contains("/.") } == published)
        #expect(try modificationDates(published, in: uploaded) == dates, "no file was written again")

        // Another scale is another post: refused, rather than mixed in.
        let other = try await playground(["--outbox", folder.url.path, "--scale", "0.2", "--speed", "0"], fast: false)
        #expect(other.status == 64)
        #expect(other.error.hasSuffix("at scale 0.2: give another --outbox folder\n"), "stderr: \(other.error)")
        #expect(TemporaryFolder.files(in: uploaded).filter { !$0.contains("/.") } == published)
    }

    @Test func anOutboxRunKilledMidwayIsResumedByTheNextIntoTheFolder() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let arguments = ["--outbox", folder.url.path, "--scale", "0.1"]
        let killed = try await playground(arguments + ["--speed", "1"], fast: false, interruptedWith: SIGKILL)
        #expect(killed.status == SIGKILL && killed.error.isEmpty, "killed, with no word")

        let resumed = try await playground(arguments + ["--speed", "0"], fast: false)
        #expect(resumed.status == 0, "stderr: \(resumed.error)")
        let line = try #require(resumed.output.firstMatch(of: #/  resuming: (\d) of 9 media already stored\n/#))
        #expect((1..<9).contains(Int(line.output.1) ?? 0), "a medium was stored before the kill")
        #expect(resumed.output.contains("Published in"))
        // Each medium whole where the folder uploader put it.
        let uploaded = folder.url.appendingPathComponent("uploaded/posts/beach-day")
        let media = folder.url.appendingPathComponent("media")
        let names = try FileManager.default.contentsOfDirectory(atPath: media.path).sorted()
        #expect(names.count == 9)
        for name in names {
            let stored = try Data(contentsOf: uploaded.appendingPathComponent(name))
            #expect(stored == (try Data(contentsOf: media.appendingPathComponent(name))), "\(name) is whole")
        }
    }

    private func modificationDates(_ files: [String], in folder: URL) throws -> [Date?] {
        try files.map {
            try FileManager.default.attributesOfItem(atPath: folder.appendingPathComponent($0).path)[.modificationDate]
                as? Date
        }
    }

    @Test func verboseShowsTheTreeOfJobs() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        // At 1 MB/s, video-2 (2.6 MB) takes 2.6 s at least, so it is under
        // way when the tree is printed at 2 s.
        let run = try await playground(
            ["--output", folder.url.path, "--verbose", "--scale", "0.1", "--speed", "1"], fast: false)
        #expect(run.status == 0, "stderr: \(run.error)")
        #expect(run.output.contains("  jobs now:\n    publish"))
        #expect(run.output.contains(#/─ upload video-2\.mp4 \(running, [\d.]+ of 2\.6 MB sent\)\n/#))
        #expect(run.output.contains("Published in"))
    }

    @Test func helpListsTheOptions() async throws {
        let run = try await playground(["--help"], fast: false)
        #expect(run.status == 0)
        for option in [
            "--server", "--s3", "--concurrency", "--retries", "--timeout", "--fail-rate", "--output", "--keep",
            "--work-folder", "--outbox", "--verbose", "--help", "--mastodon", "--token", "--tus", "--background",
        ] {
            #expect(run.output.contains(option))
        }
    }

    @Test(arguments: [
        ["--bogus"], ["--concurrency", "0"], ["--fail-rate", "2"], ["--server", "ftp://x"], ["--retries"],
        ["--work-folder"], ["--timeout", "0"], ["--timeout", "soon"], ["--timeout", "1e19"], ["--s3", "s3://bucket"],
        ["--s3", "http://127.0.0.1:9/presign", "--server", "http://127.0.0.1:9"],
        ["--s3", "http://127.0.0.1:9/presign", "--output", "/tmp/x"],
        ["--outbox", "/tmp/x", "--work-folder", "/tmp/y"], ["--outbox"], ["--outbox", "/tmp/x", "--keep"],
        ["--outbox", "/tmp/x", "--verbose"], ["--mastodon", "http://127.0.0.1:9"], ["--token", "t"],
        ["--mastodon", "mastodon.social", "--token", "t"], ["--mastodon", "http://127.0.0.1:9", "--token", ""],
        ["--mastodon", "http://127.0.0.1:9", "--token", "t", "--server", "http://127.0.0.1:9"],
        ["--tus", "tus.example.com/files/"], ["--tus", "http://127.0.0.1:9/files/", "--s3", "http://127.0.0.1:9"],
        ["--speed", "-1"], ["--speed", "1e300"], ["--background"], ["--outbox", "/tmp/x", "--background"],
        ["--server", "http://127.0.0.1:9", "--background"],
    ])
    func aBadCommandLineExitsWithAUsageError(arguments: [String]) async throws {
        let run = try await playground(arguments, fast: false)
        #expect(run.status == 64)
        #expect(run.error.hasPrefix("error: "))
        #expect(run.output.isEmpty)
    }
}
