import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing
import Uploads

extension S3Storage {
    /// Publishing to moto's S3 server through the project's backend, which
    /// counts the requests for each part: every request is retried by
    /// publishing's policy alone, handed to the `S3Uploader`.
    @Suite(
        "One owner per retry on S3", .startsProcesses, .timeLimit(.minutes(2)), S3Fixture.requirement,
        .serialized)
    struct S3RetryOwnerTests {
        static let videoKey = "posts/owner/video.mp4"

        /// A post of one video of three parts (see `S3UploaderTests`).
        static func post(_ file: URL) -> Post {
            Post(
                text: "one owner",
                videos: [S3UploaderTests.video(file, key: videoKey)],
                destination: URL(string: "https://media.example.com/posts/owner.json")!)
        }

        /// An uploader, which has no policy of its own: publishing's is
        /// the one that counts.
        static func uploader(_ s3: S3Fixture, folder: TemporaryFolder, concurrentParts: Int) throws -> S3Uploader {
            try S3UploaderTests.uploader(s3, folder: folder, concurrentParts: concurrentParts)
        }

        /// Publishing's options: three attempts, waits of milliseconds,
        /// each failed attempt noted in `told` with the request that failed,
        /// its number and whether a retry follows.
        static func options(told: LockedValue<[String]>) -> PublishOptions {
            PublishOptions(
                retry: RetryPolicy(attempts: 3, initialDelay: .milliseconds(20)),
                onFailedAttempt: { destination, attempt in
                    let next = attempt.nextRetryIn == nil ? "gives up" : "retried"
                    let request = attempt.request ?? "the upload"
                    told.withValue {
                        $0.append("\(destination.lastPathComponent) \(request) #\(attempt.number) \(next)")
                    }
                })
        }

        /// How many requests each part of the video got.
        static func partRequests(_ s3: S3Fixture) async throws -> [Int: Int] {
            try await s3.requests().filter { $0.operation == "uploadPart" && $0.key == videoKey }
                .reduce(into: [:]) { counts, request in counts[request.partNumber ?? 0, default: 0] += 1 }
        }

