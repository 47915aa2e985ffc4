import Foundation
import TestSupport
import Testing
import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension S3Storage {
    /// The S3 backend as the tests rely on it: a backend is emptied and
    /// reused by the next test, and a request that an earlier test's
    /// uploader sends late (an abort in the background), whether it was
    /// presigned before the backend was emptied or after, is not the next
    /// test's.
    @Suite("S3 backend", .startsProcesses, .timeLimit(.minutes(1)), S3Fixture.requirement)
    struct S3BackendTests {
        @Test func aRequestPresignedBeforeTheBackendWasEmptiedIsAnsweredGoneAndNotRecorded() async throws {
            try await S3Fixture.with { s3 in
                let earlier = try await s3.presigner.presignedURL(
                    for: .abortMultipartUpload(uploadID: "u-1"),
                    object: URL(string: "https://media.example.com/videos/earlier.mp4")!)
                // A late request of an earlier test may still be in flight.
                let cleaned = try await s3.clean(waitingUpTo: 10)
                let now = try await cleaned.presigner.presignedURL(
                    for: .headObject, object: URL(string: "https://media.example.com/videos/now.mp4")!)

                #expect(try await HTTP.status(of: Self.request(earlier, method: "DELETE")) == 410)
                #expect(try await HTTP.status(of: Self.request(now, method: "HEAD")) == 404)
                await #expect(throws: URLError.self, "the earlier test's presigner, late: refused") {
                    try await s3.presigner.presignedURL(
                        for: .abortMultipartUpload(uploadID: "u-1"),
                        object: URL(string: "https://media.example.com/videos/earlier.mp4")!)
                }
                #expect(try await s3.requests().map(\.operation) == ["headObject"])
            }
        }

        static func request(_ url: URL, method: String) -> URLRequest {
            var request = URLRequest(url: url)
            request.httpMethod = method
            return request
        }
    }
}
