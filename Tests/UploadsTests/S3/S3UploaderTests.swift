import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing
import Uploads

@testable import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension S3Storage {
    /// `S3Uploader` against moto's S3 server (`Fixtures/s3_backend.py`): a real
    /// implementation of the S3 API, reached through presigned URLs that a
    /// stand-in for the app's backend makes with boto3.
    @Suite(
        "S3Uploader", .startsProcesses, .timeLimit(.minutes(2)), S3Fixture.requirement, .serialized)
    struct S3UploaderTests {
        static let mebibyte = 1024 * 1024
        /// Three parts of 5 MiB, the last one short.
        static let threePartSize = 2 * 5 * mebibyte + 123_457

        /// An uploader with 5 MiB parts and a manifest folder of `folder`.
        static func uploader(
            _ s3: S3Fixture, folder: TemporaryFolder, concurrentParts: Int = 4, listPageSize: Int? = nil
        ) throws -> S3Uploader {
            var presigner = s3.presigner
            presigner.listPageSize = listPageSize
            return try S3Uploader(
                presigner: presigner,
                manifestFolder: folder.url.appendingPathComponent("manifests"),
                partSize: Int64(5 * mebibyte),
                maxConcurrentParts: concurrentParts
            )
        }

        /// Each request tried up to three times, with waits of
        /// milliseconds; or as `retry` says.
        static func attempts(_ retry: RetryPolicy? = nil) -> UploadAttempts {
            UploadAttempts(retry: retry ?? RetryPolicy(attempts: 3, initialDelay: .milliseconds(20)))
        }

        static func video(_ file: URL, key: String) -> Video {
            Video(file: file, destination: URL(string: "https://media.example.com/\(key)")!)
        }

        /// Runs `body` with a storage of its own and a file of `size` patterned
        /// bytes (three parts by default) in a folder of its own; `alone`,
        /// with no other transfer in flight (``TransferGate/alone(_:)``).
        static func withStorage(
            size: Int = threePartSize, alone: Bool = false,
            _ body: (S3Fixture, TemporaryFolder, URL) async throws -> Void
        ) async throws {
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            let file = folder.url.appendingPathComponent("surf.mp4")
            try writePatternedFile(file, size: size)
            if alone {
                try await TransferGate.alone { try await S3Fixture.withoutGate { try await body($0, folder, file) } }
            } else {
                try await S3Fixture.with { try await body($0, folder, file) }
            }
        }

        /// Uploads `video` until its third part meets a storage answering
        /// 503, with no retries: the upload is left unfinished, to resume.
        static func leaveUnfinished(_ video: Video, s3: S3Fixture, folder: TemporaryFolder) async throws {
            try await s3.setRules([["operation": "uploadPart", "partNumber": 3, "status": 503]])
            _ = try? await Job.uploading(video, using: uploader(s3, folder: folder, concurrentParts: 1))
                .value
            #expect(try await s3.uploads().count == 1)
        }

        /// The manifests left in `folder`.
        static func manifests(_ folder: TemporaryFolder) -> [String] {
            folder.files().filter { $0.hasPrefix("manifests/") }
        }

        /// Records every progress report.
        final class ProgressLog: Sendable {
            let reports = LockedValue<[UploadProgress]>([])
            func record(_ progress: UploadProgress) { reports.withValue { $0.append(progress) } }
            var neverWentBack: Bool {
                let sent = reports.value.map(\.bytesSent)
                return zip(sent, sent.dropFirst()).allSatisfy { $0 <= $1 }
            }
        }

        // MARK: - Asking the storage first

        @Test(arguments: [threePartSize, 300_000])
        func anObjectTheStorageHoldsIsNotSentAgainWhenAskedFirst(size: Int) async throws {
            try await Self.withStorage(size: size) { s3, folder, file in
                let video = Self.video(file, key: "videos/stored.mp4")
                let first = try await Job.uploading(
                    video, using: Self.uploader(s3, folder: folder), attempts: Self.attempts()
                ).value
                let sent = try await s3.requests().count

                var attempts = UploadAttempts(retry: .never)
                attempts.checksStorageFirst = true
                let log = ProgressLog()
                let again = try await Job.uploading(
                    video, using: Self.uploader(s3, folder: folder), attempts: attempts, progress: log.record
                ).value

                let requests = try await s3.requests()[sent...]
                #expect(requests.map(\.operation) == ["headObject"], "asked, and nothing sent")
                #expect(again.etag == first.etag)
                // The object's URL as the HEAD's presigned URL names it (a
                // multipart upload's receipt names the Location S3 answered).
                #expect(again.finalURL.path.hasSuffix("videos/stored.mp4"))
                #expect(first.finalURL.path.hasSuffix("videos/stored.mp4"))
                #expect(log.reports.value.last?.fractionCompleted == 1)
            }
        }

        @Test func anotherObjectAtTheKeyIsReplacedWhenAskedFirst() async throws {
            try await Self.withStorage(size: 300_000) { s3, folder, file in
                let video = Self.video(file, key: "videos/replaced.mp4")
                _ = try await Job.uploading(video, using: Self.uploader(s3, folder: folder), attempts: Self.attempts())
                    .value
                try writePatternedFile(file, size: 300_001)
                let sent = try await s3.requests().count

                var attempts = UploadAttempts(retry: .never)
                attempts.checksStorageFirst = true
                _ = try await Job.uploading(video, using: Self.uploader(s3, folder: folder), attempts: attempts).value

                #expect(try await s3.requests()[sent...].map(\.operation) == ["headObject", "putObject"])
                #expect(try await s3.object("videos/replaced.mp4").sha256 == (try await sha256(of: file)))
            }
        }

        // MARK: - Uploading

        @Test func aLargeFileGoesUpInPartsAndArrivesIntact() async throws {
            try await Self.withStorage { s3, folder, file in
                let log = ProgressLog()
                let receipt = try await withTimeLimit(.seconds(60)) {
                    try await Job.uploading(
                        Self.video(file, key: "videos/surf.mp4"), using: Self.uploader(s3, folder: folder),
                        attempts: Self.attempts()
                    ) {
                        log.record($0)
                    }.value
                }

                let object = try await s3.object("videos/surf.mp4")
                #expect(object.exists)
                #expect(object.size == Self.threePartSize)
                #expect(object.sha256 == (try await sha256(of: file)))
                #expect(receipt.etag == object.etag)
                #expect(receipt.etag?.hasSuffix("-3\"") == true, "a multipart ETag: \(receipt.etag ?? "none")")
                #expect(receipt.finalURL.path.hasSuffix("videos/surf.mp4"))
                #expect(receipt.finalURL.query == nil)

                let requests = try await s3.requests()
                #expect(
                    requests.map(\.operation).filter { $0 != "uploadPart" } == [
                        "createMultipartUpload", "completeMultipartUpload",
                    ])
                let parts = requests.filter { $0.operation == "uploadPart" }.sorted {
                    ($0.partNumber ?? 0) < ($1.partNumber ?? 0)
                }
                #expect(parts.map(\.partNumber) == [1, 2, 3])
                #expect(parts.map(\.bytes) == [5 * Self.mebibyte, 5 * Self.mebibyte, 123_457])
                #expect(parts.allSatisfy { !$0.chunked && $0.contentLength == $0.bytes })
                #expect(log.neverWentBack)
                let whole = Int64(Self.threePartSize)
                let last: UploadProgress? = log.reports.value.last
                #expect(last == UploadProgress(bytesSent: whole, bytesTotal: whole))
                #expect(Self.manifests(folder).isEmpty, "the manifest is removed once the object is complete")
            }
        }

        @Test func aSmallFileIsOnePut() async throws {
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            let bytes = patternedBytes(300_000, seed: 3)
            let file = try folder.file("photo.jpg", bytes: bytes)
            try await S3Fixture.with { s3 in
                let uploader = try Self.uploader(s3, folder: folder)
                let fromFile = try await Job.uploading(
                    Photo(file: file, destination: URL(string: "https://media.example.com/photos/a.jpg")!),
                    using: uploader, attempts: Self.attempts()
                ).value
                let fromMemory = try await Job.uploading(
                    Photo(bytes: bytes, destination: URL(string: "https://media.example.com/photos/b.jpg")!),
                    using: uploader, attempts: Self.attempts()
                ).value

                let requests = try await s3.requests()
                #expect(requests.map(\.operation) == ["putObject", "putObject"])
                #expect(requests.map(\.bytes) == [300_000, 300_000])
                for (receipt, key) in [(fromFile, "photos/a.jpg"), (fromMemory, "photos/b.jpg")] {
                    let object = try await s3.object(key)
                    #expect(object.size == 300_000)
                    #expect(receipt.etag == object.etag)
                    #expect(receipt.finalURL.path.hasSuffix(key))
                    #expect(receipt.finalURL.query == nil, "the receipt keeps no signature")
                }
            }
        }

        /// Asked first, as an outbox's requests are after a pushback, a
        /// `PUT` from a file and one from memory say `Expect: 100-continue`,
        /// and are stored whole once the server answers `100 Continue`.
        @Test func requestsThatAskFirstAreStoredWhole() async throws {
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            let bytes = patternedBytes(300_000, seed: 5)
            let file = try folder.file("photo.jpg", bytes: bytes)
            try await S3Fixture.with { s3 in
                let uploader = try Self.uploader(s3, folder: folder)
                var attempts = Self.attempts()
                attempts.gate = RecordingGate(asksFirst: true)
                for photo in [
                    Photo(file: file, destination: URL(string: "https://media.example.com/photos/c.jpg")!),
                    Photo(bytes: bytes, destination: URL(string: "https://media.example.com/photos/d.jpg")!),
                ] {
                    _ = try await uploader.upload(photo.media, attempts: attempts).value
                }
                let requests = try await s3.requests()
                #expect(requests.map(\.operation) == ["putObject", "putObject"])
                #expect(requests.map(\.expect) == ["100-continue", "100-continue"])
                #expect(requests.map(\.bytes) == [300_000, 300_000])
                for key in ["photos/c.jpg", "photos/d.jpg"] {
                    #expect(try await s3.object(key).size == 300_000)
                }
            }
        }

        // MARK: - Failures of one part

        @Test(arguments: [
            ["operation": "uploadPart", "partNumber": 2, "status": 500, "times": 1] as [String: any Sendable],
            ["operation": "uploadPart", "partNumber": 2, "dropAfter": 1_048_576, "times": 1],
        ])
        func aPartThatFailsOnceIsSentAgainAlone(rule: [String: any Sendable]) async throws {
            try await Self.withStorage { s3, folder, file in
                try await s3.setRules([rule])
                let log = ProgressLog()
                _ = try await withTimeLimit(.seconds(60)) {
                    try await Job.uploading(
                        Self.video(file, key: "videos/retried.mp4"), using: Self.uploader(s3, folder: folder),
                        attempts: Self.attempts()
                    ) {
                        log.record($0)
                    }.value
                }

                let sent = try await s3.requests().filter { $0.operation == "uploadPart" }.compactMap(\.partNumber)
                #expect(sent.sorted() == [1, 2, 2, 3], "part 2 failed once, then went up; the others went once")
                let object = try await s3.object("videos/retried.mp4")
                #expect(object.sha256 == (try await sha256(of: file)))
                #expect(log.neverWentBack, "progress never goes back when a part is sent again")
            }
        }

        // MARK: - Cancelling and failing for good

        @Test func cancellingMidUploadAbortsItAndLeavesNothing() async throws {
            try await Self.withStorage { s3, folder, file in
                let outcome = LockedValue<Job<UploadReceipt>.Outcome?>(nil)
                let handle = LockedValue<JobHandle?>(nil)
                let job = Job.uploading(
                    Self.video(file, key: "videos/cancelled.mp4"), using: try Self.uploader(s3, folder: folder),
                    attempts: Self.attempts()
                ) {
                    // Cancel once bytes of a part are on their way.
                    if $0.bytesSent > 0 { handle.value?.cancel() }
                }
                handle.withValue { $0 = job.perform { result in outcome.withValue { $0 = result } } }

                let aborted = try await s3.wait(for: "abortMultipartUpload")
                let uploads = try await s3.uploads()
                let object = try await s3.object("videos/cancelled.mp4")
                #expect(aborted, "Abort was sent")
                let cancelled = outcome.value.map {
                    if case .failure(let error) = $0 { error is CancellationError } else { false }
                }
                #expect(cancelled == true)
                #expect(uploads.isEmpty, "no multipart upload is left")
                #expect(!object.exists)
                #expect(Self.manifests(folder).isEmpty)
            }
        }

        @Test func aCancelWhileTheUploadIsBeingCreatedAbortsItOnceItExists() async throws {
            try await Self.withStorage { s3, folder, file in
                try await s3.setRules([["operation": "createMultipartUpload", "hold": true]])
                let outcome = LockedValue<Job<UploadReceipt>.Outcome?>(nil)
                let handle = Job.uploading(
                    Self.video(file, key: "videos/early.mp4"), using: try Self.uploader(s3, folder: folder),
                    attempts: Self.attempts()
                )
                .perform { result in outcome.withValue { $0 = result } }
                let creating = try await s3.wait(for: "createMultipartUpload", received: true)
                handle.cancel()
                // The storage creates the upload only now, after the cancel.
                try await s3.release()
                let aborted = try await s3.wait(for: "abortMultipartUpload")

                #expect(creating)
                #expect(aborted, "the upload created after the cancel is aborted")
                let uploads = try await s3.uploads()
                #expect(uploads.isEmpty, "nothing is left behind: \(uploads)")
                #expect(try await s3.requests().map(\.operation) == ["createMultipartUpload", "abortMultipartUpload"])
                #expect(Self.manifests(folder).isEmpty)
                let cancelled = outcome.value.map {
                    if case .failure(let error) = $0 { error is CancellationError } else { false }
                }
                #expect(cancelled == true)
            }
        }

        @Test func aCancelWhileAFailedUploadIsBeingAbortedDoesNotStopTheAbort() async throws {
            try await Self.withStorage { s3, folder, file in
                try await s3.setRules([
                    ["operation": "uploadPart", "partNumber": 2, "status": 403],
                    ["operation": "abortMultipartUpload", "hold": true],
                ])
                let handle = Job.uploading(
                    Self.video(file, key: "videos/refused-then-cancelled.mp4"),
                    using: try Self.uploader(s3, folder: folder, concurrentParts: 1), attempts: Self.attempts()
                ).perform { _ in }
                let aborting = try await s3.wait(for: "abortMultipartUpload", received: true)
                handle.cancel()
                // The storage aborts the upload only now, after the cancel.
                try await s3.release()
                let aborted = try await s3.wait(for: "abortMultipartUpload")

                #expect(aborting && aborted)
                #expect(try await s3.uploads().isEmpty)
                #expect(Self.manifests(folder).isEmpty)
            }
        }

        @Test func aCompletionAnswered200WithAnInternalErrorIsTriedAgain() async throws {
            try await Self.withStorage { s3, folder, file in
                try await s3.setRules([
                    ["operation": "completeMultipartUpload", "status": 200, "code": "InternalError", "times": 1]
                ])
                let receipt = try await Job.uploading(
                    Self.video(file, key: "videos/completed-twice.mp4"), using: Self.uploader(s3, folder: folder),
                    attempts: Self.attempts()
                ).value

                let completions = try await s3.requests().filter { $0.operation == "completeMultipartUpload" }
                #expect(completions.map(\.status) == [200, 200])
                let object = try await s3.object("videos/completed-twice.mp4")
                #expect(receipt.etag == object.etag)
                #expect(object.sha256 == (try await sha256(of: file)))
            }
        }

        @Test func aRefusedURLFailsAtOnceAndAborts() async throws {
            try await Self.withStorage { s3, folder, file in
                try await s3.setRules([
                    ["operation": "uploadPart", "partNumber": 2, "status": 403, "message": "Access Denied"]
                ])
                let error = await #expect(throws: UploadError.self) {
                    try await Job.uploading(
                        Self.video(file, key: "videos/refused.mp4"),
                        using: Self.uploader(s3, folder: folder, concurrentParts: 1), attempts: Self.attempts()
                    ).value
                }
                guard case .httpStatus(let receipt) = error else {
                    Issue.record("expected a status, got \(String(describing: error))")
                    return
                }
                #expect(receipt.status == 403)
                #expect(
                    error?.localizedDescription
                        == "videos/refused.mp4: the server answered 403 Forbidden (AccessDenied: Access Denied)")
                let requests = try await s3.requests()
                #expect(requests.compactMap(\.partNumber) == [1, 2], "a 403 is not retried, and no later part starts")
                #expect(requests.last?.operation == "abortMultipartUpload")
                #expect(try await s3.uploads().isEmpty)
                #expect(Self.manifests(folder).isEmpty)
            }
        }

        @Test func aPartListTheStorageRejectsFailsAndAborts() async throws {
            try await Self.withStorage { s3, folder, file in
                try await s3.setRules([
                    [
                        "operation": "completeMultipartUpload", "status": 400, "code": "InvalidPart",
                        "message": "One or more of the specified parts could not be found.",
                    ]
                ])
                let error = await #expect(throws: UploadError.self) {
                    try await Job.uploading(
                        Self.video(file, key: "videos/rejected.mp4"), using: Self.uploader(s3, folder: folder),
                        attempts: Self.attempts()
                    ).value
                }
                #expect(error?.localizedDescription.contains("400 Bad Request (InvalidPart: ") == true)
                #expect(try await s3.requests().last?.operation == "abortMultipartUpload")
                #expect(try await s3.uploads().isEmpty)
                #expect(try await s3.object("videos/rejected.mp4").exists == false)
                #expect(Self.manifests(folder).isEmpty)
            }
        }

        // MARK: - Resuming

        @Test func aTransientFailureKeepsTheUploadAndTheNextAttemptSendsOnlyTheMissingParts() async throws {
            try await Self.withStorage { s3, folder, file in
                let video = Self.video(file, key: "videos/resumed.mp4")
                // Parts go one at a time; the third meets a server that is
                // down, and is sent once: an upload made without attempts
                // tries each request once.
                try await s3.setRules([["operation": "uploadPart", "partNumber": 3, "status": 503]])
                let error = await #expect(throws: UploadError.self) {
                    try await Job.uploading(
                        video, using: Self.uploader(s3, folder: folder, concurrentParts: 1)
                    ).value
                }
                #expect(error?.isTransient == true)
                let first = try await s3.requests()
                #expect(first.filter { $0.operation == "uploadPart" }.count == 3, "parts 1, 2 and 3, each once")
                #expect(
                    !first.contains { $0.operation == "abortMultipartUpload" }, "a transient failure aborts nothing")
                #expect(try await s3.uploads().count == 1)
                #expect(Self.manifests(folder).count == 1)

                // The next attempt, with a new uploader as in a new process,
                // which reads the list of parts one part per page.
                try await s3.reset()
                let log = ProgressLog()
                let receipt = try await Job.uploading(
                    video, using: Self.uploader(s3, folder: folder, listPageSize: 1), attempts: Self.attempts()
                ) {
                    log.record($0)
                }.value

                let second = try await s3.requests()
                let pages = second.prefix { $0.operation == "listParts" }.count
                #expect(pages >= 2, "both stored parts were found, a page each")
                #expect(second.dropFirst(pages).map(\.operation) == ["uploadPart", "completeMultipartUpload"])
                #expect(second.filter { $0.operation == "uploadPart" }.map(\.partNumber) == [3])
                #expect(
                    second.reduce(0) { $0 + $1.bytes } < Self.threePartSize / 10 + 4096, "only part 3 was sent again")
                let firstReport = log.reports.value.first?.bytesSent ?? 0
                #expect(firstReport >= Int64(10 * Self.mebibyte), "the parts stored count as sent")
                #expect(log.neverWentBack)
                let object = try await s3.object("videos/resumed.mp4")
                #expect(object.sha256 == (try await sha256(of: file)))
                #expect(receipt.etag == object.etag)
                #expect(Self.manifests(folder).isEmpty)
                #expect(try await s3.uploads().isEmpty)
            }
        }

        @Test func anUploadTheStorageNoLongerHasIsStartedAgain() async throws {
            try await Self.withStorage { s3, folder, file in
                let video = Self.video(file, key: "videos/expired.mp4")
                try await Self.leaveUnfinished(video, s3: s3, folder: folder)
                // The storage drops the upload (a lifecycle rule, say).
                let upload = try #require(try await s3.uploads().first)
                var abort = URLRequest(
                    url: try await s3.presigner.presignedURL(
                        for: .abortMultipartUpload(uploadID: upload.uploadId), object: video.media.destination))
                abort.httpMethod = "DELETE"
                _ = try await HTTP.data(for: abort)
                try await s3.reset()

                let told = LockedValue<[Int]>([])
                let attempts = UploadAttempts { attempt in told.withValue { $0.append(attempt.number) } }
                _ = try await Job.uploading(video, using: Self.uploader(s3, folder: folder), attempts: attempts).value

                #expect(told.value.isEmpty, "a 404 for an upload the storage dropped is not a failure of this one")
                let requests = try await s3.requests()
                #expect(requests.first?.operation == "listParts")
                #expect(requests.first?.status == 404)
                #expect(requests.dropFirst().first?.operation == "createMultipartUpload")
                #expect(requests.filter { $0.operation == "uploadPart" }.count == 3, "every part, to the new upload")
                #expect(try await s3.object("videos/expired.mp4").sha256 == (try await sha256(of: file)))
                #expect(Self.manifests(folder).isEmpty)
            }
        }

        @Test func aFileThatChangedSinceItsUploadBeganFailsAndTheNextAttemptStartsAfresh() async throws {
            try await Self.withStorage { s3, folder, file in
                let video = Self.video(file, key: "videos/changed.mp4")
                try await Self.leaveUnfinished(video, s3: s3, folder: folder)
                try await s3.reset()
                try writePatternedFile(file, size: Self.threePartSize + 1_000_000)

                let error = await #expect(throws: UploadError.self) {
                    try await Job.uploading(video, using: Self.uploader(s3, folder: folder), attempts: Self.attempts())
                        .value
                }
                guard case .fileChanged(let changed, _) = error else {
                    Issue.record("expected fileChanged, got \(String(describing: error))")
                    return
                }
                #expect(changed == file)
                #expect(error?.isTransient == false)
                #expect(
                    try await s3.requests().map(\.operation) == ["abortMultipartUpload"],
                    "the stale upload is discarded")
                #expect(Self.manifests(folder).isEmpty)

                try await s3.reset()
                _ = try await Job.uploading(video, using: Self.uploader(s3, folder: folder), attempts: Self.attempts())
                    .value
                #expect(try await s3.requests().first?.operation == "createMultipartUpload")
                #expect(try await s3.object("videos/changed.mp4").sha256 == (try await sha256(of: file)))
            }
        }
    }
}

