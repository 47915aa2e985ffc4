import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing

@testable import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `TusUploader` against two tus servers nobody here wrote, from PyPI:
/// `resumable-upload` and `tuspyserver`, behind a counting proxy that can
/// cut, corrupt, repeat or lose a request (`Fixtures/tus_proxy.js`).
// One test at a time: each starts a Node proxy and a Python server, which
// take the two cores for half a second; many at once starved the other
// suites of CI's Thread Sanitizer pass. Two minutes: the sanitized pass
// hashes in a debug build.
@Suite("tus uploads", .startsProcesses, .serialized, .timeLimit(.minutes(2)))
struct TusUploaderTests {
    /// 8 MiB and 12,345 bytes: a file that is not a multiple of the chunk.
    static let largeSize = 8 * 1024 * 1024 + 12_345
    static let mebibyte: Int64 = 1024 * 1024

    /// A folder with a manifest folder and a file of `size` patterned bytes.
    struct Workspace {
        let folder: TemporaryFolder
        let file: URL
        var manifests: URL { folder.url.appendingPathComponent("manifests") }

        init(size: Int, name: String = "clip.mp4") throws {
            folder = try TemporaryFolder()
            file = folder.url.appendingPathComponent(name)
            try writePatternedFile(file, size: size)
        }

        /// The manifests left in ``manifests``.
        var manifestNames: [String] { TemporaryFolder.files(in: manifests) }

        /// The manifests of uploads that have not finished.
        var unfinishedManifestNames: [String] {
            manifestNames.filter { name in
                let data = try? Data(contentsOf: manifests.appendingPathComponent(name))
                let json = data.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
                return json?["finished"] as? Bool != true
            }
        }
    }

    static func uploader(
        _ workspace: Workspace, chunk: Int64 = 8 * 1024 * 1024, createsUploads: Bool = true,
        verifiesBytes: Bool = true
    ) throws -> TusUploader {
        try TusUploader(
            manifestFolder: workspace.manifests, chunkSize: chunk, headers: ["Authorization": "Bearer s3cret"],
            metadata: { _ in ["album": "Été 2026"] }, createsUploads: createsUploads, verifiesBytes: verifiesBytes)
    }

    /// Each request tried `count` times, with no wait between tries.
    static func attempts(_ count: Int = 3) -> UploadAttempts {
        UploadAttempts(retry: exactRetries(count, initial: .zero))
    }

    static func video(_ workspace: Workspace, to destination: URL) -> Video {
        Video(file: workspace.file, destination: destination)
    }

    /// The upload's outcome, its failure's error.
    static func failure(of job: Job<UploadReceipt>) async -> (any Error)? {
        do {
            _ = try await job.value
            return nil
        } catch {
            return error
        }
    }

