import Foundation
import JobKit
import JobKitTesting
import Testing
import UploadsTesting

@testable import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite("Outbox under pushback", .timeLimit(.minutes(1)))
struct OutboxPushbackTests {
    let folder: TemporaryFolder
    let queue = TestQueue()

    init() throws {
        folder = try TemporaryFolder()
    }

    func open(_ uploader: any Uploader, name: String = "outbox", _ options: Outbox.Options) throws -> Outbox {
        try Outbox(
            folder: folder.url.appendingPathComponent(name), uploader: uploader, options: options, queue: queue,
            writer: .unsynced)
    }

    /// A post of `photos` photos of 100 bytes to `host`, its document to
    /// `uploads.example.com`.
    func post(_ name: String, photos: Int, host: String = "media.example.com") -> Post {
        Post(
            text: name,
            photos: (0..<photos).map {
                Photo(
                    bytes: patternedBytes(100, seed: UInt8($0)),
                    destination: URL(string: "https://\(host)/\(name)/\($0).jpg")!)
            },
            destination: destination("\(name).json"))
    }

    /// Whether two times are the same, but for the rounding of a journal
    /// that keeps seconds as a `Double`.
    static func isAbout(_ time: Duration, _ expected: Duration) -> Bool {
        abs((time - expected) / .seconds(1)) < 1e-9
    }

    /// The hold a `Halfway` generator draws for a host that held the
    /// outbox `held` so far (no `Retry-After`, or one that did not hold).
    static func drawnHalfway(pushbackDelay: Duration, held: Duration) -> Duration {
        let ceiling = max(pushbackDelay, held * Outbox.Options.holdGrowth)
        let floor = max(ceiling * Outbox.Options.holdFloor, pushbackDelay * Outbox.Options.leastHoldShare)
        return floor + (ceiling - floor) / 2
    }

    // MARK: - Jitter where the outbox waits

    @Test func aPostWaitingForTheNetworkIsTriedAgainAtAMomentDrawnBelowTheCeiling() throws {
        defer { folder.remove() }
        let server = ScriptedServer(queue: queue, latency: .zero) { _, _ in .offline }
        let outbox = try open(
            server,
            Outbox.Options(
                publishing: PublishOptions(
                    maxConcurrentUploads: 100,
                    retry: RetryPolicy(attempts: 1, random: SeededRandomNumberGenerator(seed: 5))),
                networkRetryDelay: .seconds(30)))
        for index in 0..<100 { try outbox.add(post("p\(index)", photos: 1)) }
        try queue.run()
        #expect(server.requests.count == 100 && server.requests.allSatisfy { $0.at == .zero })
        try queue.advance(by: .seconds(30))
        var firstTries: [URL: Duration] = [:]
        for request in server.requests.dropFirst(100) where firstTries[request.destination] == nil {
            firstTries[request.destination] = request.at
        }
        let tries = Array(firstTries.values)
        #expect(tries.count == 100, "each post tried again within its first wait's ceiling")
        #expect(tries.allSatisfy { $0 > .zero && $0 <= .seconds(30) })
        let seconds = Dictionary(grouping: tries) { Int($0 / .seconds(1)) }
        #expect(seconds.count >= 25, "spread over the 30 seconds, not in step: \(seconds.keys.sorted())")
        #expect(seconds.values.allSatisfy { $0.count <= 10 })
        outbox.close()
    }

