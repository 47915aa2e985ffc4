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

/// The transport seam: an `Outbox` given a transport sends every request
/// of its uploads through it, whatever the uploader (raw, forms with their
/// processing questions, S3, tus), and the uploaders' own sessions send
/// nothing. Each uploader's own session here refuses every request, so a
/// request that bypassed the seam would fail its post; the strict servers
/// record what reached them, which must be what the transport sent.
///
/// Each post goes by each of the transports a background session needs
/// (``Carrier``): every body made a whole file (``FileBodyTransport``) and
/// sent in process, and the background transport itself, on the session
/// Apple's platforms make (in process on Linux) and on the double of
/// Apple's (`TestBackgroundSystem`). So the same posts show
/// that what reaches a session is only whole files, and that the servers
/// nobody here wrote take the forms, tus chunks and S3 parts written to
/// part files, which are gone once the post is published.
@Suite("The transport seam", .startsProcesses, .timeLimit(.minutes(1)))
struct HTTPTransportTests {
    /// What carries an outbox's requests in a test.
    enum Carrier: String, CaseIterable, Sendable, CustomTestStringConvertible {
        /// Every body made a whole file, then sent in process.
        case fileBodies
        /// ``BackgroundTransport`` on ``URLSessionBackgroundSession``.
        case backgroundSession
        /// ``BackgroundTransport`` on the double of Apple's background
        /// session, `TestBackgroundSystem`, the app in the foreground.
        case testBackgroundSystem

        var testDescription: String { rawValue }
    }

    /// An outbox's transport in a test, and what it recorded.
    struct Seam {
        /// Every request as it reached the recording transport: at the seam
        /// for a background session, after the bodies were made files
        /// otherwise.
        let recording: RecordingTransport
        /// The tasks of the background session, if there is one.
        let session: RecordingBackgroundSession.Maker?
        /// What the outbox is given.
        let transport: any HTTPTransport
        /// Where part files are written.
        let parts: URL

        init(_ carrier: Carrier, in folder: TemporaryFolder) throws {
            parts = folder.url.appendingPathComponent("parts")
            switch carrier {
            case .fileBodies:
                recording = RecordingTransport()
                session = nil
                transport = FileBodyTransport(sendingThrough: recording, partsIn: parts)
            case .backgroundSession, .testBackgroundSystem:
                let session: RecordingBackgroundSession.Maker
                if carrier == .backgroundSession {
                    session = RecordingBackgroundSession.Maker()
                } else {
                    let system = TestBackgroundSystem(queue: DispatchQueue.global())
                    session = RecordingBackgroundSession.Maker { try system.session(identifier: $0, events: $1) }
                }
                recording = RecordingTransport(
                    sendingThrough: try BackgroundTransport(
                        identifier: "com.example.outbox.\(UUID().uuidString)", partsIn: parts, session: session.make))
                self.session = session
                transport = recording
            }
        }

        /// Opens an outbox in `folder` whose uploads go through this seam.
        func outbox(
            in folder: TemporaryFolder, uploader: any Uploader, publishing: PublishOptions = PublishOptions()
        ) throws -> Outbox {
            try Outbox(
                folder: folder.url.appendingPathComponent("outbox"), uploader: uploader,
                options: Outbox.Options(publishing: publishing), queue: DispatchQueue.global(), writer: .unsynced,
                transport: { transport })
        }

