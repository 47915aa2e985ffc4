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

/// An outbox whose requests go by a background session, its app killed
/// mid-transfer by the system and launched again: the new outbox, on the
/// same folder and session identifier, rejoins the transfers the system
/// carried on, takes the answers of those that ended while the app was
/// gone, asks the storage before sending again what it cannot tell, and
/// sends again what a force-quit cancelled. Through the double of Apple's
/// session, to servers nobody here wrote: Node's `http`, a tus server from
/// PyPI and moto's S3.
@Suite("An outbox on a background session, its app killed", .startsProcesses, .timeLimit(.minutes(1)))
struct OutboxBackgroundTests {
    /// The session's identifier, the test's own: the handlers the app
    /// delegate forwards go to the outbox of their identifier in the
    /// process, whichever test made it.
    let identifier = "com.example.outbox.background.\(UUID().uuidString)"

    let folder: TemporaryFolder
    let system = TestBackgroundSystem(queue: TestQueue())

    init() throws {
        folder = try TemporaryFolder()
    }

    /// A launch of the app: an outbox on the folder whose requests go by a
    /// background session of the system, which takes the network away as
    /// it is given the first task `cut` names, if any.
    func launch(
        _ uploader: any Uploader, publishing: PublishOptions = PublishOptions(), cut: NetworkCut? = nil
    ) throws -> Outbox {
        let transfers = Outbox.Transfers.background(identifier: identifier) { [system] identifier, events in
            let session = try system.session(identifier: identifier, events: events)
            guard let cut else { return session }
            return HookedBackgroundSession(session: session, after: cut.after) { _, _, description in
                cut.before(description, on: system)
            }
        }
        return try Outbox(
            folder: outboxFolder, uploader: uploader, options: Outbox.Options(publishing: publishing),
            queue: DispatchQueue.global(), writer: .unsynced, transfers: transfers)
    }

    /// The outbox's folder.
    var outboxFolder: URL { folder.url.appendingPathComponent("outbox") }

    /// Where the outbox's part files are.
    var parts: URL { outboxFolder.appendingPathComponent("transfers") }

    /// The system kills the app: its session is gone, and its outbox lets
    /// the folder go for the next launch. (A killed process runs nothing
    /// more; `close()` cancels the outbox's uploads, but the system takes
    /// no cancel from a session its app lost, and the part files of the
    /// tasks it carries on stay.)
    func kill(_ outbox: Outbox) {
        system.terminate()
        outbox.close()
    }

    // MARK: - Raw uploads, to Node's `http`

    /// An 8 MB clip (more than the socket buffers hold, so that a
    /// transfer the server holds midway cannot end) and the raw uploader
    /// that sends it.
    func rawClip() throws -> (clip: URL, uploader: URLSessionUploader) {
        let clip = folder.url.appendingPathComponent("clip.mp4")
        try writePatternedFile(clip, size: 8_000_000)
        return (clip, URLSessionUploader(configuration: .refusingEveryRequest))
    }

    /// How the clip goes: as its own bytes, or in a form (its head, the
    /// file and its tail written to one part file).
    enum Body: String, CaseIterable, Sendable {
        case raw
        case form
    }

    /// The 8 MB clip, and the uploader that sends it as `body`.
    func clip(as body: Body) throws -> (clip: URL, uploader: any Uploader) {
        let (clip, raw) = try rawClip()
        switch body {
        case .raw:
            return (clip, raw)
        case .form:
            let fields = [FormField(name: "album", value: "summer")]
            return (clip, try MultipartFormUploader(fields: fields, configuration: .refusingEveryRequest))
        }
    }

    /// Checks that `received` is the whole clip, sent as `body`; Node's
    /// `Request.formData()` parsed a form.
    static func expectWholeClip(_ received: FixtureServer.Received?, _ clip: URL, as body: Body) async throws {
        let sha256 = try await sha256(of: clip)
        switch body {
        case .raw:
            #expect(received?.sha256 == sha256)
        case .form:
            let form = try #require(received?.form, "\(String(describing: received?.formError))")
            #expect(form.fields == [["album", "summer"]])
            #expect(form.files.map(\.size) == [8_000_000])
            #expect(form.files.first?.sha256 == sha256)
        }
    }