        @Test func aPartThatAlwaysFailsIsSentAsOftenAsPublishingAllowsAndTheUploadIsKept() async throws {
            try await S3UploaderTests.withStorage { s3, folder, file in
                try await s3.setRules([
                    ["operation": "uploadPart", "key": Self.videoKey, "partNumber": 2, "status": 500]
                ])
                let told = LockedValue<[String]>([])
                let publishing = Job.publishing(
                    Self.post(file), using: try Self.uploader(s3, folder: folder, concurrentParts: 1),
                    options: Self.options(told: told))
                let error = await #expect(throws: UploadError.self) {
                    try await withTimeLimit(.seconds(60), performing: publishing, on: DispatchQueue.global())
                }

                #expect(try await Self.partRequests(s3) == [1: 1, 2: 3], "part 2: three attempts in all, not 3 × 3")
                #expect(error?.localizedDescription.contains("500") == true, "\(String(describing: error))")
                #expect(
                    told.value == [
                        "video.mp4 part 2 #1 retried", "video.mp4 part 2 #2 retried", "video.mp4 part 2 #3 gives up",
                    ])
                let requests = try await s3.requests()
                #expect(requests.filter { $0.operation == "createMultipartUpload" }.count == 1)
                #expect(!requests.contains { $0.operation == "abortMultipartUpload" }, "a 500 can pass: kept")
                #expect(!requests.contains { $0.operation == "putObject" }, "no post without its media")
                #expect(try await s3.uploads().count == 1)
                #expect(S3UploaderTests.manifests(folder).count == 1, "kept for the next attempt to resume")
            }
        }

        /// How the first attempt of part 2 fails.
        enum FirstFailure: String, CaseIterable, Sendable {
            /// The storage answers 500.
            case internalError
            /// The storage holds it 30 s, past the time limit of an attempt.
            case heldPastTheTimeLimit

            var rule: [String: any Sendable] {
                var rule: [String: any Sendable] = [
                    "operation": "uploadPart", "key": videoKey, "partNumber": 2, "times": 1,
                ]
                switch self {
                case .internalError: rule["status"] = 500
                case .heldPastTheTimeLimit: rule["holdFor"] = 30
                }
                return rule
            }
        }

        @Test(arguments: FirstFailure.allCases)
        func aPartThatFailsOnceIsSentTwiceAndTheRestOfTheUploadGoesOn(failure: FirstFailure) async throws {
            try await S3UploaderTests.withStorage { s3, folder, file in
                try await s3.setRules([failure.rule])
                let told = LockedValue<[String]>([])
                var options = Self.options(told: told)
                if failure == .heldPastTheTimeLimit {
                    options.uploadTimeout = .seconds(5)
                }
                let publishing = Job.publishing(
                    Self.post(file), using: try Self.uploader(s3, folder: folder, concurrentParts: 4), options: options)
                let published = try await withTimeLimit(
                    .seconds(60), performing: publishing, on: DispatchQueue.global())

                #expect(try await Self.partRequests(s3) == [1: 1, 2: 2, 3: 1])
                #expect(told.value == ["video.mp4 part 2 #1 retried"])
                let object = try await s3.object(Self.videoKey)
                #expect(object.sha256 == (try await sha256(of: file)))
                #expect(published.media.first?.etag == object.etag)
                let requests = try await s3.requests()
                #expect(requests.filter { $0.operation == "createMultipartUpload" }.count == 1)
                #expect(requests.filter { $0.operation == "putObject" }.map(\.key) == ["posts/owner.json"])
                #expect(S3UploaderTests.manifests(folder).isEmpty)
            }
        }

        @Test func aFailureThePolicyThatRetriedCallsForGoodAbortsTheUpload() async throws {
            try await S3UploaderTests.withStorage { s3, folder, file in
                try await s3.setRules([
                    ["operation": "uploadPart", "key": Self.videoKey, "partNumber": 2, "status": 500],
                    ["operation": "abortMultipartUpload", "status": 500],
                ])
                let told = LockedValue<[String]>([])
                var options = Self.options(told: told)
                // The default policy would retry a 500, and keep the upload;
                // publishing's, which retried it, calls it final.
                options.retry.isRetryable = { _ in false }
                let publishing = Job.publishing(
                    Self.post(file), using: try Self.uploader(s3, folder: folder, concurrentParts: 1), options: options)
                await #expect(throws: UploadError.self) {
                    try await withTimeLimit(.seconds(60), performing: publishing, on: DispatchQueue.global())
                }

                #expect(try await Self.partRequests(s3) == [1: 1, 2: 1])
                let requests = try await s3.requests()
                #expect(requests.last?.operation == "abortMultipartUpload")
                #expect(
                    requests.filter { $0.operation == "abortMultipartUpload" }.count == 1,
                    "an abort is sent once, whatever it is answered")
                #expect(told.value == ["video.mp4 part 2 #1 gives up"], "the abort's failure is not the upload's")
                #expect(S3UploaderTests.manifests(folder).isEmpty)
            }
        }

        @Test func aStalledPartIsWhereTheTreeOfTheUploadEnds() async throws {
            try await S3UploaderTests.withStorage { s3, folder, file in
                try await s3.setRules([
                    ["operation": "uploadPart", "key": Self.videoKey, "partNumber": 1, "holdFor": 30]
                ])
                let video = S3UploaderTests.video(file, key: Self.videoKey)
                let handle = Job.uploading(
                    video, using: try Self.uploader(s3, folder: folder, concurrentParts: 1),
                    attempts: UploadAttempts(retry: RetryPolicy(attempts: 2))
                ).perform(on: DispatchQueue.global()) { _ in }
                defer { handle.cancel() }
                // Part 1, the only one in flight, has arrived and is held.
                #expect(try await s3.wait(for: "uploadPart", count: 1, received: true, timeout: 30))

                #expect(
                    handle.snapshot().pendingLeaves.map { $0.map(\.title) } == [
                        ["upload video.mp4", "group 0/3", "retry 1/2", "part 1"]
                    ])
            }
        }
    }
}