    @Test func networkDidChangeSpreadsTheTriesOfManyOutboxesOverTheWakeWindow() throws {
        defer { folder.remove() }
        for window in [Duration.seconds(10), .zero] {
            let server = ScriptedServer(queue: queue, latency: .zero) { _, _ in .offline }
            let outboxes = try (0..<50).map { index in
                try open(
                    server, name: "\(window)-\(index)",
                    Outbox.Options(
                        publishing: PublishOptions(
                            retry: RetryPolicy(attempts: 1, random: SeededRandomNumberGenerator(seed: UInt64(index)))),
                        networkRetryDelay: .seconds(3600), maxNetworkRetryDelay: .seconds(3600),
                        networkWakeWindow: window))
            }
            for (index, outbox) in outboxes.enumerated() { try outbox.add(post("p\(index)", photos: 1)) }
            try queue.run()
            #expect(outboxes.allSatisfy { $0.posts.map(\.state) == [.waitingForNetwork] })
            let told = queue.now
            server.answer { _, _ in .status(201) }
            for outbox in outboxes {
                outbox.networkDidChange()
                outbox.networkDidChange()  // a second notice changes nothing
            }
            try queue.advance(by: .seconds(11))
            let tries = server.requests.filter { $0.status == 201 && $0.destination.pathExtension == "jpg" }.map {
                $0.at - told
            }
            #expect(tries.count == 50, "one try per outbox")
            #expect(outboxes.allSatisfy { $0.posts.map(\.state) == [.published] })
            if window == .zero {
                #expect(tries.allSatisfy { $0 == .zero }, "at once")
            } else {
                #expect(tries.allSatisfy { $0 <= window })
                #expect(Set(tries.map { Int($0 / .seconds(1)) }).count == 10, "every second of the window")
            }
            for outbox in outboxes { outbox.close() }
        }
    }

    // MARK: - Back off as one client

    @Test func a503HoldsEveryUploadTowardItsHostAndHalvesTheUploadsInFlight() throws {
        defer { folder.remove() }
        let server = ScriptedServer(queue: queue) { destination, before in
            destination.lastPathComponent == "0.jpg" && destination.path.hasPrefix("/a/") && before == 0
                ? .status(503, retryAfter: 5) : .status(201)
        }
        let outbox = try open(
            server,
            Outbox.Options(
                publishing: PublishOptions(maxConcurrentUploads: 4, retry: RetryPolicy(attempts: 3, random: Halfway())),
                pushbackDelay: .seconds(10)))
        let a = try outbox.add(post("a", photos: 4))
        let b = try outbox.add(post("b", photos: 4))
        let c = try outbox.add(post("c", photos: 2, host: "cdn.example.net"))
        try queue.advance(by: .seconds(2))
        // t = 1: a/0.jpg answered 503 while a's three others were stored.
        // Its host takes nothing for the server's 5 s and half a second more
        // (its jitter, drawn at half); another host goes.
        #expect(server.times(toward: "media.example.com") == Array(repeating: .zero, count: 4))
        #expect(server.times(toward: "cdn.example.net") == [.seconds(1), .seconds(1)])
        #expect(outbox.entry(b)?.state == .queued)
        try queue.advance(by: .seconds(4.4))
        #expect(server.times(toward: "media.example.com").count == 4, "nothing until 6.5 s, retries included")
        try queue.advance(by: .seconds(0.2))
        // At 6.5 s the hold ended, and the host is probed: one request at a
        // time. a/0.jpg's retry, which waited in the outbox for the hold
        // rather than for its retry policy's own wait, goes alone.
        var media: [ScriptedServer.Request] { server.requests.filter { $0.destination.host == "media.example.com" } }
        #expect(media.dropFirst(4).map(\.at) == [.seconds(6.5)])
        #expect(media.dropFirst(4).map(\.destination.path) == ["/a/0.jpg"], "the retry")
        try queue.advance(by: .seconds(1))
        // Stored at 7.5 s: the window, halved to 2 at the 503 and not again
        // by the three photos sent before it and stored after, opens by
        // one, to 3: three of b's photos.
        #expect(media.dropFirst(5).map(\.at) == [.seconds(7.5), .seconds(7.5), .seconds(7.5)])
        try queue.advance(by: .seconds(1))
        #expect(media.dropFirst(8).map(\.at) == [.seconds(8.5)], "b's last photo")
        try queue.advance(by: .seconds(10))
        #expect([a, b, c].map { outbox.entry($0)?.state } == [.published, .published, .published])
        #expect(server.requests.filter { $0.status == 503 }.count == 1)

        // Closing while the host is held cancels the hold.
        server.answer { _, _ in .status(503, retryAfter: 5) }
        try outbox.add(post("d", photos: 1))
        try queue.advance(by: .seconds(2))
        #expect(outbox.posts.last?.state == .uploading, "its retry waits for the hold")
        outbox.close()
        try queue.run()  // the cancellations, without moving the clock
        #expect(queue.isIdle, "closing cancelled the hold and withdrew the retry waiting for it")
    }