        /// Checks that every body sent was a whole file, that `count` of
        /// them were part files, and that none is left.
        func expectWholeFiles(partFiles count: Int, sourceLocation: SourceLocation = #_sourceLocation) {
            let partsFolder = parts.standardizedFileURL.path
            let files: [URL]
            if let session {
                #expect(
                    session.tasks.count == recording.sent.filter { $0.body != .empty }.count,
                    "a task for each request with a body, and none for the others", sourceLocation: sourceLocation)
                let taskSizes: [Int64] = session.tasks.map { $0.size ?? -1 }.sorted()
                let bodySizes: [Int64] = recording.sent.filter { $0.body != .empty }.map(\.body.count).sorted()
                #expect(taskSizes == bodySizes, "each task's file is exactly its body", sourceLocation: sourceLocation)
                files = session.tasks.map(\.file)
            } else {
                #expect(
                    recording.sent.filter { !$0.bodyIsWholeFile } == [], "every body a whole file",
                    sourceLocation: sourceLocation)
                files = recording.bodyFiles
            }
            let partFiles = files.filter { $0.deletingLastPathComponent().standardizedFileURL.path == partsFolder }
            #expect(partFiles.count == count, "part files: \(partFiles)", sourceLocation: sourceLocation)
            #expect(TemporaryFolder.files(in: parts) == [], "none left", sourceLocation: sourceLocation)
        }
    }

    /// The state of `id` once it is published or failed (at most 30 s).
    static func settled(_ outbox: Outbox, _ id: Outbox.PostID) async throws -> Outbox.Entry {
        try await withTimeLimit(.seconds(30)) {
            for await posts in outbox.changes {
                if let entry = posts.first(where: { $0.id == id }), entry.state == .published || entry.state == .failed
                {
                    return entry
                }
            }
            throw CancellationError()
        }
    }

    /// A post of a 300 kB clip written in `folder`, to `fixture`, and the
    /// tus uploader of 128 KiB chunks (its own session refusing every
    /// request) that sends it.
    static func tusPost(in folder: TemporaryFolder, to fixture: TusFixture) throws -> (TusUploader, Post) {
        let clip = folder.url.appendingPathComponent("clip.mp4")
        try writePatternedFile(clip, size: 300_000)
        let uploader = try TusUploader(
            manifestFolder: folder.url.appendingPathComponent("manifests"), chunkSize: 128 * 1024,
            configuration: .refusingEveryRequest)
        let post = Post(
            text: "tus", videos: [Video(file: clip, destination: fixture.endpoint)], destination: fixture.endpoint)
        return (uploader, post)
    }

    @Test func anUploaderWhoseOwnSessionRefusesEveryRequestFailsWithoutOne() async throws {
        let uploader = URLSessionUploader(configuration: .refusingEveryRequest)
        let photo = Photo(bytes: Data("x".utf8), destination: URL(string: "http://127.0.0.1:9/0.jpg")!)
        let error = await #expect(throws: UploadError.self) {
            try await withTimeLimit(.seconds(10)) { try await Job.uploading(photo, using: uploader).value }
        }
        guard case .network(_, let cause)? = error else {
            Issue.record("expected a network error, got \(String(describing: error))")
            return
        }
        #expect(cause.code == .notConnectedToInternet)
    }

    /// On Linux, an upload task from a file cancelled while
    /// FoundationNetworking reads the file traps (in 2 of 5 runs of this
    /// test's first dozen transfers, when the session was made so): the
    /// platform's session streams the file there instead.
    @Test func transfersOfThePlatformsSessionCancelledMidwayEndCleanly() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("clip.mp4")
        // Larger than the socket buffers of both ends hold (4 MB to send,
        // a few MB to receive on loopback here): a body that fitted whole
        // in them would reach the server whole, cancelled or not.
        try writePatternedFile(file, size: 16 * 1024 * 1024)
        let parts = folder.url.appendingPathComponent("parts")
        let transport = try BackgroundTransport(identifier: "com.example.\(UUID().uuidString)", partsIn: parts) {
            URLSessionBackgroundSession(identifier: $0, events: $1)
        }
        try await FixtureServer.with { server in
            // The body is read slowly (3.2 MB/s), and answered late: every
            // cancel lands before the answer, some before the first byte,
            // some midway.
            for index in 0..<24 {
                try await server.setRule("cancelled/\(index).mp4", ["read_delay": 0.02, "delay": 30.0])
                let url = server.url("cancelled/\(index).mp4")
                var request = URLRequest(url: url)
                request.httpMethod = "PUT"
                // A whole file, or a range of it through a part file.
                let body: HTTPBody =
                    index.isMultiple(of: 2)
                    ? .file(file, offset: 0, length: 16 * 1024 * 1024) : .file(file, offset: 1, length: 12_000_000)
                let handle = LockedValue<JobHandle?>(nil)
                let cancelsAtByte: Int64 = index < 8 ? 0 : Int64(index) * 50_000
                let sent = LockedValue<Int64>(0)
                let job = transport.send(request, body: body, destination: url) { progress in
                    sent.withValue { $0 = max($0, progress.bytesSent) }
                    if progress.bytesSent >= cancelsAtByte { handle.value?.cancel() }
                }
                let outcome = try await withTimeLimit(.seconds(20)) {
                    await withCheckedContinuation { continuation in
                        handle.setValue(job.perform(on: DispatchQueue.global()) { continuation.resume(returning: $0) })
                        if cancelsAtByte == 0 { handle.value?.cancel() }
                    }
                }
                guard case .failure(let error) = outcome else {
                    Issue.record("transfer \(index) was not cancelled: \(outcome)")
                    continue
                }
                #expect(error is CancellationError, "transfer \(index)")
                #expect(cancelsAtByte == 0 || sent.value >= cancelsAtByte, "transfer \(index) was cancelled midway")
            }
            let cut = try await server.received().filter { $0.path.hasPrefix("/cancelled/") }
            #expect(cut.allSatisfy { !$0.complete }, "no cancelled body reached the server whole")
        }
        #expect(TemporaryFolder.files(in: parts) == [], "every part file went with its transfer")
    }

    /// `getAllTasks` of the platform's session lists the tasks that have
    /// not ended, by description.
    @Test func thePlatformsSessionListsTheTasksThatHaveNotEnded() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("clip.mp4")
        try writePatternedFile(file, size: 8_000_000)
        let app = HeardEvents()
        let session = URLSessionBackgroundSession(identifier: "com.example.\(UUID().uuidString)", events: app)
        defer { session.finishTasksAndInvalidate() }
        try await FixtureServer.with { server in
            try await server.setRule("clip.mp4", ["hold_after": 65_536])
            var request = URLRequest(url: server.url("clip.mp4"))
            request.httpMethod = "PUT"
            session.upload(request, fromFile: file, description: "clip")
            try #require(try await server.waitFor(bytes: 65_536, ended: 0).ok, "the server holds the transfer")
            #expect(await session.allTasks() == ["clip"])
            #expect(try await server.release(resuming: true) == 1)
            let heard = await app.heard(within: 20) { $0.contains { $0.isCompletion } }
            #expect(heard.last == .completed("clip", status: 201, bodySize: 8_000_000))
            #expect(await session.allTasks() == [])
        }
    }

    /// Apple's session takes a task's body as its file is when the task
    /// starts; the stand-in on Linux does the same.
    @Test func aFileThatChangedOrWentBeforeItsTaskStartedFailsItsRequest() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let grown = folder.url.appendingPathComponent("grown.mp4")
        let gone = folder.url.appendingPathComponent("gone.mp4")
        for file in [grown, gone] { try writePatternedFile(file, size: 100_000) }
        let transport = try BackgroundTransport(
            identifier: "com.example.\(UUID().uuidString)", partsIn: folder.url.appendingPathComponent("parts")
        ) { identifier, events in
            HookedBackgroundSession(session: URLSessionBackgroundSession(identifier: identifier, events: events)) {
                _, file, _ in
                if file == grown {
                    let handle = try? FileHandle(forWritingTo: grown)
                    _ = try? handle?.seekToEnd()
                    try? handle?.write(contentsOf: Data(count: 10))
                    try? handle?.close()
                } else {
                    try? FileManager.default.removeItem(at: gone)
                }
            }
        }
        try await FixtureServer.with { server in
            for file in [grown, gone] {
                let url = server.url("changed/\(file.lastPathComponent)")
                var put = URLRequest(url: url)
                put.httpMethod = "PUT"
                let request = put
                let error = await #expect(throws: UploadError.self) {
                    try await withTimeLimit(.seconds(20)) {
                        try await transport.send(
                            request, body: .file(file, offset: 0, length: 100_000), destination: url
                        )
                        .value
                    }
                }
                if file == gone {
                    #expect(error == .fileNotFound(gone))
                } else {
                    #expect(
                        error
                            == .unreadableFile(
                                grown, reason: "it changed from 100000 to 100010 bytes before it was sent"))
                }
            }
            let received = try await server.received().filter { $0.path.hasPrefix("/changed/") }
            #expect(received.map(\.path) == ["/changed/grown.mp4"], "the file that went was never sent")
        }
    }

    @Test(arguments: Carrier.allCases)
    func everyRequestOfARawUploadGoesThroughTheOutboxsTransport(carrier: Carrier) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try await FixtureServer.with { server in
            let post = Post(
                text: "raw",
                photos: [
                    Photo(bytes: patternedBytes(20_000, seed: 1), destination: server.url("raw/0.jpg")),
                    Photo(bytes: patternedBytes(30_000, seed: 2), destination: server.url("raw/1.jpg")),
                ],
                destination: server.url("raw/post.json"))
            let seam = try Seam(carrier, in: folder)
            let outbox = try seam.outbox(in: folder, uploader: URLSessionUploader(configuration: .refusingEveryRequest))
            let id = try outbox.add(post)
            let settled = try await Self.settled(outbox, id)
            #expect(settled.state == .published, "\(String(describing: settled.error))")
            outbox.close()

            let received = try await server.received()
            #expect(
                seam.recording.sent.map(\.description).sorted() == received.map { "\($0.method) \($0.path)" }.sorted())
            // The photos' bytes (copied by the outbox into its folder) go as
            // they are; the document, in memory, as a part file.
            seam.expectWholeFiles(partFiles: 1)
            #expect(received.filter { $0.path.hasSuffix(".jpg") }.map(\.length).sorted() == [20_000, 30_000])
        }
    }

    @Test(arguments: Carrier.allCases)
    func formsAndTheirProcessingQuestionsGoThroughTheOutboxsTransport(carrier: Carrier) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try await MastodonFixture.with(processingPolls: 2) { fixture in
            let server = try MastodonServer(
                url: fixture.baseURL, token: MastodonFixture.token, processing: MastodonTests.quick,
                configuration: .refusingEveryRequest)
            let surf = folder.url.appendingPathComponent("surf.mp4")
            try writePatternedFile(surf, size: 100_000)
            let post = server.post(
                "Seam",
                photos: [server.photo(bytes: patternedBytes(10_000), filename: "dawn.png", contentType: "image/png")],
                videos: [server.video(file: surf)])
            let seam = try Seam(carrier, in: folder)
            let outbox = try seam.outbox(
                in: folder, uploader: server.mediaUploader, publishing: server.publishOptions())
            let id = try outbox.add(post)
            let settled = try await Self.settled(outbox, id)
            #expect(settled.state == .published, "\(String(describing: settled.error))")
            outbox.close()

            let state = try await fixture.state()
            #expect(state.statuses.count == 1 && state.media.count == 2)
            let methods = seam.recording.sent.map(\.method)
            #expect(methods.filter { $0 == "GET" }.count >= 1, "the video's processing was asked about: \(methods)")
            #expect(
                seam.recording.sent.map(\.description).sorted()
                    == state.requests.map { "\($0.method) \($0.path)" }.sorted(),
                "the server got what the transport sent, and nothing else")
            // Two forms and the status, each a part file; the questions
            // have no body.
            seam.expectWholeFiles(partFiles: 3)
        }
    }

    @Test(TusFixture.requirement, arguments: Carrier.allCases)
    func everyTusRequestGoesThroughTheOutboxsTransport(carrier: Carrier) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try await TusFixture.with(.resumableUpload) { fixture in
            let (uploader, post) = try Self.tusPost(in: folder, to: fixture)
            let seam = try Seam(carrier, in: folder)
            let outbox = try seam.outbox(in: folder, uploader: uploader)
            let id = try outbox.add(post)
            let settled = try await Self.settled(outbox, id)
            #expect(settled.state == .published, "\(String(describing: settled.error))")
            outbox.close()

            let requests = try await fixture.requests(refusedResends: true)
            #expect(seam.recording.sent.map(\.method) == requests.map(\.method))
            #expect(
                seam.recording.sent.filter { $0.method == "PATCH" }.count == 4,
                "the video's 300 kB in 128 KiB chunks, then the document: \(seam.recording.sent)")
            seam.expectWholeFiles(partFiles: 4)
        }
    }
}

