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

/// The double of Apple's background `URLSession`: each behaviour Apple
/// documents, with real transfers to Node's `http` server, which reads
/// every body and says whether it came whole. A transfer is held midway by
/// the server (``FixtureServer/hold(afterBytes:seconds:)``) while the test
/// suspends, kills or force-quits the app, or cuts the network.
@Suite("The double of Apple's background session", .startsProcesses, .timeLimit(.minutes(1)))
struct TestBackgroundSystemTests {
    static let identifier = "com.example.uploads.background"
    /// More than the socket buffers hold, so that a transfer the server
    /// holds midway cannot end.
    static let size = 8_000_000

    let folder: TemporaryFolder
    let clip: URL

    init() throws {
        folder = try TemporaryFolder()
        clip = folder.url.appendingPathComponent("clip.mp4")
        try writePatternedFile(clip, size: Self.size)
    }

    /// Runs `body` with a system whose delays run on `queue`, the app's
    /// session of ``identifier`` on it, what that session hears, and a
    /// server; then removes the test's folder.
    func withAppSession(
        queue: TestQueue = TestQueue(),
        backgroundDelay: Duration = .seconds(60),
        _ body: (TestBackgroundSystem, TestBackgroundSystem.Session, HeardEvents, FixtureServer) async throws -> Void
    ) async throws {
        defer { folder.remove() }
        let system = TestBackgroundSystem(queue: queue, backgroundDelay: backgroundDelay)
        let app = HeardEvents()
        let session = try system.session(identifier: Self.identifier, events: app)
        try await FixtureServer.with { server in try await body(system, session, app, server) }
    }

    /// A `PUT` of `path` on `server`.
    static func put(_ path: String, on server: FixtureServer) -> URLRequest {
        var request = URLRequest(url: server.url(path))
        request.httpMethod = "PUT"
        return request
    }

    /// Starts the task "clip", which sends ``clip`` to `server` through
    /// `session`, and waits until the server holds it midway, having read
    /// 64 KiB of it, until ``FixtureServer/release(resuming:)``.
    func startClipHeldMidway(through session: some BackgroundSession, on server: FixtureServer) async throws {
        try await server.setRule("clip.mp4", ["hold_after": 65_536])
        try session.upload(Self.put("clip.mp4", on: server), fromFile: clip, description: "clip")
        try #require(try await server.waitFor(bytes: 65_536, ended: 0).ok, "the server holds the transfer")
    }