    /// Launches the app, which adds the post of `clip` and its document to
    /// `server`; returns once the server holds the clip's transfer midway.
    func launchHoldingTheClip(
        _ clip: URL, by uploader: any Uploader, on server: FixtureServer
    ) async throws -> (Outbox, Outbox.PostID) {
        try await server.setRule("clip.mp4", ["hold_after": 65_536])
        let outbox = try launch(uploader)
        let post = Post(
            text: "background", videos: [Video(file: clip, destination: server.url("clip.mp4"))],
            destination: server.url("post.json"))
        let id = try outbox.add(post)
        try #require(try await server.waitFor(bytes: 65_536, ended: 0).ok, "the server holds the transfer")
        return (outbox, id)
    }

    /// Launches the app, which adds the post of `clip`, kills it twice
    /// while the server holds the clip's transfer, whose body is in
    /// `partFiles` part files, and launches it again; checks that the post
    /// is published, each request reaching the server once, and returns
    /// what it received.
    func killTwiceMidTransfer(
        _ clip: URL, by uploader: any Uploader, partFiles: Int, on server: FixtureServer
    ) async throws -> [FixtureServer.Received] {
        var (outbox, id) = try await launchHoldingTheClip(clip, by: uploader, on: server)
        #expect(TemporaryFolder.files(in: parts).count == partFiles)
        kill(outbox)
        outbox = try launch(uploader)
        kill(outbox)
        outbox = try launch(uploader)
        #expect(try await server.release(resuming: true) == 1)
        let settled = try await HTTPTransportTests.settled(outbox, id)
        #expect(settled.state == .published, "\(String(describing: settled.error))")
        outbox.close()

        let received = try await server.received()
        #expect(received.map(\.path).sorted() == ["/clip.mp4", "/post.json"], "each sent once")
        #expect(system.tasks.map(\.sends) == [1, 1], "the clip's task, rejoined twice, and the document's")
        #expect(TemporaryFolder.files(in: parts) == [])
        return received
    }

    /// A post killed twice mid-transfer reaches the server once, as its
    /// own bytes or as a form, whose part file is removed once its task
    /// ended.
    @Test(arguments: Body.allCases)
    func aPostWhoseAppIsKilledTwiceMidTransferReachesTheServerOnce(_ body: Body) async throws {
        defer { folder.remove() }
        let (clip, uploader) = try clip(as: body)
        try await FixtureServer.with { server in
            let received = try await killTwiceMidTransfer(
                clip, by: uploader, partFiles: body == .form ? 1 : 0, on: server)
            try await Self.expectWholeClip(received.first { $0.path == "/clip.mp4" }, clip, as: body)
        }
    }

    @Test func aTransferThatEndedWhileTheAppWasGoneGivesItsReceipt() async throws {
        defer { folder.remove() }
        let (clip, uploader) = try rawClip()
        try await FixtureServer.with { server in
            var (outbox, id) = try await launchHoldingTheClip(clip, by: uploader, on: server)
            kill(outbox)
            #expect(try await server.release(resuming: true) == 1)
            #expect(try await server.waitForUpload(of: "clip.mp4").map(\.complete) == [true])
            // The user opens the app (which the system may have launched in
            // the background meanwhile, where its tasks would wait).
            system.enterForeground()
            outbox = try launch(uploader)
            let settled = try await HTTPTransportTests.settled(outbox, id)
            #expect(settled.state == .published, "\(String(describing: settled.error))")
            outbox.close()
            let received = try await server.received()
            #expect(received.map(\.path).sorted() == ["/clip.mp4", "/post.json"], "each sent once")
            #expect(system.tasks.count == 2)
        }
    }

    /// A force-quit's `-999` is a cancel to resume from: the user's next
    /// launch sends the clip again, and the post is published.
    @Test(arguments: Body.allCases)
    func aPostWhoseAppIsForceQuitIsPublishedAfterTheUsersNextLaunch(_ body: Body) async throws {
        defer { folder.remove() }
        let (clip, uploader) = try clip(as: body)
        try await FixtureServer.with { server in
            var (outbox, id) = try await launchHoldingTheClip(clip, by: uploader, on: server)
            system.forceQuit()
            outbox.close()
            // Reading again, the server finds the connection gone.
            #expect(try await server.release(resuming: true) == 1)
            #expect(try await server.waitForUpload(of: "clip.mp4").map(\.complete) == [false])
            outbox = try launch(uploader)
            let settled = try await HTTPTransportTests.settled(outbox, id)
            #expect(settled.state == .published, "\(String(describing: settled.error))")
            outbox.close()
            let clips = try await server.received().filter { $0.path == "/clip.mp4" }
            #expect(clips.map(\.complete) == [false, true])
            try await Self.expectWholeClip(clips.last, clip, as: body)
            #expect(TemporaryFolder.files(in: parts) == [])
        }
    }