    /// Checks that no `PATCH` went out at an offset the server did not
    /// hold: each one's offset is the one the server's last answer gave.
    static func expectEveryPatchAtTheServersOffset(_ requests: [TusFixture.Request]) {
        var known: String? = "0"
        for request in requests {
            switch request.method {
            case "PATCH":
                #expect(
                    request.offset == known, "a PATCH at \(request.offset ?? "?") where the server said \(known ?? "?")"
                )
                known = request.status == 204 ? request.answerOffset : nil
            case "HEAD" where request.status == 200:
                known = request.answerOffset
            case "POST" where request.status == 201:
                // A creation without a body need not say its offset: 0.
                known = request.answerOffset ?? (request.bodyBytes == 0 ? "0" : nil)
            default:
                break
            }
        }
    }

    /// Starts an upload of the workspace's file to `tus` in chunks of a
    /// mebibyte, without checksums, whose first `PATCH` loses its
    /// connection after 500,000 bytes, which the server keeps: it fails,
    /// and leaves its manifest to resume from. The video, and the uploader,
    /// which retries nothing.
    static func leaveUnfinished(_ workspace: Workspace, at tus: TusFixture) async throws -> (Video, TusUploader) {
        try await tus.arm("cut", "PATCH", after: 500_000)
        let video = Self.video(workspace, to: tus.endpoint)
        let uploader = try Self.uploader(workspace, chunk: Self.mebibyte, verifiesBytes: false)
        #expect(await Self.failure(of: Job.uploading(video, using: uploader)) != nil)
        #expect(workspace.manifestNames.count == 1, "kept for the next attempt")
        return (video, uploader)
    }

    // MARK: - Sending

    @Test(TusFixture.requirement, arguments: TusFixture.Server.allCases)
    func aFileThatIsNotAMultipleOfTheChunkArrivesWhole(server: TusFixture.Server) async throws {
        try await TusFixture.withKept(server) { tus in
            let workspace = try Workspace(size: Self.largeSize)
            defer { workspace.folder.remove() }
            let receipt = try await Job.uploading(
                Self.video(workspace, to: tus.endpoint), using: Self.uploader(workspace), attempts: Self.attempts()
            ).value

            let stored = try await tus.stored(receipt.finalURL)
            #expect(stored == TusFixture.Stored(size: Self.largeSize, sha256: try await sha256(of: workspace.file)))
            let requests = try await tus.requests()
            #expect(requests.map(\.method) == ["OPTIONS", "POST", "PATCH", "PATCH"])
            #expect(requests.filter { $0.method == "PATCH" }.map(\.offset) == ["0", "8388608"])
            #expect(requests.filter { $0.method == "PATCH" }.map(\.bodyBytes) == [8_388_608, 12_345])
            // resumable-upload takes SHA-1 checksums; tuspyserver none.
            let checksums = requests.compactMap(\.checksum)
            #expect(checksums.count == (server == .resumableUpload ? 2 : 0))
            #expect(checksums.allSatisfy { $0.hasPrefix("sha1 ") })
            #expect(receipt.finalURL.path.hasPrefix("/files/"))
            #expect(receipt.filename == "clip.mp4")
            #expect(requests.allSatisfy { $0.authorization == "Bearer s3cret" }, "the uploader's headers on each")
            // The medium's name and type, then the app's entries, in base64.
            let base64 = { (text: String) in Data(text.utf8).base64EncodedString() }
            #expect(
                requests[1].metadata
                    == "filename \(base64("clip.mp4")),filetype \(base64("video/mp4")),album \(base64("Été 2026"))")
            #expect(
                workspace.unfinishedManifestNames.isEmpty, "the manifest is marked finished once the upload is whole")
        }
    }

    @Test(TusFixture.requirement, arguments: TusFixture.Server.allCases)
    func aSmallFileGoesUpInTheRequestThatCreatesIt(server: TusFixture.Server) async throws {
        try await TusFixture.withKept(server) { tus in
            let workspace = try Workspace(size: 300_000, name: "photo.jpg")
            defer { workspace.folder.remove() }
            let photo = Photo(file: workspace.file, destination: tus.endpoint)
            let receipt = try await Job.uploading(photo, using: Self.uploader(workspace), attempts: Self.attempts())
                .value

            #expect(try await tus.methods() == ["OPTIONS", "POST"])
            #expect(try await tus.requests().last?.bodyBytes == 300_000)
            let stored = try await tus.stored(receipt.finalURL)
            #expect(stored == TusFixture.Stored(size: 300_000, sha256: try await sha256(of: workspace.file)))
        }
    }

    @Test(TusFixture.requirement)
    func aChunkSizeOfZeroSendsTheRestOfTheFileInOnePatch() async throws {
        try await TusFixture.withKept(.resumableUpload) { tus in
            let workspace = try Workspace(size: 3_000_000)
            defer { workspace.folder.remove() }
            let receipt = try await Job.uploading(
                Self.video(workspace, to: tus.endpoint), using: Self.uploader(workspace, chunk: 0),
                attempts: Self.attempts()
            ).value

            let requests = try await tus.requests()
            #expect(requests.map(\.method) == ["OPTIONS", "POST", "PATCH"])
            #expect(requests.last?.bodyBytes == 3_000_000)
            let stored = try await tus.stored(receipt.finalURL)
            #expect(stored == TusFixture.Stored(size: 3_000_000, sha256: try await sha256(of: workspace.file)))
        }
    }

    @Test(TusFixture.requirement)
    func bytesInMemoryAreSentInChunksToo() async throws {
        try await TusFixture.withKept(.resumableUpload) { tus in
            let workspace = try Workspace(size: 0)
            defer { workspace.folder.remove() }
            let bytes = patternedBytes(2_500_000, seed: 3)
            let media = Media(bytes: bytes, destination: tus.endpoint, contentType: "application/octet-stream")
            let receipt = try await Self.uploader(workspace, chunk: Self.mebibyte).upload(
                media, attempts: Self.attempts()
            )
            .value

            #expect(try await tus.methods() == ["OPTIONS", "POST", "PATCH", "PATCH", "PATCH"])
            let file = try workspace.folder.file("expected", bytes: bytes)
            let stored = try await tus.stored(receipt.finalURL)
            #expect(stored == TusFixture.Stored(size: bytes.count, sha256: try await sha256(of: file)))
            #expect(workspace.manifestNames.isEmpty, "bytes in memory keep no manifest")
        }
    }

    // MARK: - Faults on the way

    @Test(TusFixture.requirement, arguments: TusFixture.Server.allCases)
    func aPatchCutMidBodyGoesOnFromTheServersOffset(server: TusFixture.Server) async throws {
        try await TusFixture.withKept(server) { tus in
            let workspace = try Workspace(size: Self.largeSize)
            defer { workspace.folder.remove() }
            try await tus.arm("cut", "PATCH", after: 3_000_000)
            // Without a checksum, which makes resumable-upload discard the
            // bytes of a PATCH cut short: the server keeps what reached it.
            let receipt = try await Job.uploading(
                Self.video(workspace, to: tus.endpoint), using: Self.uploader(workspace, verifiesBytes: false),
                attempts: Self.attempts()
            ).value

            // After the cut, the server is asked before any byte goes again,
            // and each PATCH starts where it said. (resumable-upload keeps
            // what reached it, but a HEAD right after the cut may still see
            // its earlier offset: a PATCH from there is then refused 409,
            // and the next HEAD sees the bytes kept.)
            let requests = try await tus.requests()
            #expect(requests.map(\.method).prefix(5) == ["OPTIONS", "POST", "PATCH", "HEAD", "PATCH"])
            #expect(requests.last?.status == 204)
            let kept = try #require(requests.last { $0.method == "HEAD" }?.answerOffset.flatMap { Int($0) })
            #expect(kept == 3_000_000, "the server kept what reached it")
            #expect(requests.last?.bodyBytes == Self.largeSize - kept, "the rest, a chunk from there")
            Self.expectEveryPatchAtTheServersOffset(requests)
            let stored = try await tus.stored(receipt.finalURL)
            #expect(stored == TusFixture.Stored(size: Self.largeSize, sha256: try await sha256(of: workspace.file)))
        }
    }

    @Test(TusFixture.requirement)
    func aChunkWhoseChecksumIsRefusedOnceIsSentAgain() async throws {
        try await TusFixture.withKept(.resumableUpload) { tus in
            let workspace = try Workspace(size: 3_000_000)
            defer { workspace.folder.remove() }
            try await tus.arm("corrupt", "PATCH", nth: 2)
            let receipt = try await Job.uploading(
                Self.video(workspace, to: tus.endpoint), using: Self.uploader(workspace, chunk: Self.mebibyte),
                attempts: Self.attempts()
            ).value

            let patches = try await tus.requests().filter { $0.method == "PATCH" }
            #expect(patches.map(\.status) == [204, 460, 204, 204])
            #expect(patches.map(\.offset) == ["0", "1048576", "1048576", "2097152"])
            Self.expectEveryPatchAtTheServersOffset(try await tus.requests())
            let stored = try await tus.stored(receipt.finalURL)
            #expect(stored == TusFixture.Stored(size: 3_000_000, sha256: try await sha256(of: workspace.file)))
        }
    }

    @Test(TusFixture.requirement)
    func aChecksumRefusedTwiceFailsAndTerminatesTheUpload() async throws {
        try await TusFixture.withKept(.resumableUpload) { tus in
            let workspace = try Workspace(size: 3_000_000)
            defer { workspace.folder.remove() }
            try await tus.arm("corrupt", "PATCH", nth: 2)
            try await tus.arm("corrupt", "PATCH", nth: 3)
            let error = await Self.failure(
                of: Job.uploading(
                    Self.video(workspace, to: tus.endpoint), using: try Self.uploader(workspace, chunk: Self.mebibyte),
                    attempts: Self.attempts()))

            guard case .httpStatus(let receipt) = error as? UploadError else {
                Issue.record("expected a refusal, got \(String(describing: error))")
                return
            }
            #expect(receipt.status == 460)
            #expect(receipt.filename == "clip.mp4")
            let requests = try await tus.requests()
            #expect(requests.map(\.method) == ["OPTIONS", "POST", "PATCH", "PATCH", "HEAD", "PATCH", "DELETE"])
            let uploadURL = URL(string: requests[2].path, relativeTo: tus.baseURL)!
            #expect(try await tus.send("HEAD", to: uploadURL) == 404, "the upload is terminated")
            #expect(workspace.manifestNames.isEmpty)
        }
    }

    @Test(TusFixture.requirement, arguments: TusFixture.Server.allCases)
    func aConflictAsksTheServersOffsetAndGoesOnFromIt(server: TusFixture.Server) async throws {
        try await TusFixture.withKept(server) { tus in
            let workspace = try Workspace(size: 3_000_000)
            defer { workspace.folder.remove() }
            // The network sends the first PATCH twice: the server takes the
            // first and answers the second 409.
            try await tus.arm("duplicate", "PATCH")
            let receipt = try await Job.uploading(
                Self.video(workspace, to: tus.endpoint), using: Self.uploader(workspace, chunk: Self.mebibyte),
                attempts: Self.attempts()
            ).value

            let requests = try await tus.requests()
            #expect(requests.map(\.method) == ["OPTIONS", "POST", "PATCH", "HEAD", "PATCH", "PATCH"])
            #expect(requests[2].status == 409)
            #expect(requests[3].answerOffset == "1048576")
            #expect(requests.filter { $0.method == "PATCH" }.map(\.offset) == ["0", "1048576", "2097152"])
            let stored = try await tus.stored(receipt.finalURL)
            #expect(stored == TusFixture.Stored(size: 3_000_000, sha256: try await sha256(of: workspace.file)))
        }
    }

    // MARK: - Resuming

    @Test(TusFixture.requirement)
    func anUploadLeftByAnotherUploaderResumesFromItsManifest() async throws {
        try await TusFixture.withKept(.resumableUpload) { tus in
            let workspace = try Workspace(size: Self.largeSize)
            defer { workspace.folder.remove() }
            try await tus.arm("cut", "PATCH", after: 5_000_000)
            let video = Self.video(workspace, to: tus.endpoint)
            let error = await Self.failure(
                of: Job.uploading(video, using: try Self.uploader(workspace, verifiesBytes: false)))
            #expect((error as? UploadError)?.isTransient == true, "a lost connection: \(String(describing: error))")
            #expect(workspace.manifestNames.count == 1, "kept for the next attempt")

            // As the app would after a relaunch: a new uploader, the same
            // folder.
            let receipt = try await Job.uploading(
                video, using: Self.uploader(workspace, verifiesBytes: false), attempts: Self.attempts()
            ).value
            // As after any cut, the server's first HEAD may not see the bytes
            // it kept yet (see aPatchCutMidBodyGoesOnFromTheServersOffset).
            let requests = try await tus.requests()
            #expect(requests.map(\.method).prefix(6) == ["OPTIONS", "POST", "PATCH", "OPTIONS", "HEAD", "PATCH"])
            #expect(requests.last { $0.method == "HEAD" }?.answerOffset == "5000000", "the server kept what reached it")
            #expect(requests.last?.bodyBytes == Self.largeSize - 5_000_000, "only the rest is sent at last")
            Self.expectEveryPatchAtTheServersOffset(Array(requests[3...]))
            let stored = try await tus.stored(receipt.finalURL)
            #expect(stored == TusFixture.Stored(size: Self.largeSize, sha256: try await sha256(of: workspace.file)))
            #expect(workspace.unfinishedManifestNames.isEmpty)
        }
    }

    @Test(TusFixture.requirement)
    func anUploadTheServerHoldsWholeIsNotSentAgain() async throws {
        try await TusFixture.withKept(.resumableUpload) { tus in
            let workspace = try Workspace(size: 3_000_000)
            defer { workspace.folder.remove() }
            // The answer to the last PATCH is lost: the server holds it all,
            // and the upload does not know.
            try await tus.arm("lose", "PATCH", nth: 3)
            let video = Self.video(workspace, to: tus.endpoint)
            let uploader = try Self.uploader(workspace, chunk: Self.mebibyte)
            #expect(await Self.failure(of: Job.uploading(video, using: uploader)) != nil)

            let receipt = try await Job.uploading(video, using: uploader).value
            #expect(try await tus.methods() == ["OPTIONS", "POST", "PATCH", "PATCH", "PATCH", "HEAD"])
            #expect(receipt.status == 200, "the receipt is the answer to HEAD")
            let stored = try await tus.stored(receipt.finalURL)
            #expect(stored == TusFixture.Stored(size: 3_000_000, sha256: try await sha256(of: workspace.file)))
        }
    }

    @Test(TusFixture.requirement)
    func aFinishedUploadIsFoundWhenAskedFirstAndIsANewUploadOtherwise() async throws {
        try await TusFixture.withKept(.resumableUpload) { tus in
            let workspace = try Workspace(size: 3_000_000)
            defer { workspace.folder.remove() }
            let video = Self.video(workspace, to: tus.endpoint)
            let first = try await Job.uploading(video, using: Self.uploader(workspace), attempts: Self.attempts()).value
            #expect(workspace.unfinishedManifestNames.isEmpty)
            #expect(workspace.manifestNames.count == 1, "kept, marked finished")

            // As an outbox resuming a post after a kill that came before it
            // recorded the receipt: a new uploader, asked to check first.
            var attempts = UploadAttempts(retry: exactRetries(3, initial: .zero))
            attempts.checksStorageFirst = true
            let found = try await Job.uploading(video, using: Self.uploader(workspace), attempts: attempts).value
            #expect(try await tus.methods() == ["OPTIONS", "POST", "PATCH", "OPTIONS", "HEAD"], "nothing sent again")
            #expect(found.finalURL == first.finalURL)

            // Not asked to check: the same file again is another upload.
            let another = try await Job.uploading(video, using: Self.uploader(workspace), attempts: Self.attempts())
                .value
            #expect(another.finalURL != first.finalURL)
            #expect(try await tus.methods().suffix(3) == ["OPTIONS", "POST", "PATCH"])

            // Asked to check, for a file changed since: another upload, and
            // the finished one stays on the server.
            try writePatternedFile(workspace.file, size: 3_000_001)
            let changed = try await Job.uploading(video, using: Self.uploader(workspace), attempts: attempts).value
            #expect(changed.finalURL != another.finalURL)
            #expect(try await tus.methods().suffix(3) == ["OPTIONS", "POST", "PATCH"], "no HEAD, no DELETE")
            #expect(try await tus.stored(another.finalURL)?.size == 3_000_000)
        }
    }

    @Test(TusFixture.requirement)
    func anUploadTheServerDiscardedIsStartedAgain() async throws {
        try await TusFixture.withKept(.resumableUpload) { tus in
            let workspace = try Workspace(size: 3_000_000)
            defer { workspace.folder.remove() }
            let (video, uploader) = try await Self.leaveUnfinished(workspace, at: tus)
            // The server discards it meanwhile, as it does an expired upload.
            let first = try #require(try await tus.requests().first { $0.method == "PATCH" })
            #expect(try await tus.send("DELETE", to: URL(string: first.path, relativeTo: tus.baseURL)!) == 204)

            let receipt = try await Job.uploading(video, using: uploader).value
            #expect(
                try await tus.methods() == [
                    "OPTIONS", "POST", "PATCH", "DELETE", "HEAD", "POST", "PATCH", "PATCH", "PATCH",
                ])
            #expect(receipt.finalURL.path != first.path, "a new upload")
            let stored = try await tus.stored(receipt.finalURL)
            #expect(stored == TusFixture.Stored(size: 3_000_000, sha256: try await sha256(of: workspace.file)))
        }
    }

    @Test(TusFixture.requirement)
    func anUploadPastItsExpiryIsStartedAgainWithoutAsking() async throws {
        try await TusFixture.withKept(.resumableUpload) { tus in
            let workspace = try Workspace(size: 3_000_000)
            defer { workspace.folder.remove() }
            let (video, uploader) = try await Self.leaveUnfinished(workspace, at: tus)
            // The server said it would discard it at a time now past.
            let manifest = workspace.manifests.appendingPathComponent(try #require(workspace.manifestNames.first))
            var json = try #require(
                try JSONSerialization.jsonObject(with: Data(contentsOf: manifest)) as? [String: Any])
            json["expires"] = Date().timeIntervalSince1970 - 60
            try JSONSerialization.data(withJSONObject: json).write(to: manifest)

            _ = try await Job.uploading(video, using: uploader).value
            #expect(
                try await tus.methods() == ["OPTIONS", "POST", "PATCH", "POST", "PATCH", "PATCH", "PATCH"],
                "no HEAD of an upload past its expiry")
        }
    }

    // MARK: - Cancelling

    @Test(TusFixture.requirement)
    func aCancelTerminatesTheUpload() async throws {
        try await TusFixture.withKept(.resumableUpload) { tus in
            let workspace = try Workspace(size: 3_000_000)
            defer { workspace.folder.remove() }
            let handle = LockedValue<JobHandle?>(nil)
            let outcome = LockedValue<Job<UploadReceipt>.Outcome?>(nil)
            let job = Job.uploading(
                Self.video(workspace, to: tus.endpoint), using: try Self.uploader(workspace), attempts: Self.attempts()
            ) {
                // Cancel once bytes of the first PATCH are on their way.
                if $0.bytesSent > 0 { handle.value?.cancel() }
            }
            handle.withValue { $0 = job.perform { result in outcome.withValue { $0 = result } } }

            #expect(try await tus.waitFor("DELETE"), "the upload is terminated")
            let post = try #require(try await tus.requests().first { $0.method == "POST" })
            let uploadURL = try #require(
                try await tus.requests().first { $0.method == "DELETE" }.map {
                    URL(string: $0.path, relativeTo: tus.baseURL)!
                })
            #expect(post.status == 201)
            #expect(try await tus.send("HEAD", to: uploadURL) == 404)
            #expect(workspace.manifestNames.isEmpty)
        }
    }

    @Test(TusFixture.requirement)
    func aCancelThatKeepsWhatIsStoredLeavesTheUploadToResume() async throws {
        try await TusFixture.withKept(.resumableUpload) { tus in
            let workspace = try Workspace(size: 3_000_000)
            defer { workspace.folder.remove() }
            let uploader = try Self.uploader(workspace, chunk: Self.mebibyte)
            var attempts = Self.attempts()
            attempts.keepsStoredPartsWhenCancelled = true
            let video = Self.video(workspace, to: tus.endpoint)
            let handle = LockedValue<JobHandle?>(nil)
            let job = uploader.upload(video.media, attempts: attempts) {
                // Cancel once the first chunk is stored, during the second.
                if $0.bytesSent > Self.mebibyte { handle.value?.cancel() }
            }
            let cancelled = await withCheckedContinuation { continuation in
                handle.withValue { $0 = job.perform { continuation.resume(returning: $0) } }
            }
            #expect(throws: CancellationError.self) { try cancelled.get() }
            #expect(workspace.manifestNames.count == 1, "kept to resume")

            _ = try await uploader.upload(video.media, attempts: Self.attempts()).value
            let methods = try await tus.methods()
            #expect(!methods.contains("DELETE"))
            #expect(methods.filter { $0 == "POST" }.count == 1, "resumed, not created again: \(methods)")
            #expect(workspace.unfinishedManifestNames.isEmpty)
        }
    }

    @Test(TusFixture.requirement)
    func discardingAResumableUploadTerminatesIt() async throws {
        try await TusFixture.withKept(.resumableUpload) { tus in
            let workspace = try Workspace(size: 3_000_000)
            defer { workspace.folder.remove() }
            let (video, uploader) = try await Self.leaveUnfinished(workspace, at: tus)
            #expect(workspace.manifestNames.count == 1)

            try await uploader.discardResumableUpload(of: video.media).value
            let requests = try await tus.requests()
            #expect(requests.map(\.method).last == "DELETE")
            #expect(requests.last?.status == 204)
            #expect(workspace.manifestNames.isEmpty)
        }
    }

    // MARK: - Upload URLs handed out in advance

    @Test(TusFixture.requirement)
    func anUploadURLHandedOutInAdvanceIsSentToWithoutACreation() async throws {
        try await TusFixture.withKept(.resumableUpload) { tus in
            let workspace = try Workspace(size: 2_000_000)
            defer { workspace.folder.remove() }
            // The app's backend made it, as Vimeo's API does.
            let uploadURL = try await tus.createUpload(length: 2_000_000)
            let uploader = try Self.uploader(workspace, createsUploads: false)
            let receipt = try await Job.uploading(
                Self.video(workspace, to: uploadURL), using: uploader, attempts: Self.attempts()
            ).value

            #expect(try await tus.methods() == ["POST", "OPTIONS", "HEAD", "PATCH"])
            #expect(receipt.finalURL == uploadURL)
            let stored = try await tus.stored(uploadURL)
            #expect(stored == TusFixture.Stored(size: 2_000_000, sha256: try await sha256(of: workspace.file)))
            #expect(workspace.manifestNames.isEmpty, "nothing to remember: the URL is the destination")
        }
    }

    // MARK: - Bad input

    @Test(TusFixture.requirement)
    func aFileLargerThanTheServerTakesFailsAtOnceSayingSo() async throws {
        try await TusFixture.with(.resumableUpload, maxSize: 1_000_000) { tus in
            let workspace = try Workspace(size: 3_000_000)
            defer { workspace.folder.remove() }
            let error = await Self.failure(
                of: Job.uploading(
                    Self.video(workspace, to: tus.endpoint), using: try Self.uploader(workspace),
                    attempts: Self.attempts()))

            guard case .httpStatus(let receipt) = error as? UploadError else {
                Issue.record("expected a refusal, got \(String(describing: error))")
                return
            }
            #expect(receipt.status == 413)
            #expect((error as? UploadError)?.isTransient == false)
            #expect(error?.localizedDescription.contains("clip.mp4") == true, "\(error?.localizedDescription ?? "")")
            #expect(try await tus.methods() == ["OPTIONS", "POST"], "no byte of it sent")
        }
    }

    /// Node's server answers OPTIONS 405, then takes the POST (201), or
    /// refuses it (404 or 501), without a tus header.
    @Test(arguments: [nil, 404, 501])
    func aServerThatDoesNotSpeakTusIsSaidToBeOne(refusal: Int?) async throws {
        try await FixtureServer.with { server in
            let workspace = try Workspace(size: 1_000)
            defer { workspace.folder.remove() }
            if let refusal {
                try await server.setRule("files", ["status": refusal])
            }
            let error = await Self.failure(
                of: Job.uploading(
                    Self.video(workspace, to: server.url("files")), using: try Self.uploader(workspace),
                    attempts: Self.attempts()))

            guard case .invalidDestination(_, let reason) = error as? UploadError else {
                Issue.record("expected an invalid destination, got \(String(describing: error))")
                return
            }
            #expect(reason.hasPrefix("it does not speak tus: "), "\(reason)")
            #expect(reason.contains(refusal.map { "POST with \($0)" } ?? "POST (201)"), "\(reason)")
            #expect(try await server.received().filter { $0.method == "POST" }.count == 1, "no retry")
        }
    }

    @Test(TusFixture.requirement)
    func eachRequestTellsAnOutboxTheBytesItsBodySends() async throws {
        // What an outbox that probes a host compares: the smallest goes
        // first, a creation before a PATCH.
        try await TusFixture.withKept(.resumableUpload) { tus in
            let workspace = try Workspace(size: 2 * Int(Self.mebibyte) + 100)
            defer { workspace.folder.remove() }
            let gate = RecordingGate()
            var attempts = Self.attempts()
            attempts.gate = gate
            let uploader = try Self.uploader(workspace, chunk: Self.mebibyte, verifiesBytes: false)
            _ = try await uploader.upload(Self.video(workspace, to: tus.endpoint).media, attempts: attempts).value
            let requests = try await tus.requests()
            #expect(requests.map(\.method) == ["OPTIONS", "POST", "PATCH", "PATCH", "PATCH"])
            #expect(gate.bytes == requests.map { Int64($0.bodyBytes) })
            #expect(gate.bytes == [0, 0, Self.mebibyte, Self.mebibyte, 100])
        }
    }

    /// Asked first, as an outbox's requests are after a pushback, each
    /// request with a body says `Expect: 100-continue`, and both servers
    /// (through the proxy, Node's `http`, which answers `100 Continue`)
    /// store the file whole.
    @Test(TusFixture.requirement, arguments: TusFixture.Server.allCases)
    func requestsThatAskFirstStoreTheFileWhole(server: TusFixture.Server) async throws {
        try await TusFixture.withKept(server) { tus in
            let size = 2 * Int(Self.mebibyte) + 100
            let workspace = try Workspace(size: size)
            defer { workspace.folder.remove() }
            var attempts = Self.attempts()
            attempts.gate = RecordingGate(asksFirst: true)
            let uploader = try Self.uploader(workspace, chunk: Self.mebibyte, verifiesBytes: false)
            let receipt = try await uploader.upload(Self.video(workspace, to: tus.endpoint).media, attempts: attempts)
                .value
            let requests = try await tus.requests()
            #expect(requests.map(\.method) == ["OPTIONS", "POST", "PATCH", "PATCH", "PATCH"])
            #expect(requests.map(\.expect) == [nil, nil, "100-continue", "100-continue", "100-continue"])
            let stored = try await tus.stored(receipt.finalURL)
            #expect(stored == TusFixture.Stored(size: size, sha256: try await sha256(of: workspace.file)))
        }
    }

    @Test func aMissingFileFailsBeforeAnyRequest() async throws {
        let workspace = try Workspace(size: 0)
        defer { workspace.folder.remove() }
        let missing = workspace.folder.url.appendingPathComponent("gone.mp4")
        // Nothing listens there: a request would fail otherwise.
        let video = Video(file: missing, destination: URL(string: "http://127.0.0.1:9/files/")!)
        let error = await Self.failure(
            of: Job.uploading(video, using: try Self.uploader(workspace), attempts: Self.attempts()))
        #expect(error as? UploadError == .fileNotFound(missing))
    }
}