    @Test func aHostsStreakOfPushbacksSurvivesARelaunchAndEndsAGraceAfterItsWindowIsFullAgain() throws {
        defer { folder.remove() }
        let server = ScriptedServer(queue: queue) { _, _ in .status(503) }
        let options = Outbox.Options(
            publishing: PublishOptions(maxConcurrentUploads: 1, retry: RetryPolicy(attempts: 1, random: Halfway())),
            networkRetryDelay: .seconds(3600), maxNetworkRetryDelay: .seconds(3600), pushbackDelay: .seconds(10))
        let outbox = try open(server, options)
        let id = try outbox.add(post("a", photos: 1))
        // 503 at 1 s: held for a wait drawn below 10 s; tried again, 503
        // again: held for a wait drawn below a ceiling that grew.
        let first = Self.drawnHalfway(pushbackDelay: .seconds(10), held: .zero)
        let second = Self.drawnHalfway(pushbackDelay: .seconds(10), held: first)
        try queue.advance(by: .seconds(2) + first + .seconds(0.5))
        #expect(server.requests.map(\.at) == [.zero, .seconds(1) + first])
        outbox.close()
        let file = folder.url.appendingPathComponent("outbox/hosts.json")
        let kept = try JSONDecoder().decode([String: OutboxPacer.Streak].self, from: Data(contentsOf: file))
        let streak = try #require(kept["https://media.example.com"])
        #expect(kept.count == 1 && streak.pushbacks == 2 && Self.isAbout(streak.held, first + second))

        // Killed and opened again: the post goes at once, and its host's
        // next hold goes on from the streak, not from the shortest.
        let reopened = try open(server, options)
        let relaunched = queue.now
        try queue.advance(by: .seconds(1.5))
        let third = Self.drawnHalfway(pushbackDelay: .seconds(10), held: first + second)
        #expect(third > .seconds(10) && reopened.entry(id)?.state == .waitingForNetwork)
        server.answer { _, _ in .status(201) }
        try queue.advance(by: third)
        let after = server.requests.map(\.at).dropFirst(2)
        #expect(
            after.count == 2 && zip(after, [relaunched, relaunched + .seconds(1) + third]).allSatisfy(Self.isAbout))
        // Taken half a second from now: the window of one is full again,
        // and the streak ends a grace of a quarter of the pushback delay
        // (2.5 s) after.
        try queue.advance(by: .seconds(0.5) + .seconds(2.5) - .milliseconds(100))
        #expect(reopened.entry(id)?.state == .published)
        #expect(FileManager.default.fileExists(atPath: file.path), "in the grace: the streak goes on")
        try queue.advance(by: .milliseconds(200))
        #expect(!FileManager.default.fileExists(atPath: file.path), "its window full again for the grace: it is over")
        reopened.close()
    }

    @Test func aPostWhoseRetriesAllMeet503sWaitsForItsHostNotForTheNetwork() throws {
        defer { folder.remove() }
        let server = ScriptedServer(queue: queue) { _, _ in .status(503, retryAfter: 2) }
        let outbox = try open(
            server,
            Outbox.Options(
                publishing: PublishOptions(maxConcurrentUploads: 1, retry: RetryPolicy(attempts: 2, random: Halfway())),
                networkRetryDelay: .seconds(3600), maxNetworkRetryDelay: .seconds(3600), pushbackDelay: .seconds(4)))
        let id = try outbox.add(post("a", photos: 1))
        // 503 at 1 s: held for its slot, 2 s and half a second (its jitter,
        // drawn at half); the retry waits for the hold, not for the retry
        // policy's own wait, goes at 3.5 s, and meets another 503 at 4.5 s:
        // the slot did not hold, and the second hold is drawn.
        let slot = Duration.seconds(2) + Outbox.Options.slotJitter / 2
        let second = Self.drawnHalfway(pushbackDelay: .seconds(4), held: slot)
        try queue.advance(by: .seconds(7))
        #expect(server.requests.map(\.at) == [.zero, .seconds(1) + slot])
        #expect(outbox.entry(id)?.state == .waitingForNetwork)
        #expect(outbox.entry(id)?.error.map { UploadFailure($0) } == .pushback(retryAfter: .seconds(2)))
        server.answer { _, _ in .status(201) }
        try queue.advance(by: .seconds(5))
        #expect(
            server.requests.map(\.at).dropFirst(2).first == .seconds(2) + slot + second,
            "when the host takes requests again")
        #expect(outbox.entry(id)?.state == .published)
        outbox.close()
    }

    /// The retry of a request turned away goes when the slot ends: not
    /// after the retry policy's own wait (at most 2 minutes, and up to as
    /// much again), which, drawn at half, sent it at 180 s after a slot of
    /// 150 s (the hold: 150.5 s), and at 7.5 s after one of 5 s (5.5 s).
    @Test(arguments: [5, 150])
    func aRetryGoesWhenItsSlotEndsNotAfterTheRetryPolicysOwnWait(slot: Int) throws {
        defer { folder.remove() }
        let server = ScriptedServer(queue: queue) { destination, before in
            destination.pathExtension == "jpg" && before == 0 ? .status(503, retryAfter: slot) : .status(201)
        }
        let told = LockedValue<[Duration?]>([])
        let outbox = try open(
            server,
            Outbox.Options(
                publishing: PublishOptions(
                    maxConcurrentUploads: 1, retry: RetryPolicy(attempts: 2, random: Halfway()),
                    onFailedAttempt: { _, attempt in told.withValue { $0.append(attempt.nextRetryIn) } })))
        let id = try outbox.add(post("a", photos: 1))
        // Answered at 1 s; held until the second the slot names, drawn at
        // half of it.
        let held = Duration.seconds(slot) + Outbox.Options.slotJitter / 2
        try queue.advance(by: .seconds(1) + held - .milliseconds(1))
        #expect(server.requests.count == 1, "nothing before the slot")
        try queue.advance(by: .milliseconds(1))
        #expect(server.requests.map(\.at) == [.zero, .seconds(1) + held])
        #expect(told.value == [held], "the wait told is the hold's")
        try queue.advance(by: .seconds(3))
        #expect(outbox.entry(id)?.state == .published)
        outbox.close()
    }

    @Test func threeTransientFailuresInARowHoldTheHostAndNoNetworkDoesNot() throws {
        defer { folder.remove() }
        let server = ScriptedServer(queue: queue) { destination, before in
            destination.pathExtension == "jpg" && before < 3 ? .status(500) : .status(201)
        }
        let outbox = try open(
            server,
            Outbox.Options(
                publishing: PublishOptions(
                    maxConcurrentUploads: 1,
                    retry: RetryPolicy(attempts: 4, initialDelay: .seconds(1), random: Halfway())),
                pushbackDelay: .seconds(20)))
        let id = try outbox.add(post("a", photos: 1))
        try queue.advance(by: .seconds(30))
        // 500 at 1 s, retried after 0.5 s; at 2.5 s, retried after 1 s; at
        // 4.5 s: the third in a row holds the host for a wait drawn below
        // 20 s. The document goes to a host of its own.
        let hold = Self.drawnHalfway(pushbackDelay: .seconds(20), held: .zero)
        #expect(
            server.requests.map(\.at) == [
                .zero, .seconds(1.5), .seconds(3.5), .seconds(4.5) + hold, .seconds(5.5) + hold,
            ])
        #expect(outbox.entry(id)?.state == .published)
        outbox.close()

        let offline = ScriptedServer(queue: queue) { destination, before in
            destination.pathExtension == "jpg" && before < 3 ? .offline : .status(201)
        }
        let second = try open(
            offline, name: "second",
            Outbox.Options(
                publishing: PublishOptions(
                    maxConcurrentUploads: 1,
                    retry: RetryPolicy(attempts: 4, initialDelay: .seconds(1), random: Halfway())),
                pushbackDelay: .seconds(20)))
        let start = queue.now
        try second.add(post("b", photos: 1))
        try queue.advance(by: .seconds(30))
        #expect(
            offline.requests.map { $0.at - start } == [
                .zero, .seconds(1.5), .seconds(3.5), .seconds(6.5), .seconds(7.5),
            ])
        second.close()
    }

    @Test func aHoldThatTransientFailuresStartedEndsWhenTheNetworkChanges() throws {
        defer { folder.remove() }
        let server = ScriptedServer(queue: queue) { destination, before in
            destination.pathExtension == "jpg" && before < 3 ? .status(504) : .status(201)
        }
        let outbox = try open(
            server,
            Outbox.Options(
                publishing: PublishOptions(
                    maxConcurrentUploads: 1,
                    retry: RetryPolicy(attempts: 4, initialDelay: .seconds(1), random: Halfway())),
                networkWakeWindow: .zero, pushbackDelay: .seconds(20)))
        let id = try outbox.add(post("a", photos: 1))
        try queue.advance(by: .seconds(5))
        #expect(server.requests.count == 3, "held from 4.5 s until 15.5 s, the retry waiting for it")
        outbox.networkDidChange()
        try queue.run()
        #expect(server.requests.map(\.at).last == .seconds(5), "the hold ended with the network, and the retry went")
        try queue.advance(by: .seconds(2))
        #expect(outbox.entry(id)?.state == .published)
        outbox.close()
    }

    @Test func withNoPushbackDelayAServerThatAsksForNoWaitLeavesThePostWaitingForTheNetwork() throws {
        defer { folder.remove() }
        let server = ScriptedServer(queue: queue, latency: .zero) { _, _ in .status(503) }
        let outbox = try open(
            server,
            Outbox.Options(
                publishing: PublishOptions(retry: RetryPolicy(attempts: 3, initialDelay: .zero, random: Halfway())),
                networkRetryDelay: .seconds(3600), maxNetworkRetryDelay: .seconds(3600), pushbackDelay: .zero))
        let id = try outbox.add(post("a", photos: 1))
        try queue.advance(by: .seconds(60))
        #expect(server.requests.count == 3, "the retries, then a wait for the network: no loop")
        #expect(outbox.entry(id)?.state == .waitingForNetwork)
        outbox.close()
    }

    @Test func theAnswersOfRequestsSentBeforeAPushbackHalveTheWindowNoFurther() throws {
        defer { folder.remove() }
        // No hold (no Retry-After, no pushback delay): the four photos'
        // first requests all meet a 503, and are retried at once.
        let server = ScriptedServer(queue: queue) { destination, before in
            destination.pathExtension == "jpg" && before == 0 ? .status(503) : .status(201)
        }
        let outbox = try open(
            server,
            Outbox.Options(
                publishing: PublishOptions(retry: RetryPolicy(attempts: 2, initialDelay: .zero, random: Halfway())),
                pushbackDelay: .zero))
        let id = try outbox.add(post("a", photos: 4))
        try queue.advance(by: .seconds(2.5))
        // The first 503 halved the window to 2, and the host is probed: one
        // retry goes. Stored, it opens the window to 3: the three others,
        // sent before the 503, did not halve it again.
        #expect(
            server.requests.map(\.at) == [
                .zero, .zero, .zero, .zero, .seconds(1), .seconds(2), .seconds(2), .seconds(2),
            ])
        try queue.advance(by: .seconds(5))
        #expect(outbox.entry(id)?.state == .published)
        outbox.close()
    }

    @Test func aWindowThatOpensStartsTheUploadsItHeldBackWithoutWaitingForAnUploadToEnd() throws {
        defer { folder.remove() }
        let server = ScriptedServer(queue: queue, requestsPerUpload: 3) { destination, before in
            destination.pathExtension == "jpg" && before == 0 ? .offline : .status(201)
        }
        let outbox = try open(
            server,
            Outbox.Options(
                publishing: PublishOptions(retry: RetryPolicy(attempts: 1, random: Halfway())),
                networkRetryDelay: .seconds(3600), maxNetworkRetryDelay: .seconds(3600), networkWakeWindow: .zero))
        let id = try outbox.add(post("a", photos: 2))
        try queue.advance(by: .seconds(2))
        #expect(outbox.entry(id)?.state == .waitingForNetwork)
        outbox.networkDidChange()
        try queue.advance(by: .seconds(1.5))
        // After the phone had no network, one request goes first: the first
        // part of photo 0. Once it is stored, photo 1 starts beside the
        // rest of photo 0.
        let back = server.requests.filter { $0.at > .seconds(1) }
        #expect(back.map(\.destination.lastPathComponent).sorted() == ["0.jpg", "0.jpg", "1.jpg"])
        #expect(back.map(\.at) == [.seconds(2), .seconds(3), .seconds(3)])
        try queue.advance(by: .seconds(10))
        #expect(outbox.entry(id)?.state == .published)
        outbox.close()
    }

    // MARK: - One phone stays fast

    @Test func onePhoneBackOnlineToAServerWithRoomPublishesWithinItsFirstSeconds() throws {
        defer { folder.remove() }
        for window in [Duration.zero, .seconds(10)] {
            let server = ScriptedServer(queue: queue, latency: .milliseconds(500)) { _, _ in .offline }
            let outbox = try open(
                server, name: "\(window)",
                Outbox.Options(
                    publishing: PublishOptions(
                        retry: RetryPolicy(attempts: 1, random: SeededRandomNumberGenerator(seed: 9))),
                    networkRetryDelay: .seconds(3600), maxNetworkRetryDelay: .seconds(3600), networkWakeWindow: window))
            let id = try outbox.add(post("a", photos: 4))
            try queue.advance(by: .seconds(5))
            #expect(outbox.entry(id)?.state == .waitingForNetwork)
            server.answer { _, _ in .status(201) }
            let told = queue.now
            outbox.networkDidChange()
            try queue.advance(by: window + .seconds(2))
            #expect(outbox.entry(id)?.state == .published)
            let back = server.requests.filter { $0.at >= told && $0.status == 201 }.map { $0.at - told }
            let first = try #require(back.first)
            #expect(first <= window)
            // One photo first, as a probe: stored, it opens the window again
            // to what it was before the network failed, and the other
            // three go at once. (When it opened by one a photo stored, the
            // post was published 2 s after its try; a server whose `100
            // Continue` the outbox hears lets them go a round trip after
            // the probe, as `Herd.lonePhone` measures.)
            #expect(
                back.map { $0 - first } == [.zero, .seconds(0.5), .seconds(0.5), .seconds(0.5), .seconds(1)],
                "published 1.5 s after its try, against 1 s with no probe")
            outbox.close()
        }
    }

    @Test func optionsThatCannotWorkAreRefused() throws {
        defer { folder.remove() }
        let refused = [
            Outbox.Options(networkWakeWindow: .seconds(-1)), Outbox.Options(pushbackDelay: .seconds(-1)),
            Outbox.Options(maxRetryAfter: .seconds(-1)),
        ]
        for options in refused {
            #expect(throws: InvalidOptionError.self) { try open(InMemoryUploader(), options) }
        }
    }

    /// A file that is not a streak, a streak no outbox would keep, or one
    /// kept for more than a day: the streaks start over, and no post is
    /// lost.
    @Test(arguments: [
        "not json",
        #"{"https://media.example.com": {"pushbacks": 9223372036854775807, "heldSeconds": 60}}"#,
        #"{"https://media.example.com": {"pushbacks": 3, "heldSeconds": 1e300}}"#,
        #"{"https://media.example.com": {"pushbacks": 3, "heldSeconds": 600}}"#,
    ])
    func aStreakFileThatCannotBeTakenUpStartsTheStreaksOverAndLosesNoPost(contents: String) throws {
        defer { folder.remove() }
        let outbox = folder.url.appendingPathComponent("outbox")
        try FileManager.default.createDirectory(at: outbox, withIntermediateDirectories: true)
        let file = outbox.appendingPathComponent("hosts.json")
        try Data(contents.utf8).write(to: file)
        // The one that would be taken up is two days old.
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: -2 * 24 * 3600)], ofItemAtPath: file.path)
        let leftover = outbox.appendingPathComponent(".hosts.json.\(UUID().uuidString).tmp")
        try Data("{".utf8).write(to: leftover)
        let server = ScriptedServer(queue: queue) { _, before in before == 0 ? .status(503) : .status(201) }
        let opened = try open(
            server,
            Outbox.Options(
                publishing: PublishOptions(maxConcurrentUploads: 1, retry: RetryPolicy(attempts: 1, random: Halfway())),
                pushbackDelay: .seconds(10)))
        let id = try opened.add(post("a", photos: 1))
        try queue.advance(by: .seconds(1.5))
        let kept = try JSONDecoder().decode([String: OutboxPacer.Streak].self, from: Data(contentsOf: file))
        #expect(kept["https://media.example.com"]?.pushbacks == 1, "a streak of its own")
        #expect(!FileManager.default.fileExists(atPath: leftover.path), "a kill's temporary file is removed")
        try queue.advance(by: .seconds(20))
        #expect(opened.entry(id)?.state == .published)
        opened.close()
    }
}
