import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing

@testable import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A receipt keeps a successful answer whole, up to the uploader's bound,
/// and reads it as JSON; a longer one fails rather than being cut. Against
/// Node's `http` server.
@Suite("Whole answers", .startsProcesses, .serialized, .timeLimit(.minutes(1)))
struct WholeAnswerTests {
    /// What a media API answers: an attachment with a long description,
    /// and what the test reads of it.
    struct Attachment: Codable, Sendable, Hashable {
        struct Meta: Codable, Sendable, Hashable {
            let width: Int
            let height: Int
        }

        let id: String
        let description: String
        let meta: Meta
        let tags: [String]
    }

    static let attachment = Attachment(
        id: "109", description: String(repeating: "A wave breaking at dawn. ", count: 4_000),
        meta: Attachment.Meta(width: 1920, height: 1080), tags: (0..<500).map { "tag\($0)" })

    static func answer(_ attachment: Attachment = attachment) throws -> String {
        String(decoding: try JSONEncoder().encode(attachment), as: UTF8.self)
    }

    @Test func anAnswerLongerThanTheOldFourKilobytesIsKeptWholeAndDecoded() async throws {
        try await FixtureServer.with { server in
            let json = try Self.answer()
            #expect(json.utf8.count > 100_000)
            try await server.setRule("media/1.jpg", ["answer": json, "answer_type": "application/json"])
            let photo = Photo(bytes: Data("jpeg".utf8), destination: server.url("media/1.jpg"))

            let receipt = try await withTimeLimit(.seconds(20)) {
                try await Job.uploading(photo, using: URLSessionUploader()).value
            }
            let decoded = try await withTimeLimit(.seconds(20)) {
                try await Job.uploading(photo, using: URLSessionUploader()).decoding(Attachment.self).value
            }

            #expect(receipt.body == Data(json.utf8), "every byte")
            #expect(try receipt.decoded(as: Attachment.self) == Self.attachment)
            #expect(decoded == Self.attachment)
        }
    }