extension LargeTransfers {
    /// An S3 upload whose memory is measured, alone among the transfers.
    @Suite("S3 memory", .startsProcesses, .timeLimit(.minutes(2)), S3Fixture.requirement)
    struct S3MemoryTests {
        typealias Storage = S3Storage.S3UploaderTests

        /// In the plain pass, 200 MB in 24 parts of 8 MiB: memory grows by a
        /// few parts, not by the file. Under Thread Sanitizer, whose allocator
        /// holds freed memory back (18 MB on an idle machine, 54 MB on a busy
        /// one), memory tells nothing below hundreds of megabytes: there the
        /// test sends 7 parts of 5 MiB, the last one short, four in flight, for
        /// the sanitizer to watch the parts' threads, and checks the object.
        @Test func aLargeFileWithFourPartsInFlightStaysWithinAFewPartsOfMemory() async throws {
            let partSize = isThreadSanitized ? 5 * Storage.mebibyte : 8 * Storage.mebibyte
            let size = isThreadSanitized ? 6 * partSize + 123_457 : 200 * 1_000_000
            let partCount = (size + partSize - 1) / partSize
            let measures = !isThreadSanitized && residentMemory() > 0
            let limit = 3 * partSize
            try await Storage.withStorage(size: size, alone: measures) { s3, folder, file in
                // Alone among the transfers, not among every test of the
                // process: what the others allocate meanwhile counts too. A
                // growth past the bound is measured again, up to three
                // uploads: theirs comes and goes, while parts read whole
                // would add 32 MiB to every upload.
                var growths: [Int] = []
                for attempt in 1...(measures ? 3 : 1) {
                    try await s3.reset()
                    let key = "videos/large-\(attempt).mp4"
                    let uploader = try S3Uploader(
                        presigner: s3.presigner, manifestFolder: folder.url.appendingPathComponent("manifests"),
                        partSize: Int64(partSize), maxConcurrentParts: 4)
                    let before = residentMemory()
                    let peak = LockedValue(before)
                    _ = try await withTimeLimit(.seconds(90)) {
                        try await Job.uploading(Storage.video(file, key: key), using: uploader) { _ in
                            let now = residentMemory()
                            peak.withValue { $0 = max($0, now) }
                        }.value
                    }

                    let object = try await s3.object(key)
                    #expect(object.size == size)
                    #expect(object.sha256 == (try await sha256(of: file)))
                    #expect(try await s3.requests().filter { $0.operation == "uploadPart" }.count == partCount)
                    growths.append(peak.value - before)
                    if growths.last! < limit { break }
                }
                if measures {
                    // Four parts read whole would add 32 MiB; the file, 200 MB.
                    // Streamed: 4.4 MB here.
                    #expect(
                        growths.last! < limit, "anonymous memory grew by \(growths) bytes in \(growths.count) uploads")
                    if ProcessInfo.processInfo.environment["JOBKIT_PRINT_MEASUREMENTS"] != nil {
                        print("200 MB in 8 MiB parts, 4 in flight: RssAnon grew by \(growths) bytes at its peak")
                    }
                }
            }
        }
    }
}