    /// Checks that the server received ``clip`` once, whole.
    func expectClipSentOnceWhole(
        to server: FixtureServer, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let uploads = try await Self.uploads(of: "clip.mp4", on: server)
        #expect(
            uploads.map(\.sha256) == [try await sha256(of: clip)], "sent once, whole", sourceLocation: sourceLocation)
    }

    /// Checks that `system` woke the app once, whose handler was called
    /// once.
    static func expectWokenOnce(_ system: TestBackgroundSystem, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(
            system.wakes.map { "\($0.identifier) \($0.completionHandlerCalls)" } == ["\(identifier) 1"],
            sourceLocation: sourceLocation)
    }

    /// The uploads of `path` the server received.
    static func uploads(of path: String, on server: FixtureServer) async throws -> [FixtureServer.Received] {
        try await server.received().filter { $0.path == "/" + path }
    }

    @Test func aTaskSendsItsFileAndTellsItsProgressAnswerAndEnd() async throws {
        try await withAppSession { system, session, app, server in
            try session.upload(Self.put("clip.mp4", on: server), fromFile: clip, description: "clip")
            let heard = await app.heard(within: 20) {
                $0.contains(.completed("clip", status: 201, bodySize: 8_000_000))
            }
            let sent = heard.compactMap { if case .sent(_, let bytes) = $0 { bytes } else { nil } }
            #expect(!sent.isEmpty && sent == sent.sorted() && sent.last == Int64(Self.size), "\(sent)")
            #expect(
                heard.filter { !$0.isProgress } == [
                    .received("clip", "stored"), .completed("clip", status: 201, bodySize: 8_000_000),
                ])
            try await expectClipSentOnceWhole(to: server)
            #expect(system.tasks.map(\.phase) == [.ended])
            #expect(system.wakes == [])
        }
    }

    /// A task the app cancels ends with `NSURLErrorCancelled`, and its
    /// transfer is cut.
    @Test func aTaskTheAppCancelsEndsCancelled() async throws {
        try await withAppSession { system, session, app, server in
            try await startClipHeldMidway(through: session, on: server)
            session.cancel(description: "clip")
            let heard = await app.heard(within: 20) { $0.contains { $0.isCompletion } }
            #expect(heard.filter { !$0.isProgress } == [.completed("clip", error: .cancelled)])
            #expect(try await server.release(resuming: true) == 1)
            let cut = try await server.waitForUpload(of: "clip.mp4")
            #expect(cut.map(\.complete) == [false], "the transfer was cut")
            #expect(system.tasks.map(\.phase) == [.ended])
        }
    }

    /// Apple (`background(withIdentifier:)`): this configuration "makes it
    /// possible for transfers to continue even when the app itself is
    /// suspended or terminated". When they end, the system wakes the app in
    /// the background, calls the app delegate's
    /// `application(_:handleEventsForBackgroundURLSession:completionHandler:)`,
    /// tells the session's delegate the events, then
    /// `urlSessionDidFinishEvents(forBackgroundURLSession:)`.
    @Test func aTransferGoesOnWhileTheAppIsSuspendedWhichIsWokenToHearItsEnd() async throws {
        try await withAppSession { system, session, app, server in
            let handlers = CompletionHandlers()
            system.onBackgroundLaunch { identifier, completionHandler in
                app.record(.launched(identifier))
                handlers.keep(completionHandler)
            }
            try await startClipHeldMidway(through: session, on: server)
            system.enterBackground()
            system.suspend()
            #expect(try await server.release(resuming: true) == 1)
            let heard = await app.heard(within: 20) { $0.contains(.finished) }
            #expect(
                heard.drop { $0 != .launched(Self.identifier) }
                    == [
                        .launched(Self.identifier), .received("clip", "stored"),
                        .completed("clip", status: 201, bodySize: 8_000_000), .finished,
                    ],
                "woken, then the held events, then the end of them: \(heard)")
            #expect(system.appState == .background)
            handlers.callAll()
            #expect(system.appState == .suspended, "the handler's call suspends the app again")
            Self.expectWokenOnce(system)
            try await expectClipSentOnceWhole(to: server)
        }
    }

    /// Apple ("Downloading files in the background"): "If the system
    /// terminated the app while it was suspended, the system relaunches the
    /// app in the background." The app delegate is given the identifier:
    /// "If your app was just launched, you can use this identifier to
    /// create a new URLSession object that can receive the events."
    @Test func anAppKilledMidTransferIsLaunchedAndItsNewSessionHearsWhatEnded() async throws {
        try await withAppSession { system, session, first, server in
            // What the app's next launch makes.
            let app = HeardEvents()
            let relaunched = LockedValue<[TestBackgroundSystem.Session]>([])
            let handlers = CompletionHandlers()
            system.onBackgroundLaunch { identifier, completionHandler in
                // The app's launch: a new session on the same identifier.
                app.record(.launched(identifier))
                handlers.keep(completionHandler)
                do {
                    let session = try system.session(identifier: identifier, events: app)
                    relaunched.withValue { $0.append(session) }
                } catch {
                    app.record(.launched("refused: \(error)"))
                }
            }
            try await startClipHeldMidway(through: session, on: server)
            system.terminate()
            #expect(throws: TestBackgroundSystem.Refusal.sessionInvalidated(Self.identifier)) {
                try session.upload(Self.put("other.mp4", on: server), fromFile: clip, description: "other")
            }
            #expect(try await server.release(resuming: true) == 1)
            let heard = await app.heard(within: 20) { $0.contains(.finished) }
            #expect(
                heard == [
                    .launched(Self.identifier), .received("clip", "stored"),
                    .completed("clip", status: 201, bodySize: 8_000_000), .finished,
                ])
            #expect(relaunched.value.count == 1)
            #expect(!first.heard.contains { $0.isCompletion }, "the killed app's objects heard nothing of the end")
            handlers.callAll()
            Self.expectWokenOnce(system)
            #expect(system.appState == .suspended)
            try await expectClipSentOnceWhole(to: server)
        }
    }

    /// An app the user opens again while its transfer goes on makes its
    /// session again: `getAllTasks` lists the task ("any tasks that you have
    /// created within the session, not including any tasks that have been
    /// invalidated after completing, failing, or being cancelled"), whose
    /// events then reach the new delegate as they come.
    @Test func anAppLaunchedAgainWhileItsTaskRunsListsItAndHearsItsEnd() async throws {
        try await withAppSession { system, session, first, server in
            try await startClipHeldMidway(through: session, on: server)
            system.terminate()
            // The user opens the app before the transfer ends.
            let app = HeardEvents()
            let again = try system.session(identifier: Self.identifier, events: app)
            #expect(system.appState == .foreground)
            #expect(await again.allTasks() == ["clip"])
            #expect(try await server.release(resuming: true) == 1)
            let heard = await app.heard(within: 20) { $0.contains { $0.isCompletion } }
            #expect(
                heard.filter { !$0.isProgress } == [
                    .received("clip", "stored"), .completed("clip", status: 201, bodySize: 8_000_000),
                ])
            #expect(await again.allTasks() == [])
            #expect(system.wakes == [], "no launch: the app was running")
            #expect(!first.heard.contains { $0.isCompletion }, "the killed app's objects heard nothing of the end")
        }
    }

    /// Apple (`background(withIdentifier:)`): "If the user terminates the app
    /// from the multitasking screen, the system cancels all of the
    /// session’s background transfers. In addition, the system does not
    /// automatically relaunch apps that were force quit by the user." Each
    /// task ends with `NSURLErrorCancelled`, its
    /// `NSURLErrorBackgroundTaskCancelledReasonKey`
    /// `userForceQuitApplication` (0).
    @Test func aForceQuitCancelsEveryTaskAndLaunchesNothing() async throws {
        defer { folder.remove() }
        let system = TestBackgroundSystem(queue: TestQueue())
        let launched = LockedValue(0)
        system.onBackgroundLaunch { _, _ in launched.withValue { $0 += 1 } }
        let session = try system.session(identifier: Self.identifier, events: HeardEvents())
        try await FixtureServer.with { server in
            try await server.setRule("slow.mp4", ["delay": 30.0])
            try await startClipHeldMidway(through: session, on: server)
            try session.upload(Self.put("slow.mp4", on: server), fromFile: clip, description: "slow")
            system.forceQuit()
            // Reading again, the server finds the connection gone.
            #expect(try await server.release(resuming: true) == 1)
            let cut = try await server.waitForUpload(of: "clip.mp4")
            #expect(cut.map(\.complete) == [false], "the transfer was cut")
            #expect(system.tasks.map(\.phase) == [.ended, .ended])
            #expect(system.appState == .forceQuit)

            // The user opens the app again.
            let app = HeardEvents()
            let again = try system.session(identifier: Self.identifier, events: app)
            let heard = await app.heard(within: 20) { $0.filter(\.isCompletion).count == 2 }
            #expect(
                heard == [
                    .completed("clip", error: .cancelled, cancelledReason: 0),
                    .completed("slow", error: .cancelled, cancelledReason: 0),
                ])
            #expect(await again.allTasks() == [])
            #expect(launched.value == 0 && system.wakes == [])
        }
    }

    /// Apple's rate limiter ("Downloading files in the background"): a task
    /// the app starts in the background waits for a delay. "The delay
    /// increases each time the system resumes or relaunches your app." It
    /// "doubles that delay every time it resumes (or relaunches) your app"
    /// (Apple's DTS, "NSURLSession’s Resume Rate Limiter"). "The delay is
    /// reset to 0 whenever the user brings your app to the foreground."
    @Test func tasksMadeInTheBackgroundWaitADelayThatDoublesWithEachWake() async throws {
        let queue = TestQueue()
        try await withAppSession(queue: queue, backgroundDelay: .seconds(10)) { system, session, app, server in
            let handlers = CompletionHandlers()
            system.onBackgroundLaunch { _, completionHandler in handlers.keep(completionHandler) }
            func upload(_ index: Int) throws {
                try session.upload(Self.put("\(index).mp4", on: server), fromFile: clip, description: "\(index)")
            }
            func started() -> [Bool] { system.tasks.dropFirst().map { $0.phase != .waiting } }
            func wakes(_ count: Int) async -> Bool {
                await app.heard(within: 20) { $0.filter { $0 == .finished }.count == count }
                    .filter { $0 == .finished }.count == count
            }

            // The first wake, for a transfer that ended while the app was
            // suspended.
            try await startClipHeldMidway(through: session, on: server)
            system.enterBackground()
            system.suspend()
            try await server.release(resuming: true)
            #expect(await wakes(1))
            try upload(1)
            #expect(started() == [false])
            try queue.advance(by: .seconds(9))
            #expect(started() == [false])
            // Suspended before it starts, so that its end wakes the app.
            handlers.callAll()
            try queue.advance(by: .seconds(1))
            #expect(started() == [true], "10 s after the first wake")
            #expect(await wakes(2))
            try upload(2)
            try queue.advance(by: .seconds(19))
            #expect(started() == [true, false])
            try queue.advance(by: .seconds(1))
            #expect(started() == [true, true], "20 s after the second")

            try upload(3)
            #expect(started() == [true, true, false])
            system.enterForeground()
            #expect(started() == [true, true, true], "the foreground starts what waits")
            try upload(4)
            system.enterBackground()
            try upload(5)
            #expect(started() == [true, true, true, true, true], "no delay until the next wake")
            let heard = await app.heard(within: 20) { $0.filter(\.isCompletion).count == 6 }
            #expect(heard.filter(\.isCompletion).map(\.status) == Array(repeating: 201, count: 6))
            #expect(system.wakes.count == 2)
        }
    }

    /// A background task's body is a file, read when the task starts: one
    /// missing then fails the task, and nothing is sent. (Apple documents
    /// no error for it; the double says `fileDoesNotExist`.)
    @Test func aFileMissingWhenItsTaskStartsFailsIt() async throws {
        try await withAppSession { system, session, app, server in
            let missing = folder.url.appendingPathComponent("missing.mp4")
            try session.upload(Self.put("missing.mp4", on: server), fromFile: missing, description: "missing")
            // A task that waits (here for the network) reads its file when
            // it starts.
            system.networkGoesDown()
            try session.upload(Self.put("clip.mp4", on: server), fromFile: clip, description: "clip")
            try FileManager.default.removeItem(at: clip)
            system.networkComesBack()
            let heard = await app.heard(within: 20) { $0.filter(\.isCompletion).count == 2 }
            #expect(
                heard.sorted { $0.description < $1.description } == [
                    .completed("clip", error: .fileDoesNotExist), .completed("missing", error: .fileDoesNotExist),
                ])
            let received = try await server.received()
            #expect(received.isEmpty, "nothing sent")
        }
    }

    /// Apple (URL Loading System Programming Guide): "You must create
    /// exactly one session per identifier … The behavior of multiple
    /// sessions sharing the same identifier is undefined." The double
    /// refuses a second one while the first is live.
    @Test func aSecondSessionOfALiveIdentifierIsRefused() throws {
        defer { folder.remove() }
        let system = TestBackgroundSystem(queue: TestQueue())
        let app = HeardEvents()
        let first = try system.session(identifier: Self.identifier, events: app)
        #expect(throws: TestBackgroundSystem.Refusal.identifierInUse(Self.identifier)) {
            try system.session(identifier: Self.identifier, events: app)
        }
        _ = try system.session(identifier: "com.example.other", events: app)
        first.finishTasksAndInvalidate()
        let second = try system.session(identifier: Self.identifier, events: app)
        let url = URL(string: "http://127.0.0.1:9/x")!
        #expect(throws: TestBackgroundSystem.Refusal.sessionInvalidated(Self.identifier)) {
            try first.upload(URLRequest(url: url), fromFile: clip, description: "late")
        }
        // An invalidated session let go of later does not end the live one.
        first.finishTasksAndInvalidate()
        #expect(throws: TestBackgroundSystem.Refusal.identifierInUse(Self.identifier)) {
            try system.session(identifier: Self.identifier, events: app)
        }
        system.terminate()
        _ = try system.session(identifier: Self.identifier, events: app)
        #expect(throws: TestBackgroundSystem.Refusal.sessionInvalidated(Self.identifier)) {
            try second.upload(URLRequest(url: url), fromFile: clip, description: "after")
        }
        #expect(system.tasks == [])
    }

    /// An invalidated session's tasks go on, and tell their events to it
    /// (`finishTasksAndInvalidate()`), not to a session made later with
    /// its identifier.
    @Test func anInvalidatedSessionsTasksTellItTheirEnd() async throws {
        try await withAppSession { system, session, app, server in
            try await startClipHeldMidway(through: session, on: server)
            session.finishTasksAndInvalidate()
            let later = HeardEvents()
            let again = try system.session(identifier: Self.identifier, events: later)
            #expect(await again.allTasks() == [], "not the later session's")
            #expect(try await server.release(resuming: true) == 1)
            let heard = await app.heard(within: 20) { $0.contains { $0.isCompletion } }
            #expect(heard.last == .completed("clip", status: 201, bodySize: 8_000_000))
            #expect(later.heard == [], "the later session heard nothing of it")
        }
    }

    /// Apple ("Downloading files in the background"): "Only upload tasks
    /// from a file are supported (uploads from data instances or a stream
    /// fail after the app exits)." The double refuses a request carrying a
    /// body of its own at once, so that a test sees it.
    @Test func aRequestWithABodyOfItsOwnIsRefused() async throws {
        defer { folder.remove() }
        let system = TestBackgroundSystem(queue: TestQueue())
        let session = try system.session(identifier: Self.identifier, events: HeardEvents())
        try await FixtureServer.with { server in
            var bytes = Self.put("bytes", on: server)
            bytes.httpBody = Data("bytes".utf8)
            var stream = Self.put("stream", on: server)
            stream.httpBodyStream = InputStream(data: Data("stream".utf8))
            for (request, name) in [(bytes, "bytes"), (stream, "stream")] {
                #expect(throws: TestBackgroundSystem.Refusal.bodyNotAFile(task: name)) {
                    try session.upload(request, fromFile: clip, description: name)
                }
            }
            #expect(system.tasks == [])
            let received = try await server.received()
            #expect(received.isEmpty)
        }
    }

    /// Background sessions "always wait for connectivity" (Apple,
    /// `waitsForConnectivity`), and an upload cut by the network is sent
    /// again from its start when it returns: it reaches the server whole
    /// the second time, and the app hears one end.
    @Test func aTransferCutByTheNetworkIsSentAgainWholeWhenItReturns() async throws {
        try await withAppSession { system, session, app, server in
            try await startClipHeldMidway(through: session, on: server)
            system.networkGoesDown()
            // Reading again, the server finds the connection gone.
            #expect(try await server.release(resuming: true) == 1)
            let cut = try await server.waitForUpload(of: "clip.mp4")
            #expect(cut.map(\.complete) == [false])
            try session.upload(Self.put("later.mp4", on: server), fromFile: clip, description: "later")
            #expect(system.tasks.map(\.phase) == [.waitingForNetwork, .waitingForNetwork])

            system.networkComesBack()
            let heard = await app.heard(within: 20) { $0.filter(\.isCompletion).count == 2 }
            #expect(heard.filter(\.isCompletion).map(\.status) == [201, 201])
            #expect(system.tasks.map(\.sends) == [2, 1])
            let digest = try await sha256(of: clip)
            let uploads = try await Self.uploads(of: "clip.mp4", on: server)
            #expect(uploads.map(\.complete) == [false, true])
            #expect(uploads.last?.sha256 == digest, "sent again from its first byte")
        }
    }

    /// The background transport on the double: a request whose transfer
    /// ends while the app is suspended gets its answer when the app is
    /// woken.
    @Test func aRequestOfTheBackgroundTransportEndsWhileTheAppIsSuspended() async throws {
        defer { folder.remove() }
        let system = TestBackgroundSystem(queue: TestQueue())
        let handlers = CompletionHandlers()
        system.onBackgroundLaunch { _, completionHandler in handlers.keep(completionHandler) }
        let transport = try BackgroundTransport(
            identifier: Self.identifier, partsIn: folder.url.appendingPathComponent("parts"),
            configuration: .refusingEveryRequest
        ) { identifier, events in try system.session(identifier: identifier, events: events) }
        try await FixtureServer.with { server in
            let url = server.url("clip.mp4")
            try await server.setRule("clip.mp4", ["hold_after": 65_536])
            let job = transport.send(
                Self.put("clip.mp4", on: server), body: .file(clip, offset: 1, length: Int64(Self.size - 1)),
                destination: url)
            let answer = Task { try await job.value }
            try #require(try await server.waitFor(bytes: 65_536, ended: 0).ok, "the server holds the transfer")
            system.enterBackground()
            system.suspend()
            #expect(try await server.release(resuming: true) == 1)
            let receipt = try await withTimeLimit(.seconds(20)) { try await answer.value }.receipt
            #expect(receipt.status == 201)
            #expect(system.wakes.map(\.identifier) == [Self.identifier])
            handlers.callAll()
            #expect(system.appState == .suspended)
            let uploads = try await Self.uploads(of: "clip.mp4", on: server)
            #expect(uploads.map(\.sha256) == [try await sha256(of: clip, offset: 1, length: Self.size - 1)])
            #expect(TemporaryFolder.files(in: folder.url.appendingPathComponent("parts")) == [])
        }
    }
}

