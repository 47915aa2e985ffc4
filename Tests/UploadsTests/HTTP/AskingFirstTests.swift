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

/// A request that asks the server first (`Expect: 100-continue`), as an
/// ``Outbox``'s do after a pushback, against Node's `http` server
/// (`Fixtures/upload_server.js`), which turns a request away on its headers
/// when a rule says so and counts the body bytes that came all the same.
@Suite("Asking the server first", .startsProcesses, .timeLimit(.minutes(1)))
struct AskingFirstTests {
    /// A megabyte file to upload to `path` on `server`.
    private static func photo(in folder: TemporaryFolder, to url: URL) throws -> Photo {
        let file = folder.url.appendingPathComponent("photo.jpg")
        try patternedBytes(1_000_000, seed: 7).write(to: file)
        return Photo(file: file, destination: url)
    }

    /// One attempt, through a gate that says whether to ask first.
    private static func attempts(asking: Bool, gate: RecordingGate? = nil) -> UploadAttempts {
        var attempts = UploadAttempts(retry: RetryPolicy(attempts: 1))
        attempts.gate = gate ?? RecordingGate(asksFirst: asking)
        return attempts
    }

    @Test func aRequestTurnedAwayOnItsHeadersSendsNoBody() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try await FixtureServer.with { server in
            try await server.setRule("busy.jpg", ["status": 503, "headers": ["Retry-After": "5"]])
            let photo = try Self.photo(in: folder, to: server.url("busy.jpg"))
            let gate = RecordingGate(asksFirst: true)
            let upload = URLSessionUploader().upload(photo.media, attempts: Self.attempts(asking: true, gate: gate))
            let error = try await withTimeLimit(.seconds(20)) {
                await #expect(throws: UploadError.self) { try await upload.value }
            }
            guard case .httpStatus(let receipt) = error else {
                Issue.record("not the server's answer: \(String(describing: error))")
                return
            }
            #expect(receipt.status == 503 && receipt.retryAfter == .seconds(5))
            let received = try await server.waitForUpload(of: "busy.jpg")
            #expect(received.count == 1)
            let request = try #require(received.first)
            #expect(request.headers["expect"] == "100-continue")
            #expect(
                request.early == true && request.length == 0,
                "turned away before its body: \(request.length) bytes came")
            #expect(gate.continued.isEmpty, "no `100 Continue`, no body: the gate is told nothing")
        }
    }

    @Test func aRequestThatAsksAndIsTakenSendsItsBodyWhole() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try await FixtureServer.with { server in
            let photo = try Self.photo(in: folder, to: server.url("taken.jpg"))
            let gate = RecordingGate(asksFirst: true)
            let receipt = try await withTimeLimit(.seconds(20)) {
                try await URLSessionUploader().upload(photo.media, attempts: Self.attempts(asking: true, gate: gate))
                    .value
            }
            #expect(receipt.status == 201)
            // Its body went after Node's `100 Continue`: the gate heard it,
            // once, as a server that takes requests.
            #expect(gate.continued == [photo.media.destination])
            let request = try #require(try await server.received().first)
            #expect(request.headers["expect"] == "100-continue" && request.early == nil)
            #expect(request.complete && request.length == 1_000_000)
            #expect(request.sha256 == (try await sha256(of: folder.url.appendingPathComponent("photo.jpg"))))
        }
    }

    /// A strict server answers `417` on a connection it keeps: the
    /// request goes again without the header, once, whether its body is a
    /// file streamed from disk or bytes in memory.
    @Test(arguments: [true, false])
    func aServerThatRefusesTheExpectationIsSentTheRequestWithoutIt(fromAFile: Bool) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try await FixtureServer.with { server in
            try await server.setRule("strict.jpg", ["refuse_expect": true])
            let url = server.url("strict.jpg")
            let photo =
                fromAFile
                ? try Self.photo(in: folder, to: url)
                : Photo(bytes: patternedBytes(1_000_000, seed: 7), destination: url)
            let receipt = try await withTimeLimit(.seconds(20)) {
                try await URLSessionUploader().upload(photo.media, attempts: Self.attempts(asking: true)).value
            }
            #expect(receipt.status == 201)
            let received = try await server.received()
            #expect(received.map(\.headers["expect"]) == ["100-continue", nil], "\(received.map(\.headers))")
            #expect(received.map(\.early) == [true, nil])
            #expect(received.map(\.length) == [0, 1_000_000] && received.last?.complete == true)
        }
    }

    @Test func noRequestAsksUnlessTheGateSaysSoNorOneWithoutABody() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        try await FixtureServer.with { server in
            let photo = try Self.photo(in: folder, to: server.url("quiet.jpg"))
            _ = try await withTimeLimit(.seconds(20)) {
                try await URLSessionUploader().upload(photo.media, attempts: Self.attempts(asking: false)).value
            }
            let empty = Media(bytes: Data(), destination: server.url("empty.txt"), contentType: "text/plain")
            _ = try await withTimeLimit(.seconds(20)) {
                try await URLSessionUploader().upload(empty, attempts: Self.attempts(asking: true)).value
            }
            let received = try await server.received()
            #expect(received.map(\.path) == ["/quiet.jpg", "/empty.txt"])
            #expect(received.allSatisfy { $0.headers["expect"] == nil }, "\(received.map(\.headers))")
        }
    }
}
