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

/// A background transport made again with the identifier of one whose app
/// was killed finds the tasks the earlier launch left: a request named as
/// one of them joins it (running, or ended with an answer) rather than
/// sending again, a request of an upload waits for the tasks that upload
/// left running, and what failed or was force-quit is sent again. Through
/// the double of Apple's session, to Node's `http` server.
@Suite("Rejoining a background session's tasks", .startsProcesses, .timeLimit(.minutes(1)))
struct BackgroundRejoinTests {
    static let identifier = "com.example.uploads.rejoin"
    /// More than the socket buffers hold, so that a transfer the server
    /// holds midway cannot end.
    static let size = 8_000_000

    let folder: TemporaryFolder
    let clip: URL
    let parts: URL
    let system = TestBackgroundSystem(queue: TestQueue())

    init() throws {
        folder = try TemporaryFolder()
        clip = folder.url.appendingPathComponent("clip.mp4")
        parts = folder.url.appendingPathComponent("parts")
        try writePatternedFile(clip, size: Self.size)
    }

    /// A launch's transport on the system.
    func transport() throws -> BackgroundTransport {
        try BackgroundTransport(identifier: Self.identifier, partsIn: parts, configuration: .refusingEveryRequest) {
            try system.session(identifier: $0, events: $1)
        }
    }

    /// The request `task` of the upload "post medium 0": a `PUT` of
    /// ``clip`` from its second byte (so its body is a part file) to
    /// `path`.
    func request(
        _ task: String, to path: String, on server: FixtureServer, progress: LockedValue<Int64> = LockedValue(0)
    ) -> HTTPRequest {
        var put = URLRequest(url: server.url(path))
        put.httpMethod = "PUT"
        var request = HTTPRequest(
            urlRequest: put, body: .file(clip, offset: 1, length: Int64(Self.size - 1)),
            destination: server.url(path), resendable: true, answerLimit: 1024, task: task
        ) { sent in progress.withValue { $0 = max($0, sent.bytesSent) } }
        request.upload = "post medium 0"
        return request
    }

    /// The first launch sends `request`, which the server holds midway;
    /// then the system kills the app, whose objects run nothing more (the
    /// request is left as it is, never to end).
    func killedMidway(sending request: HTTPRequest, on server: FixtureServer) async throws {
        try await server.setRule(request.urlRequest.url!.lastPathComponent, ["hold_after": 65_536])
        let first = try transport()
        first.send(request).perform(on: DispatchQueue.global()) { _ in }
        try #require(try await server.waitFor(bytes: 65_536, ended: 0).ok, "the server holds the transfer")
        system.terminate()
    }

    @Test func aRequestNamedAsATaskStillRunningJoinsItAndSendsNothing() async throws {
        defer { folder.remove() }
        try await FixtureServer.with { server in
            try await killedMidway(sending: request("upload", to: "clip.mp4", on: server), on: server)
            #expect(TemporaryFolder.files(in: parts).count == 1, "the running task's part file is kept")

            let progress = LockedValue<Int64>(0)
            let again = try transport()
            let answer = Task {
                try await again.send(request("upload", to: "clip.mp4", on: server, progress: progress)).value
            }
            #expect(try await server.release(resuming: true) == 1)
            let receipt = try await withTimeLimit(.seconds(20)) { try await answer.value }.receipt
            #expect(receipt.status == 201)
            #expect(progress.value == Int64(Self.size - 1), "the task's progress reached the request")
            let uploads = try await server.received().filter { $0.path == "/clip.mp4" }
            #expect(uploads.map(\.sha256) == [try await sha256(of: clip, offset: 1, length: Self.size - 1)])
            #expect(system.tasks.count == 1, "no task made again")
            #expect(TemporaryFolder.files(in: parts) == [], "its part file went once it ended")
        }
    }

    @Test func aRequestNamedAsATaskThatEndedWhileTheAppWasGoneGetsItsAnswer() async throws {
        defer { folder.remove() }
        try await FixtureServer.with { server in
            try await killedMidway(sending: request("upload", to: "clip.mp4", on: server), on: server)
            #expect(try await server.release(resuming: true) == 1)
            #expect(try await server.waitForUpload(of: "clip.mp4").map(\.complete) == [true])

            let again = try transport()
            let answer = try await withTimeLimit(.seconds(20)) {
                try await again.send(request("upload", to: "clip.mp4", on: server)).value
            }
            #expect(answer.receipt.status == 201 && answer.body == Data("stored".utf8))
            #expect(try await server.received().count == 1, "sent once")
            #expect(system.tasks.count == 1)
            #expect(TemporaryFolder.files(in: parts) == [])
        }
    }

