import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing

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
/// The outbox's transport here is the one a background session needs:
/// every body a whole file (``FileBodyTransport``), sending through a
/// recording transport. So the same posts show that what reaches the
/// session is only whole files, and that the servers nobody here wrote
/// take the forms, tus chunks and S3 parts written to part files, which are
/// gone once the post is published.
@Suite("The transport seam", .startsProcesses, .timeLimit(.minutes(1)))
struct HTTPTransportTests {
    /// Opens an outbox in `folder` whose uploads go through `transport`,
    /// their bodies made whole files in the folder's `parts` folder.
    static func outbox(
        in folder: TemporaryFolder, uploader: any Uploader, publishing: PublishOptions = PublishOptions(),
        transport: RecordingTransport
    ) throws -> Outbox {
        try Outbox(
            folder: folder.url.appendingPathComponent("outbox"), uploader: uploader,
            options: Outbox.Options(publishing: publishing), queue: DispatchQueue.global(), writer: .unsynced,
            transport: FileBodyTransport(sendingThrough: transport, partsIn: parts(in: folder)))
    }

    /// Where ``outbox(in:uploader:publishing:transport:)`` writes part
    /// files.
    static func parts(in folder: TemporaryFolder) -> URL {
        folder.url.appendingPathComponent("parts")
    }

    /// Checks that every body `transport` was handed was a whole file,
    /// that `count` of them were part files, and that none is left.
    static func expectWholeFiles(
        _ transport: RecordingTransport, partFiles count: Int, in folder: TemporaryFolder,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(
            transport.sent.filter { !$0.bodyIsWholeFile } == [], "every body a whole file",
            sourceLocation: sourceLocation)
        let partsFolder = parts(in: folder).standardizedFileURL.path
        let partFiles = transport.bodyFiles.filter {
            $0.deletingLastPathComponent().standardizedFileURL.path == partsFolder
        }
        #expect(partFiles.count == count, "part files: \(partFiles)", sourceLocation: sourceLocation)
        #expect(TemporaryFolder.files(in: parts(in: folder)) == [], "none left", sourceLocation: sourceLocation)
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

    @Test func everyRequestOfARawUploadGoesThroughTheOutboxsTransport() async throws {
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
            let transport = RecordingTransport()
            let outbox = try Self.outbox(
                in: folder, uploader: URLSessionUploader(configuration: .refusingEveryRequest), transport: transport)
            let id = try outbox.add(post)
            #expect(try await Self.settled(outbox, id).state == .published)
            outbox.close()

            let received = try await server.received()
            #expect(transport.sent.map(\.description).sorted() == received.map { "\($0.method) \($0.path)" }.sorted())
            // The photos' bytes (copied by the outbox into its folder) go as
            // they are; the document, in memory, as a part file.
            Self.expectWholeFiles(transport, partFiles: 1, in: folder)
            #expect(received.filter { $0.path.hasSuffix(".jpg") }.map(\.length).sorted() == [20_000, 30_000])
        }
    }

    @Test func formsAndTheirProcessingQuestionsGoThroughTheOutboxsTransport() async throws {
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
            let transport = RecordingTransport()
            let outbox = try Self.outbox(
                in: folder, uploader: server.mediaUploader, publishing: server.publishOptions(), transport: transport)
            let id = try outbox.add(post)
            #expect(try await Self.settled(outbox, id).state == .published)
            outbox.close()

            let state = try await fixture.state()
            #expect(state.statuses.count == 1 && state.media.count == 2)
            let methods = transport.sent.map(\.method)
            #expect(methods.filter { $0 == "GET" }.count >= 1, "the video's processing was asked about: \(methods)")
            #expect(
                transport.sent.map(\.description).sorted() == state.requests.map { "\($0.method) \($0.path)" }.sorted(),
                "the server got what the transport sent, and nothing else")
            // Two forms and the status, each a part file; the questions
            // have no body.
            Self.expectWholeFiles(transport, partFiles: 3, in: folder)
        }
    }

    @Test(TusFixture.requirement)
    func everyTusRequestGoesThroughTheOutboxsTransport() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let clip = folder.url.appendingPathComponent("clip.mp4")
        try writePatternedFile(clip, size: 300_000)
        try await TusFixture.with(.resumableUpload) { fixture in
            let uploader = try TusUploader(
                manifestFolder: folder.url.appendingPathComponent("manifests"), chunkSize: 128 * 1024,
                configuration: .refusingEveryRequest)
            let post = Post(
                text: "tus", videos: [Video(file: clip, destination: fixture.endpoint)],
                destination: fixture.endpoint)
            let transport = RecordingTransport()
            let outbox = try Self.outbox(in: folder, uploader: uploader, transport: transport)
            let id = try outbox.add(post)
            #expect(try await Self.settled(outbox, id).state == .published)
            outbox.close()

            let requests = try await fixture.requests(refusedResends: true)
            #expect(transport.sent.map(\.method) == requests.map(\.method))
            #expect(
                transport.sent.filter { $0.method == "PATCH" }.count == 4,
                "the video's 300 kB in 128 KiB chunks, then the document: \(transport.sent)")
            Self.expectWholeFiles(transport, partFiles: 4, in: folder)
        }
    }
}

extension S3Storage {
    /// The transport seam on S3: every request of a multipart upload and
    /// of the document's `PUT` goes through the outbox's transport.
    @Suite("The transport seam on S3", .startsProcesses, .timeLimit(.minutes(1)), S3Fixture.requirement)
    struct HTTPTransportS3Tests {
        typealias Storage = S3UploaderTests

        @Test func everyRequestOfAMultipartUploadGoesThroughTheOutboxsTransport() async throws {
            try await Storage.withStorage { s3, folder, file in
                let uploader = try S3Uploader(
                    presigner: s3.presigner, manifestFolder: folder.url.appendingPathComponent("manifests"),
                    partSize: Int64(5 * Storage.mebibyte), configuration: .refusingEveryRequest)
                let post = Post(
                    text: "s3", videos: [Storage.video(file, key: "videos/seam.mp4")],
                    destination: URL(string: "https://media.example.com/posts/seam.json")!)
                let transport = RecordingTransport()
                let outbox = try HTTPTransportTests.outbox(in: folder, uploader: uploader, transport: transport)
                let id = try outbox.add(post)
                #expect(try await HTTPTransportTests.settled(outbox, id).state == .published)
                outbox.close()

                let requests = try await s3.requests()
                #expect(transport.sent.map(\.method).sorted() == requests.map(\.method).sorted())
                #expect(
                    requests.map(\.operation).sorted()
                        == ["completeMultipartUpload", "createMultipartUpload", "putObject"]
                        + Array(repeating: "uploadPart", count: 3))
                // Three parts, the completion's XML and the document.
                HTTPTransportTests.expectWholeFiles(transport, partFiles: 5, in: folder)
            }
        }
    }
}