/// What an app's background session told it, in order.
final class HeardEvents: BackgroundSessionEvents {
    enum Heard: Sendable, Equatable, CustomStringConvertible {
        case sent(String, Int64)
        case received(String, String)
        case completed(
            String, status: Int? = nil, error: URLError.Code? = nil, cancelledReason: Int? = nil, bodySize: Int64 = 0)
        case finished
        /// Not an event: the app's launch handler was called.
        case launched(String)

        var isProgress: Bool { if case .sent = self { true } else { false } }
        var isCompletion: Bool { if case .completed = self { true } else { false } }
        var status: Int? { if case .completed(_, let status, _, _, _) = self { status } else { nil } }

        var description: String {
            switch self {
            case .sent(let task, let bytes): "\(task) sent \(bytes)"
            case .received(let task, let text): "\(task) received \(text)"
            case .completed(let task, let status, let error, let reason, let size):
                "\(task) completed \(status.map(String.init) ?? "-") \(error.map { "\($0.rawValue)" } ?? "-") \(reason.map(String.init) ?? "-") \(size)"
            case .finished: "finished"
            case .launched(let identifier): "launched \(identifier)"
            }
        }
    }

    private let condition = NSCondition()
    // Read and written with `condition` locked.
    nonisolated(unsafe) private var log: [Heard] = []