    // MARK: - tus and S3

    /// The app is force-quit while a tus `PATCH` waits for the network:
    /// the user's next launch asks the server its offset and sends the
    /// rest, no byte twice.
    @Test(TusFixture.requirement)
    func aTusUploadForceQuitWhileAPatchWaitsSendsEachByteOnce() async throws {
        defer { folder.remove() }
        try await TusFixture.with(.resumableUpload) { fixture in
            let (uploader, post) = try HTTPTransportTests.tusPost(in: folder, to: fixture)
            try await publishWithTheNetworkCut(before: "medium 0: PATCH at 131072", uploader, post) { outbox in
                system.forceQuit()
                outbox.close()
                return try launch(uploader)
            }
            try await Self.expectEachByteOnce(on: fixture)
        }
    }

    /// The app is killed while a tus `PATCH` waits for the network: the
    /// next launch's `HEAD` waits for that task, which goes once the
    /// network returns, and no byte reaches the server twice.
    @Test(TusFixture.requirement)
    func aTusUploadKilledWhileAPatchWaitsSendsEachByteOnce() async throws {
        defer { folder.remove() }
        try await TusFixture.with(.resumableUpload) { fixture in
            let (uploader, post) = try HTTPTransportTests.tusPost(in: folder, to: fixture)
            try await publishWithTheNetworkCut(before: "medium 0: PATCH at 131072", uploader, post) { outbox in
                kill(outbox)
                return try launch(uploader)
            }
            try await Self.expectEachByteOnce(on: fixture)
            #expect(
                system.tasks.filter { $0.description.contains("medium 0: PATCH at 131072") }.map(\.sends) == [1],
                "the PATCH that waited was joined, not made again")
        }
    }

    /// Adds `post` to a launch of the app with `uploader` whose network
    /// goes just before the task named by `cut` is given; once it is,
    /// `meanwhile` plays out the app's life and returns the outbox the app
    /// has then, the network returns, and `returned` runs. Checks that the
    /// post is published, and that no part file is left.
    func publishWithTheNetworkCut(
        before cut: String, _ uploader: any Uploader, _ post: Post, returned: () async throws -> Void = {},
        meanwhile: (Outbox) throws -> Outbox
    ) async throws {
        let network = NetworkCut { $0.contains(cut) }
        var outbox = try launch(uploader, cut: network)
        let id = try outbox.add(post)
        #expect(await network.happened.signalled(within: 20))
        outbox = try meanwhile(outbox)
        system.networkComesBack()
        try await returned()
        let settled = try await HTTPTransportTests.settled(outbox, id)
        #expect(settled.state == .published, "\(String(describing: settled.error))")
        outbox.close()
        #expect(TemporaryFolder.files(in: parts) == [])
    }

    /// Checks that the tus server took the post's video and document each
    /// by its offsets, no byte twice.
    static func expectEachByteOnce(on fixture: TusFixture) async throws {
        let patches = try await fixture.requests().filter { $0.method == "PATCH" && $0.status == 204 }
        let offsets = Dictionary(grouping: patches, by: \.path).values.map { $0.compactMap(\.offset) }
        #expect(
            offsets.map { $0.compactMap { Int($0) } }.sorted { $0.count > $1.count } == [[0, 131_072, 262_144], [0]],
            "no byte sent twice: \(offsets)")
    }
}

extension S3Storage {
    /// An S3 multipart upload whose app is killed while a part waits for
    /// the network.
    @Suite(
        "An outbox on a background session, its app killed, on S3", .startsProcesses, .timeLimit(.minutes(1)),
        S3Fixture.requirement)
    struct OutboxBackgroundS3Tests {
        typealias Storage = S3UploaderTests