    /// A force-quit's `-999` is a cancel to resume from: the request is
    /// sent again.
    @Test func aRequestNamedAsATaskAForceQuitCancelledIsSentAgain() async throws {
        defer { folder.remove() }
        try await FixtureServer.with { server in
            try await killedMidway(sending: request("upload", to: "clip.mp4", on: server), on: server)
            system.forceQuit()
            // Reading again, the server finds the connection gone.
            #expect(try await server.release(resuming: true) == 1)
            #expect(try await server.waitForUpload(of: "clip.mp4").map(\.complete) == [false])

            let again = try transport()
            let answer = try await withTimeLimit(.seconds(20)) {
                try await again.send(request("upload", to: "clip.mp4", on: server)).value
            }
            #expect(answer.receipt.status == 201)
            let uploads = try await server.received().filter { $0.path == "/clip.mp4" }
            #expect(uploads.map(\.complete) == [false, true])
            #expect(TemporaryFolder.files(in: parts) == [])
        }
    }

    /// What a request of an upload asks the storage must count what the
    /// upload's earlier tasks store: it waits for those still running (or
    /// until it is cancelled, and then sends nothing).
    @Test func aRequestOfAnUploadWaitsForTheTasksItsUploadLeftRunning() async throws {
        defer { folder.remove() }
        try await FixtureServer.with { server in
            try await killedMidway(sending: request("part 1", to: "clip.mp4", on: server), on: server)

            let again = try transport()
            let next = Task { try await again.send(request("part 2", to: "next.mp4", on: server)).value }
            // Waiting once performed here, then cancelled.
            let outcome = LockedValue<Result<HTTPAnswer, any Error>?>(nil)
            let cancelled = again.send(request("part 3", to: "cancelled.mp4", on: server))
                .perform(on: ImmediateQueue()) { outcome.setValue($0) }
            #expect(outcome.value == nil, "part 3 waits")
            cancelled.cancel()
            #expect(throws: CancellationError.self) { try outcome.value?.get() }
            let unnamed = try await withTimeLimit(.seconds(20)) {
                var other = request("other", to: "other.mp4", on: server)
                other.upload = nil
                return try await again.send(other).value
            }
            #expect(unnamed.receipt.status == 201, "a request of no upload does not wait")
            #expect(try await server.received().filter { $0.path == "/next.mp4" }.isEmpty, "part 2 waits for part 1")
            #expect(try await server.release(resuming: true) == 1)
            let receipt = try await withTimeLimit(.seconds(20)) { try await next.value }.receipt
            #expect(receipt.status == 201)
            let paths = try await server.received().map(\.path)
            #expect(
                paths == ["/clip.mp4", "/other.mp4", "/next.mp4"] || paths == ["/other.mp4", "/clip.mp4", "/next.mp4"])
            #expect(TemporaryFolder.files(in: parts) == [])
        }
    }

    /// The part files an earlier launch left for tasks that no longer run
    /// are removed once the session listed its tasks.
    @Test func partFilesOfTasksThatNoLongerRunAreSweptAway() async throws {
        defer { folder.remove() }
        try await FixtureServer.with { server in
            try await killedMidway(sending: request("upload", to: "clip.mp4", on: server), on: server)
            let running = TemporaryFolder.files(in: parts)
            try Data("left".utf8).write(to: parts.appendingPathComponent("F00D.part"))
            try Data("kept".utf8).write(to: parts.appendingPathComponent("notes.txt"))

            let again = try transport()
            // A request waits for the listing, which sweeps first.
            var other = request("upload", to: "other.mp4", on: server)
            other.upload = "post medium 1"
            let job = again.send(other)
            _ = try await withTimeLimit(.seconds(20)) { try await job.value }
            #expect(TemporaryFolder.files(in: parts) == (running + ["notes.txt"]).sorted())
            #expect(try await server.release(resuming: true) == 1)
        }
    }
}
