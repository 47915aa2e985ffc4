import Foundation
import JobKit
import TestSupport
import Testing
import Uploads

@testable import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `S3Uploader`'s requests, sent to Node's strict HTTP server: parts are
/// streamed with a `Content-Length` and nothing else framing them.
@Suite("S3Uploader on a strict HTTP server", .startsProcesses, .timeLimit(.minutes(1)))
struct S3FramingTests {
    /// Signs nothing: each operation goes to its own path of the fixture.
    struct PathPresigner: S3Presigner {
        let server: URL

        func presignedURL(for operation: S3Operation, object: URL) async throws -> URL {
            switch operation {
            case .createMultipartUpload: server.appendingPathComponent("s3/create")
            case .uploadPart(_, let number, _): server.appendingPathComponent("s3/part-\(number)")
            case .completeMultipartUpload: server.appendingPathComponent("s3/complete")
            default: server.appendingPathComponent("s3/other")
            }
        }
    }

    @Test func partsAreFramedByContentLengthAloneAndCarryExactlyTheirBytes() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("surf.mp4")
        // Parts that do not end on the 64 KiB the session reads at a time,
        // so that one byte too many or too few would show.
        let partSize = 5 * 1024 * 1024 + 12_345
        try writePatternedFile(file, size: 2 * partSize + 123_457)
        try await FixtureServer.with { server in
            try await server.setRule(
                "s3/create",
                ["answer": "<InitiateMultipartUploadResult><UploadId>u-1</UploadId></InitiateMultipartUploadResult>"])
            try await server.setRule(
                "s3/complete",
                [
                    "answer": "<CompleteMultipartUploadResult><ETag>\"joined-3\"</ETag></CompleteMultipartUploadResult>"
                ])
            let uploader = try S3Uploader(
                presigner: PathPresigner(server: server.baseURL),
                manifestFolder: folder.url.appendingPathComponent("manifests"),
                partSize: Int64(partSize))

            let receipt = try await Job.uploading(
                S3Storage.S3UploaderTests.video(file, key: "videos/surf.mp4"), using: uploader
            )
            .value

            #expect(receipt.etag == "\"joined-3\"")
            let parts = try await server.received().filter { $0.path.hasPrefix("/s3/part-") }.sorted {
                $0.path < $1.path
            }
            #expect(parts.map(\.length) == [partSize, partSize, 123_457])
            #expect(parts.allSatisfy { $0.complete })
            for (index, part) in parts.enumerated() {
                #expect(part.sha256 == (try await sha256(of: file, offset: index * partSize, length: part.length)))
                let md5 = try await pythonDigest("md5", of: file, offset: index * partSize, length: part.length)
                #expect(part.headers["content-md5"] == base64(hex: md5), "part \(index + 1) carries its MD5")
            }
            for part in parts {
                let names = part.rawHeaders.compactMap { $0.first?.lowercased() }
                #expect(names.contains("content-length"))
                #expect(!names.contains("transfer-encoding"), "\(part.path): \(part.rawHeaders)")
                #expect(!names.contains("expect"), "\(part.path): \(part.rawHeaders)")
            }
            let completion = try #require(try await server.received().first { $0.path == "/s3/complete" })
            #expect(completion.body?.contains("<PartNumber>3</PartNumber>") == true)
        }
    }
}