        /// The next launch asks the storage (`HeadObject`, `ListParts`)
        /// once the part that waited went, and sends only the part it
        /// lacks: each part reaches the storage once.
        /// An uploader of three parts, one at a time, and a post of the
        /// video of `file` stored at `key`.
        static func multipartPost(
            _ s3: S3Fixture, manifestsIn folder: TemporaryFolder, _ file: URL, key: String
        ) throws -> (S3Uploader, Post) {
            let uploader = try S3Uploader(
                presigner: s3.presigner, manifestFolder: folder.url.appendingPathComponent("manifests"),
                partSize: Int64(5 * Storage.mebibyte), maxConcurrentParts: 1, configuration: .refusingEveryRequest)
            let post = Post(
                text: "s3", videos: [Storage.video(file, key: key)],
                destination: URL(string: "https://media.example.com/\(key).json")!)
            return (uploader, post)
        }

        /// Checks that each part reached the storage once.
        static func expectEachPartOnce(in s3: S3Fixture) async throws {
            let parts = try await s3.requests().filter { $0.operation == "uploadPart" && $0.status == 200 }
            #expect(parts.compactMap(\.partNumber).sorted() == [1, 2, 3], "each part stored once")
        }

        /// The next launch asks the storage (`HeadObject`, `ListParts`)
        /// once the part that waited went, and sends only the part it
        /// lacks: each part reaches the storage once.
        @Test func aMultipartUploadKilledWhileAPartWaitsSendsEachPartOnce() async throws {
            try await Storage.withStorage { s3, folder, file in
                let tests = try OutboxBackgroundTests()
                defer { tests.folder.remove() }
                let (uploader, post) = try Self.multipartPost(s3, manifestsIn: folder, file, key: "videos/killed")
                try await tests.publishWithTheNetworkCut(before: "medium 0: part 2", uploader, post) { outbox in
                    tests.kill(outbox)
                    return try tests.launch(uploader)
                }
                try await Self.expectEachPartOnce(in: s3)
                #expect(
                    tests.system.tasks.filter { $0.description.contains("medium 0: part 2") }.map(\.sends) == [1],
                    "the part that waited went once, and was not made again")
            }
        }

        /// The app is force-quit while a part waits for the network: the
        /// user's next launch asks the storage and sends only the parts it
        /// lacks.
        @Test func aMultipartUploadForceQuitWhileAPartWaitsSendsEachPartOnce() async throws {
            try await Storage.withStorage { s3, folder, file in
                let tests = try OutboxBackgroundTests()
                defer { tests.folder.remove() }
                let (uploader, post) = try Self.multipartPost(s3, manifestsIn: folder, file, key: "videos/force-quit")
                try await tests.publishWithTheNetworkCut(before: "medium 0: part 2", uploader, post) { outbox in
                    tests.system.forceQuit()
                    outbox.close()
                    return try tests.launch(uploader)
                }
                try await Self.expectEachPartOnce(in: s3)
            }
        }

        /// The app is suspended while a part waits for the network: the
        /// part goes while the app is away, the system wakes it, the
        /// outbox hands the next part to the session, and only then is the
        /// handler called.
        @Test func aMultipartUploadSuspendedWhileAPartWaitsGoesOnAtTheWakeBeforeTheHandlerIsCalled() async throws {
            try await Storage.withStorage { s3, folder, file in
                let tests = try OutboxBackgroundTests()
                defer { tests.folder.remove() }
                let (uploader, post) = try Self.multipartPost(s3, manifestsIn: folder, file, key: "videos/suspended")
                try await tests.publishSuspendedWhileTheNetworkIsCut(before: "medium 0: part 2", uploader, post) {
                    $0.contains("medium 0: part 3")
                }
                try await Self.expectEachPartOnce(in: s3)
            }
        }
    }
}

/// Takes the network away just before the first task whose description
/// `cuts` names is given to the session.
final class NetworkCut: Sendable {
    let cuts: @Sendable (String) -> Bool
    /// Signalled once the network went and the task was given.
    let happened = DispatchSemaphore(value: 0)  // allowed: waited by signalled(within:), on a thread of its own
    /// The task, once given.
    private let task = LockedValue<String?>(nil)

    init(_ cuts: @escaping @Sendable (String) -> Bool) {
        self.cuts = cuts
    }

    /// Takes the network of `system` away before the task `description`,
    /// if it is the one.
    func before(_ description: String, on system: TestBackgroundSystem) {
        guard cuts(description) else { return }
        let first = task.withValue { task in
            defer { task = task ?? description }
            return task == nil
        }
        if first { system.networkGoesDown() }
    }

    /// Tells that the task `description` was given, if it is the one.
    @Sendable func after(_ description: String) {
        if task.value == description { happened.signal() }
    }
}
