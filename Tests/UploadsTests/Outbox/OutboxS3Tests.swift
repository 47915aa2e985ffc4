import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing
import Uploads

@testable import Uploads

extension S3Storage {
    /// An `Outbox` publishing to moto's S3 server through an `S3Uploader`:
    /// pausing keeps a multipart upload's stored parts, removing aborts it.
    @Suite(
        "Outbox on S3", .startsProcesses, .timeLimit(.minutes(2)), S3Fixture.requirement,
        .serialized)
    struct OutboxS3Tests {
        typealias Storage = S3UploaderTests

        /// A post of one three-part video of `file`.
        static func post(_ file: URL, name: String) -> Post {
            Post(
                text: name, videos: [Storage.video(file, key: "videos/\(name).mp4")],
                destination: URL(string: "https://media.example.com/posts/\(name).json")!)
        }

        /// The entry of `id` once it is published or failed.
        static func settled(_ outbox: Outbox, _ id: Outbox.PostID) async throws -> Outbox.Entry {
            try await withTimeLimit(.seconds(60)) {
                for await posts in outbox.changes {
                    if let entry = posts.first(where: { $0.id == id }),
                        entry.state == .published || entry.state == .failed
                    {
                        return entry
                    }
                }
                throw CancellationError()
            }
        }

        @Test func pausingKeepsTheStoredPartsAndResumingSendsOnlyTheRest() async throws {
            try await Storage.withStorage { s3, folder, file in
                // Part 2 is held by the storage until the test releases it:
                // still in flight when the post is paused.
                try await s3.setRules([["operation": "uploadPart", "partNumber": 2, "hold": true]])
                let uploader = try Storage.uploader(s3, folder: folder, concurrentParts: 1)
                let outbox = try Outbox(folder: folder.url.appendingPathComponent("outbox"), uploader: uploader)
                let post = Self.post(file, name: "paused")
                let id = try outbox.add(post)
                #expect(try await s3.wait(for: "uploadPart", count: 2, received: true))
                try outbox.pause(id)
                #expect(outbox.entry(id)?.state == .paused)
                try await s3.release()

                let before = try await s3.requests()
                #expect(!before.contains { $0.operation == "abortMultipartUpload" }, "a pause aborts nothing")
                #expect(try await s3.uploads().count == 1, "the multipart upload is kept")
                #expect(Storage.manifests(folder).count == 1, "with its manifest")

                try await s3.reset()
                try outbox.resume(id)
                let entry = try await Self.settled(outbox, id)
                #expect(entry.state == .published)
                let after = try await s3.requests()
                #expect(!after.contains { $0.operation == "createMultipartUpload" }, "the same upload resumed")
                let parts = after.filter { $0.operation == "uploadPart" }.compactMap(\.partNumber)
                #expect(!parts.contains(1) && parts.contains(3), "part 1 is not sent again: \(parts)")
                #expect(after.filter { $0.operation == "putObject" }.map(\.key) == ["posts/paused.json"])
                let object = try await s3.object("videos/paused.mp4")
                #expect(object.sha256 == (try await sha256(of: file)))
                #expect(try await s3.uploads().isEmpty && Storage.manifests(folder).isEmpty)
                outbox.close()
            }
        }

        @Test func removingAPostAbortsItsMultipartUpload() async throws {
            try await Storage.withStorage { s3, folder, file in
                try await s3.setRules([["operation": "uploadPart", "partNumber": 2, "hold": true]])
                let uploader = try Storage.uploader(s3, folder: folder, concurrentParts: 1)
                let outbox = try Outbox(folder: folder.url.appendingPathComponent("outbox"), uploader: uploader)
                let id = try outbox.add(Self.post(file, name: "removed"))
                #expect(try await s3.wait(for: "uploadPart", count: 2, received: true))
                try outbox.remove(id)

                #expect(try await s3.wait(for: "abortMultipartUpload"), "the upload is aborted")
                try await s3.release()
                #expect(try await s3.uploads().isEmpty)
                #expect(Storage.manifests(folder).isEmpty)
                #expect(outbox.posts.isEmpty)
                #expect(!(try await s3.object("videos/removed.mp4")).exists)
                outbox.close()
            }
        }
    }
}
