import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing
import Uploads

extension S3Storage {
    /// Bytes checked on the way to moto's S3 server: every request with a
    /// body carries its MD5 as `Content-MD5`, which the project's backend
    /// checks as S3 does (moto does not).
    @Suite(
        "Verified bytes on S3", .startsProcesses, .timeLimit(.minutes(2)), S3Fixture.requirement,
        .serialized)
    struct S3IntegrityTests {
        static let videoKey = "videos/surf.mp4"

        /// Uploads `media` with an uploader of 5 MiB parts, sent one at a
        /// time, each request tried up to three times.
        static func upload(
            _ media: Media, _ s3: S3Fixture, folder: TemporaryFolder,
            progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }
        ) async throws -> UploadReceipt {
            let uploader = try S3UploaderTests.uploader(s3, folder: folder, concurrentParts: 1)
            return try await withTimeLimit(.seconds(60)) {
                try await uploader.upload(media, attempts: S3UploaderTests.attempts(), progress: progress)
                    .value
            }
        }

        @Test func everyRequestWithABodyCarriesTheMD5OfItsBody() async throws {
            try await S3UploaderTests.withStorage { s3, folder, file in
                _ = try await Self.upload(S3UploaderTests.video(file, key: Self.videoKey).media, s3, folder: folder)
                let photo = Photo(
                    bytes: Data("a small photo".utf8), destination: URL(string: "https://media.example.com/p.jpg")!)
                _ = try await Self.upload(photo.media, s3, folder: folder)

                let requests = try await s3.requests()
                #expect(
                    requests.map(\.operation) == [
                        "createMultipartUpload", "uploadPart", "uploadPart", "uploadPart", "completeMultipartUpload",
                        "putObject",
                    ])
                for request in requests {
                    if request.bytes > 0 {
                        #expect(request.contentMD5 != nil, "\(request.operation) carries Content-MD5")
                        #expect(request.contentMD5 == request.bodyMD5, "\(request.operation): the MD5 of its body")
                    } else {
                        #expect(request.contentMD5 == nil, "\(request.operation) has no body to check")
                    }
                    #expect(request.status == 200)
                }
            }
        }

        /// How the storage refuses part 2 for its digest.
        enum Refusal: String, CaseIterable, Sendable {
            /// A byte changed on the way: the backend's Content-MD5 check
            /// refuses it.
            case badDigest
            /// The storage calls the digest malformed.
            case invalidDigest

            var rule: [String: any Sendable] {
                var rule: [String: any Sendable] = [
                    "operation": "uploadPart", "key": videoKey, "partNumber": 2, "times": 1,
                ]
                switch self {
                case .badDigest: rule["corrupt"] = true
                case .invalidDigest: rule.merge(["status": 400, "code": "InvalidDigest"]) { $1 }
                }
                return rule
            }

            /// The error's text after "the server answered 400 Bad Request".
            var said: String {
                switch self {
                case .badDigest: " (BadDigest: The Content-MD5 you specified did not match what we received.)"
                case .invalidDigest: " (InvalidDigest: injected by the test (InvalidDigest))"
                }
            }
        }

        @Test(arguments: Refusal.allCases)
        func aPartRefusedForItsDigestIsNotRetriedAndTheUploadAborted(refusal: Refusal) async throws {
            try await S3UploaderTests.withStorage { s3, folder, file in
                // Once: a retry would pass, but a body the storage refused
                // for its digest is not sent again.
                try await s3.setRules([refusal.rule])
                let error = await #expect(throws: UploadError.self) {
                    try await Self.upload(S3UploaderTests.video(file, key: Self.videoKey).media, s3, folder: folder)
                }

                guard case .httpStatus(let receipt) = error else {
                    Issue.record("expected the storage's 400, got \(String(describing: error))")
                    return
                }
                #expect(receipt.status == 400)
                #expect(error?.isTransient == false)
                #expect(
                    error?.localizedDescription == "videos/surf.mp4: the server answered 400 Bad Request" + refusal.said
                )
                let requests = try await s3.requests()
                #expect(requests.filter { $0.operation == "uploadPart" }.map(\.partNumber) == [1, 2], "not retried")
                #expect(requests.last?.operation == "abortMultipartUpload")
                #expect(!requests.contains { $0.operation == "completeMultipartUpload" })
                #expect(try await s3.uploads().isEmpty)
                #expect(S3UploaderTests.manifests(folder).isEmpty)
            }
        }

        @Test func aSmallFileChangedOnTheWayIsRefused() async throws {
            try await S3UploaderTests.withStorage(size: 100_000) { s3, folder, file in
                try await s3.setRules([["operation": "putObject", "corrupt": true, "times": 1]])
                let error = await #expect(throws: UploadError.self) {
                    try await Self.upload(S3UploaderTests.video(file, key: Self.videoKey).media, s3, folder: folder)
                }

                #expect(error?.localizedDescription.contains("BadDigest") == true, "\(String(describing: error))")
                #expect(try await s3.requests().map(\.operation) == ["putObject"], "not retried")
                #expect(!(try await s3.object(Self.videoKey).exists))
            }
        }

        @Test func aFileChangedOnDiskDuringItsUploadFailsWithFileChangedAndIsAborted() async throws {
            try await S3UploaderTests.withStorage { s3, folder, file in
                let changed = LockedValue(false)
                let error = await #expect(throws: UploadError.self) {
                    try await Self.upload(S3UploaderTests.video(file, key: Self.videoKey).media, s3, folder: folder) {
                        _ in
                        // The exporter rewrites a byte of part 3 while part 1
                        // goes out: the same size, other bytes.
                        guard isFirst(changed) else { return }
                        let handle = try? FileHandle(forWritingTo: file)
                        try? handle?.seek(toOffset: UInt64(S3UploaderTests.threePartSize - 10))
                        try? handle?.write(contentsOf: Data([0x58]))
                        try? handle?.close()
                    }
                }

                #expect(error == .fileChanged(file, reason: "it was modified since its upload began"))
                let requests = try await s3.requests()
                #expect(!requests.contains { $0.operation == "completeMultipartUpload" }, "no object of two versions")
                #expect(requests.last?.operation == "abortMultipartUpload")
                #expect(try await s3.uploads().isEmpty)
                #expect(!(try await s3.object(Self.videoKey).exists))
            }
        }

        // MARK: - ETags

        @Test func aPartStoredWithOtherBytesFailsAndTheUploadIsAborted() async throws {
            try await S3UploaderTests.withStorage { s3, folder, file in
                // Stored, not refused: as a storage that does not check
                // Content-MD5 would. Once: the error is final all the same.
                try await s3.setRules([
                    ["operation": "uploadPart", "key": Self.videoKey, "partNumber": 2, "corrupt": "stored", "times": 1]
                ])
                let error = await #expect(throws: UploadError.self) {
                    try await Self.upload(S3UploaderTests.video(file, key: Self.videoKey).media, s3, folder: folder)
                }

                let destination = S3UploaderTests.video(file, key: Self.videoKey).media.destination
                guard case .storedObjectDiffers(destination, let reason) = error else {
                    Issue.record("expected storedObjectDiffers, got \(String(describing: error))")
                    return
                }
                #expect(reason.hasPrefix("part 2 was stored with the ETag "))
                #expect(reason.hasSuffix(", the MD5 of the bytes sent"))
                #expect(
                    error?.localizedDescription.hasPrefix("videos/surf.mp4: the stored object differs from") == true)
                let requests = try await s3.requests()
                #expect(requests.filter { $0.operation == "uploadPart" }.map(\.partNumber) == [1, 2], "not retried")
                #expect(requests.last?.operation == "abortMultipartUpload")
                #expect(try await s3.uploads().isEmpty)
            }
        }

        @Test func aSmallFileStoredWithOtherBytesFails() async throws {
            try await S3UploaderTests.withStorage(size: 100_000) { s3, folder, file in
                try await s3.setRules([["operation": "putObject", "corrupt": "stored", "times": 1]])
                let error = await #expect(throws: UploadError.self) {
                    try await Self.upload(S3UploaderTests.video(file, key: Self.videoKey).media, s3, folder: folder)
                }

                guard case .storedObjectDiffers(_, let reason) = error else {
                    Issue.record("expected storedObjectDiffers, got \(String(describing: error))")
                    return
                }
                let stored = try await s3.object(Self.videoKey)
                #expect(reason.hasPrefix("it was stored with the ETag \"\(stored.etag?.filter { $0 != "\"" } ?? "")\""))
                #expect(try await s3.requests().map(\.operation) == ["putObject"], "not retried")
            }
        }

        @Test func anObjectEncryptedWithAKMSKeyHasAnETagThatIsNoMD5AndIsNotChecked() async throws {
            try await S3UploaderTests.withStorage(size: 100_000) { s3, folder, file in
                try await s3.setRules([["operation": "putObject", "kms": true]])
                let receipt = try await Self.upload(
                    S3UploaderTests.video(file, key: Self.videoKey).media, s3, folder: folder)

                #expect(receipt.header("x-amz-server-side-encryption") == "aws:kms")
                #expect(receipt.etag != (try await s3.object(Self.videoKey)).etag, "the ETag is no MD5")
            }
        }

        @Test func anUploaderThatDoesNotVerifyBytesSendsNoDigestAndChecksNoETag() async throws {
            try await S3UploaderTests.withStorage { s3, folder, file in
                try await s3.setRules([
                    ["operation": "uploadPart", "key": Self.videoKey, "partNumber": 2, "corrupt": "stored", "times": 1]
                ])
                var presigner = s3.presigner
                presigner.listPageSize = nil
                let uploader = try S3Uploader(
                    presigner: presigner, manifestFolder: folder.url.appendingPathComponent("manifests"),
                    partSize: 5 * 1024 * 1024, maxConcurrentParts: 1, verifiesBytes: false)
                #expect(!uploader.verifiesBytes)

                _ = try await withTimeLimit(.seconds(60)) {
                    try await Job.uploading(S3UploaderTests.video(file, key: Self.videoKey), using: uploader).value
                }

                let requests = try await s3.requests()
                #expect(requests.allSatisfy { $0.contentMD5 == nil })
                #expect(
                    try await s3.object(Self.videoKey).sha256 != (try await sha256(of: file)),
                    "stored with the byte changed: nothing checked it")
            }
        }

        @Test func aMultipartObjectHasTheETagItsPartsMake() async throws {
            try await S3UploaderTests.withStorage { s3, folder, file in
                let receipt = try await Self.upload(
                    S3UploaderTests.video(file, key: Self.videoKey).media, s3, folder: folder)

                // moto computes it from what it stored; the uploader checked
                // it against the MD5s of what it sent.
                let partSize = 5 * 1024 * 1024
                var md5s = ""
                for offset in stride(from: 0, to: S3UploaderTests.threePartSize, by: partSize) {
                    md5s += try await pythonDigest(
                        "md5", of: file, offset: offset, length: min(partSize, S3UploaderTests.threePartSize - offset))
                }
                let expected = MD5.digest(of: Data(base64Encoded: base64(hex: md5s))!).hex
                #expect(receipt.etag == "\"\(expected)-3\"")
                #expect(try await s3.object(Self.videoKey).etag == receipt.etag)
            }
        }
    }
}