    /// Everything heard so far.
    var heard: [Heard] {
        condition.lock()
        defer { condition.unlock() }
        return log
    }

    func record(_ event: Heard) {
        condition.lock()
        log.append(event)
        condition.broadcast()
        condition.unlock()
    }

    /// Everything heard once `done` holds of it, or after `seconds`.
    func heard(within seconds: Double, _ done: @escaping @Sendable ([Heard]) -> Bool) async -> [Heard] {
        await offThePool { [self] in
            let deadline = Date(timeIntervalSinceNow: seconds)
            condition.lock()
            defer { condition.unlock() }
            // allowed: a bounded wait for events, off Swift's cooperative threads.
            while !done(log), condition.wait(until: deadline) {}
            return log
        }
    }

    func task(_ task: String, didSendBodyBytes sent: Int64) {
        record(.sent(task, sent))
    }

    func task(_ task: String, didReceive data: Data) {
        record(.received(task, String(decoding: data, as: UTF8.self)))
    }

    func task(_ task: String, didCompleteWith response: URLResponse?, error: (any Error)?, bodySize: Int64) {
        let urlError = error as? URLError
        record(
            .completed(
                task, status: (response as? HTTPURLResponse)?.statusCode, error: urlError?.code,
                cancelledReason: urlError?.userInfo[NSURLErrorBackgroundTaskCancelledReasonKey] as? Int,
                bodySize: bodySize))
    }

    func sessionDidFinishEvents() {
        record(.finished)
    }
}

/// The completion handlers an app was given, kept to be called.
final class CompletionHandlers: Sendable {
    private let handlers = LockedValue<[@Sendable () -> Void]>([])

    func keep(_ handler: @escaping @Sendable () -> Void) {
        handlers.withValue { $0.append(handler) }
    }

    /// Calls each handler kept, once.
    func callAll() {
        let kept = handlers.withValue { handlers in
            defer { handlers = [] }
            return handlers
        }
        for handler in kept { handler() }
    }
}

extension BackgroundSession {
    /// The descriptions of the tasks the session has that have not ended.
    func allTasks() async -> [String] {
        await withCheckedContinuation { continuation in getAllTasks { continuation.resume(returning: $0) } }
    }
}