extension S3Storage {
    /// The transport seam on S3: every request of a multipart upload and
    /// of the document's `PUT` goes through the outbox's transport.
    @Suite("The transport seam on S3", .startsProcesses, .timeLimit(.minutes(1)), S3Fixture.requirement)
    struct HTTPTransportS3Tests {
        typealias Storage = S3UploaderTests

        @Test(arguments: HTTPTransportTests.Carrier.allCases)
        func everyRequestOfAMultipartUploadGoesThroughTheOutboxsTransport(
            carrier: HTTPTransportTests.Carrier
        ) async throws {
            try await Storage.withStorage { s3, folder, file in
                let uploader = try S3Uploader(
                    presigner: s3.presigner, manifestFolder: folder.url.appendingPathComponent("manifests"),
                    partSize: Int64(5 * Storage.mebibyte), configuration: .refusingEveryRequest)
                let post = Post(
                    text: "s3", videos: [Storage.video(file, key: "videos/seam.mp4")],
                    destination: URL(string: "https://media.example.com/posts/seam.json")!)
                let seam = try HTTPTransportTests.Seam(carrier, in: folder)
                let outbox = try seam.outbox(in: folder, uploader: uploader)
                let id = try outbox.add(post)
                #expect(try await HTTPTransportTests.settled(outbox, id).state == .published)
                outbox.close()

                let requests = try await s3.requests()
                #expect(seam.recording.sent.map(\.method).sorted() == requests.map(\.method).sorted())
                #expect(
                    requests.map(\.operation).sorted()
                        == ["completeMultipartUpload", "createMultipartUpload", "putObject"]
                        + Array(repeating: "uploadPart", count: 3))
                // Three parts, the completion's XML and the document.
                seam.expectWholeFiles(partFiles: 5)
            }
        }
    }
}