    @Test func aSuccessLongerThanTheBoundFailsOnceSayingSo() async throws {
        try await FixtureServer.with { server in
            try await server.setRule("media/1.jpg", ["answer": String(repeating: "x", count: 20_000)])
            let photo = Photo(bytes: Data("jpeg".utf8), destination: server.url("media/1.jpg"))
            let uploader = URLSessionUploader(answerLimit: 10 << 10)
            let attempts = UploadAttempts(retry: RetryPolicy(attempts: 3, initialDelay: .milliseconds(1)))

            let error = await #expect(throws: UploadError.self) {
                try await withTimeLimit(.seconds(20)) {
                    try await Job.uploading(photo, using: uploader, attempts: attempts).value
                }
            }

            #expect(
                error?.localizedDescription
                    == "media/1.jpg: the server's answer could not be understood: it accepted the upload, "
                    + "but its answer is longer than 10 KiB, the most kept of an answer")
            #expect(error?.failure == .permanent)
            #expect(try await server.received().count == 1, "not retried: the same answer would come")
        }
    }

    @Test func aRefusalKeepsTheStartOfItsAnswerUpToTheBound() async throws {
        try await FixtureServer.with { server in
            let page = "<html>" + String(repeating: "Request Entity Too Large. ", count: 2_000) + "</html>"
            try await server.setRule("media/1.jpg", ["status": 413, "answer": page, "answer_type": "text/html"])
            let photo = Photo(bytes: Data("jpeg".utf8), destination: server.url("media/1.jpg"))

            let error = await #expect(throws: UploadError.self) {
                try await withTimeLimit(.seconds(20)) {
                    try await Job.uploading(photo, using: URLSessionUploader(answerLimit: 1_000)).value
                }
            }

            guard case .httpStatus(let receipt) = error else {
                Issue.record("not a status: \(String(describing: error))")
                return
            }
            #expect(receipt.status == 413)
            #expect(receipt.body == Data(page.utf8).prefix(1_000))
        }
    }

    @Test func aFormsAnswerIsKeptToItsUploadersBound() async throws {
        try await FixtureServer.with { server in
            try await server.setRule("albums/1", ["answer": try Self.answer(), "answer_type": "application/json"])
            var form = FormData()
            form.append("Dawn", named: "caption")
            let whole = Job.uploading(form, to: server.url("albums/1"), using: try MultipartFormUploader())
            let bounded = Job.uploading(
                form, to: server.url("albums/1"), using: try MultipartFormUploader(answerLimit: 64 << 10))

            let decoded = try await withTimeLimit(.seconds(20)) { try await whole.decoding(Attachment.self).value }
            let error = await #expect(throws: UploadError.self) {
                try await withTimeLimit(.seconds(20)) { try await bounded.value }
            }

            #expect(decoded == Self.attachment)
            #expect(
                error?.localizedDescription.hasSuffix(
                    "its answer is longer than 64 KiB, the most kept of an answer") == true)
        }
    }

    // MARK: - Reading the body

    static let destination = URL(string: "https://social.example/api/v2/media")!

    static func receipt(_ json: String) -> UploadReceipt {
        UploadReceipt(destination: destination, status: 200, body: Data(json.utf8))
    }

    @Test(arguments: [
        (#"{"id":"1","description":"d","meta":{"width":1},"tags":[]}"#, #"no "height" at meta"#),
        (#"{"id":1,"description":"d","meta":{"width":1,"height":2},"tags":[]}"#, "not a String at id"),
        (
            #"{"id":"1","description":null,"meta":{"width":1,"height":2},"tags":[]}"#,
            "description is null, not a String"
        ),
        (#"{"description":"d","meta":{"width":1,"height":2},"tags":[]}"#, #"no "id" at the top"#),
        (#"{"id":"1","description":"d","meta":[1,2],"tags":[]}"#, "not an object at meta"),
        (#"["id"]"#, "not an object at the top"),
        (#"{"id":"1","description":"d","meta":{"width":1,"height":2},"tags":["a",2]}"#, "not a String at tags[1]"),
        ("<html>Bad gateway</html>", "not JSON"),
        ("", "the body is empty, not JSON"),
    ])
    func aBodyThatIsNotTheTypeSaysWhereItDiffers(json: String, reason: String) {
        #expect(throws: UploadError.invalidAnswer(Self.destination, reason: reason)) {
            try Self.receipt(json).decoded(as: Attachment.self)
        }
    }

    @Test func anAnswerAsLongAsTheBoundIsKeptAndOneByteMoreFails() async throws {
        try await FixtureServer.with { server in
            try await server.setRule("a.jpg", ["answer": String(repeating: "x", count: 10_240)])
            try await server.setRule("b.jpg", ["answer": String(repeating: "x", count: 10_241)])
            let uploader = URLSessionUploader(answerLimit: 10 << 10)
            let (a, b) = (server.url("a.jpg"), server.url("b.jpg"))

            let receipt = try await withTimeLimit(.seconds(20)) {
                try await Job.uploading(Photo(bytes: Data("1".utf8), destination: a), using: uploader).value
            }
            await #expect(throws: UploadError.self) {
                try await withTimeLimit(.seconds(20)) {
                    try await Job.uploading(Photo(bytes: Data("2".utf8), destination: b), using: uploader).value
                }
            }

            #expect(receipt.body.count == 10_240)
        }
    }

    @Test func aRefusedUploadDecodedFailsWithItsStatusNotItsBody() async throws {
        try await FixtureServer.with { server in
            try await server.setRule("a.jpg", ["status": 422, "answer": #"{"error":"Invalid"}"#])
            let upload = Job.uploading(
                Photo(bytes: Data("1".utf8), destination: server.url("a.jpg")), using: URLSessionUploader())
            let error = await #expect(throws: UploadError.self) {
                try await withTimeLimit(.seconds(20)) { try await upload.decoding(Attachment.self).value }
            }
            guard case .httpStatus(let receipt) = error else {
                Issue.record("not a status: \(String(describing: error))")
                return
            }
            #expect(receipt.status == 422)
        }
    }

    @Test func aMediumsProcessingQuestionsKeepTheirAnswersToTheUploadersBound() async throws {
        try await FixtureServer.with { server in
            try await server.setRule("api/v2/media", ["ok_status": 202, "answer": #"{"id":"7"}"#])
            try await server.setRule("api/v1/media/7", ["ok_status": 200, "answer": try Self.answer()])
            let processing = MediaProcessing(
                firstWait: .milliseconds(1), maximumWait: .milliseconds(1), timeLimit: .seconds(10),
                statusURL: MediaProcessing.mastodon.statusURL, isReady: MediaProcessing.mastodon.isReady)
            let photo = Photo(bytes: Data("jpeg".utf8), destination: server.url("api/v2/media"))
            let bounded = try MultipartFormUploader(answerLimit: 64 << 10, processing: processing)
            let whole = try MultipartFormUploader(processing: processing)

            let ready = try await withTimeLimit(.seconds(20)) {
                try await Job.uploading(photo, using: whole).decoding(Attachment.self).value
            }
            let error = await #expect(throws: UploadError.self) {
                try await withTimeLimit(.seconds(20)) { try await Job.uploading(photo, using: bounded).value }
            }

            #expect(ready == Self.attachment, "the answer that said ready, whole")
            #expect(
                error?.localizedDescription.hasPrefix("api/v1/media/7: the server's answer could not be understood")
                    == true)
        }
    }

    @Test func aDecoderOfTheAppsOwnReadsTheBody() throws {
        struct Status: Decodable {
            let createdAt: Date
        }
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        decoder.dateDecodingStrategy = .iso8601
        let status = try Self.receipt(#"{"created_at":"2026-11-30T10:00:00Z"}"#).decoded(
            as: Status.self, using: decoder)
        #expect(status.createdAt == Date(timeIntervalSince1970: 1_796_032_800))
    }
}
