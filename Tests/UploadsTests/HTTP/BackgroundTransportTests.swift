import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing

@testable import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The transport of uploads that go on while the app is suspended: each
/// request with a body a task of a background session, from a whole file;
/// its events make the request's progress, answer and errors as the
/// in-process transport makes them. Driven here by a session the test
/// scripts; ``HTTPTransportTests`` sends through the session Apple's
/// platforms make (in process on Linux) to the strict servers.
@Suite("Background transport", .timeLimit(.minutes(1)))
struct BackgroundTransportTests {
    /// A background session whose events the test tells, holding its
    /// events weakly as a real one does.
    final class ScriptedSession: BackgroundSession {
        /// One task the transport started.
        struct Task: Sendable {
            var request: URLRequest
            var file: URL
            var description: String
            /// The file's bytes when the task started.
            var bytes: Data?
        }

        private let state = LockedValue<(tasks: [Task], cancelled: [String], invalidated: Bool)>(([], [], false))
        /// Runs as each task is asked for, before the session has it.
        let beforeEachTask = LockedValue<(@Sendable () -> Void)?>(nil)
        private let eventsBox = LockedValue<WeakEvents>(WeakEvents())

        struct WeakEvents: @unchecked Sendable {
            // Read and written under the LockedValue that holds it.
            weak var events: (any BackgroundSessionEvents)?
        }

        var tasks: [Task] { state.value.tasks }
        var cancelled: [String] { state.value.cancelled }
        var isInvalidated: Bool { state.value.invalidated }
        var events: (any BackgroundSessionEvents)? { eventsBox.value.events }

        /// The session's maker, for the transport.
        func make(_ identifier: String, _ events: any BackgroundSessionEvents) -> any BackgroundSession {
            eventsBox.setValue(WeakEvents(events: events))
            return self
        }

        func upload(_ request: URLRequest, fromFile file: URL, description: String) {
            beforeEachTask.value?()
            let task = Task(request: request, file: file, description: description, bytes: try? Data(contentsOf: file))
            state.withValue { $0.tasks.append(task) }
        }

        /// Cancels a task it has; one it does not have yet is not found, as
        /// in a real session.
        func cancel(description: String) -> Bool {
            state.withValue { state in
                guard state.tasks.contains(where: { $0.description == description }) else { return false }
                state.cancelled.append(description)
                return true
            }
        }

        /// The tasks not cancelled: this session does not say which ended.
        func getAllTasks(_ body: @escaping @Sendable ([String]) -> Void) {
            let state = state.value
            body(state.tasks.map(\.description).filter { !state.cancelled.contains($0) })
        }

        func finishTasksAndInvalidate() {
            state.withValue { $0.invalidated = true }
        }

        /// Answers the last task with `status`, its body `answer` in two
        /// pieces, after telling its body sent in two steps; the body's
        /// size it tells is `bodySize` (the file's, by default).
        func answerLast(
            _ status: Int, answer: Data = Data(), headers: [String: String] = [:], bodySize: Int64? = nil
        ) throws {
            let task = try #require(tasks.last)
            let size = Int64(task.bytes?.count ?? 0)
            events?.task(task.description, didSendBodyBytes: size / 2)
            events?.task(task.description, didSendBodyBytes: size + 10)
            let response = HTTPURLResponse(
                url: task.request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)
            events?.task(task.description, didReceive: answer.prefix(answer.count / 2))
            events?.task(task.description, didReceive: answer.dropFirst(answer.count / 2))
            events?.task(task.description, didCompleteWith: response, error: nil, bodySize: bodySize ?? size)
        }

        /// Fails the last task with `error`, unanswered.
        func failLast(_ error: URLError) throws {
            let task = try #require(tasks.last)
            events?.task(task.description, didCompleteWith: nil, error: error, bodySize: 0)
        }
    }

    let folder: TemporaryFolder
    let source: URL
    var parts: URL { folder.url.appendingPathComponent("parts") }
    let destination = URL(string: "https://media.example.com/api/v2/media")!

    init() throws {
        folder = try TemporaryFolder()
        source = folder.url.appendingPathComponent("clip.mp4")
        try writePatternedFile(source, size: 100_000)
    }

    /// A transport on `session`, whose requests with no body go through a
    /// session that refuses them.
    func transport(on session: ScriptedSession) throws -> BackgroundTransport {
        try BackgroundTransport(
            identifier: "com.example.uploads", partsIn: parts, configuration: .refusingEveryRequest,
            session: session.make)
    }

    /// Sends `body` to ``destination`` on an `ImmediateQueue`, recording
    /// its outcome and progress.
    func send(
        _ body: HTTPBody, through transport: BackgroundTransport, answerLimit: Int = 4096,
        progress: LockedValue<[Int64]> = LockedValue([])
    ) -> (OutcomeRecorder, JobHandle) {
        var request = URLRequest(url: destination)
        request.httpMethod = "POST"
        let recorder = OutcomeRecorder()
        let handle = transport.send(
            request, body: body, destination: destination, answerLimit: answerLimit,
            progress: { report in progress.withValue { $0.append(report.bytesSent) } }
        )
        .perform(on: ImmediateQueue(), then: recorder.handler)
        return (recorder, handle)
    }

    @Test func aFormGoesAsATaskFromAPartFileAndItsAnswerIsItsReceipt() throws {
        defer { folder.remove() }
        let session = ScriptedSession()
        let transport = try transport(on: session)
        let head = Data("--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n".utf8)
        let tail = Data("\r\n--b--\r\n".utf8)
        let progress = LockedValue<[Int64]>([])
        let answer = Data(String(repeating: "a", count: 6_000).utf8)

        let (recorder, _) = send(
            .segments([.bytes(head), .file(source, offset: 0, length: 100_000), .bytes(tail)]), through: transport,
            answerLimit: 6_000,
            progress: progress)
        let task = try #require(session.tasks.first)
        #expect(task.bytes == head + (try Data(contentsOf: source)) + tail, "the whole form, from a file")
        #expect(task.file.deletingLastPathComponent().lastPathComponent == "parts")
        #expect(task.request.httpMethod == "POST" && task.request.url == destination)
        try session.answerLast(201, answer: answer, headers: ["Location": "/media/1"])

        let sent = try #require(recorder.value(as: HTTPAnswer.self))
        #expect(sent.receipt.status == 201 && sent.receipt.header("Location") == "/media/1")
        #expect(sent.body == answer, "the whole answer, as long as its limit")
        let size = Int64(head.count + tail.count + 100_000)
        #expect(progress.value == [size / 2, size, size], "never past the body's size")
        #expect(TemporaryFolder.files(in: parts) == [], "the part file, once answered")
    }

    @Test func aSuccessLongerThanItsLimitFailsAndARefusalKeepsItsStart() throws {
        defer { folder.remove() }
        let session = ScriptedSession()
        let transport = try transport(on: session)
        let answer = Data(String(repeating: "a", count: 6_000).utf8)

        let (long, _) = send(.data(Data("{}".utf8)), through: transport, answerLimit: 5_999)
        try session.answerLast(201, answer: answer)
        let (refused, _) = send(.data(Data("{}".utf8)), through: transport, answerLimit: 5_000)
        try session.answerLast(500, answer: answer)

        #expect(
            long.error as? UploadError
                == .invalidAnswer(
                    destination,
                    reason:
                        "it accepted the upload, but its answer is longer than 5999 bytes, the most kept of an answer"))
        guard case .httpStatus(let receipt)? = refused.error as? UploadError else {
            Issue.record("expected a status, got \(String(describing: refused.error))")
            return
        }
        #expect(receipt.status == 500 && receipt.body == answer.prefix(5_000), "a refusal's start")
    }

    @Test func aStatusOutsideTwoHundredsAndALostConnectionFailAsInProcess() throws {
        defer { folder.remove() }
        let session = ScriptedSession()
        let transport = try transport(on: session)

        let (refused, _) = send(.data(Data("{}".utf8)), through: transport)
        try session.answerLast(503, answer: Data("busy".utf8), headers: ["Retry-After": "5"])
        guard case .httpStatus(let receipt)? = refused.error as? UploadError else {
            Issue.record("expected an HTTP status, got \(String(describing: refused.error))")
            return
        }
        #expect(receipt.status == 503 && receipt.bodyText == "busy" && receipt.header("Retry-After") == "5")

        let (lost, _) = send(.data(Data("{}".utf8)), through: transport)
        try session.failLast(URLError(.networkConnectionLost))
        #expect(lost.error as? UploadError == .network(destination, URLError(.networkConnectionLost)))
        #expect(TemporaryFolder.files(in: parts) == [])
    }

    @Test func aTaskWhoseFileWentMissingFailsAsAMissingFile() throws {
        defer { folder.remove() }
        let session = ScriptedSession()
        let transport = try transport(on: session)

        let (recorder, _) = send(.file(source, offset: 0, length: 100_000), through: transport)
        #expect(try #require(session.tasks.first).file == source, "a whole file goes as it is")
        try FileManager.default.removeItem(at: source)
        try session.failLast(URLError(.fileDoesNotExist))

        #expect(recorder.error as? UploadError == .fileNotFound(source))
    }

    @Test func aCancelCancelsTheTaskAndItsLaterEventsAreDropped() throws {
        defer { folder.remove() }
        let session = ScriptedSession()
        let transport = try transport(on: session)
        let progress = LockedValue<[Int64]>([])

        let (recorder, handle) = send(.data(Data("{}".utf8)), through: transport, progress: progress)
        handle.cancel()
        try session.answerLast(201)

        let task = try #require(session.tasks.first)
        #expect(session.cancelled == [task.description])
        #expect(recorder.error is CancellationError && recorder.outcomes.count == 1)
        #expect(progress.value == [], "no event of the task reached the request once cancelled")
        #expect(TemporaryFolder.files(in: parts) == [])
    }

    @Test func aCancelWhileTheTaskIsBeingMadeStillCancelsIt() throws {
        defer { folder.remove() }
        let session = ScriptedSession()
        let transport = try transport(on: session)
        let queue = TestQueue()
        let handle = LockedValue<JobHandle?>(nil)
        // The cancel lands after the job checked it was not cancelled,
        // before the session has the task, which it does not find then.
        session.beforeEachTask.setValue { handle.value?.cancel() }

        let recorder = OutcomeRecorder()
        let job = transport.send(URLRequest(url: destination), body: .data(Data("{}".utf8)), destination: destination)
        handle.setValue(job.perform(on: queue, then: recorder.handler))
        try queue.run()

        let task = try #require(session.tasks.first)
        #expect(session.cancelled == [task.description], "cancelled once the session had it")
        #expect(recorder.error is CancellationError)
        #expect(TemporaryFolder.files(in: parts) == [])
    }

    @Test func anUnansweredConnectionThatClosedIsALostConnection() throws {
        defer { folder.remove() }
        let session = ScriptedSession()
        let transport = try transport(on: session)

        let (recorder, _) = send(.data(Data("{}".utf8)), through: transport)
        try session.failLast(URLError(.badServerResponse))

        #expect(recorder.error as? UploadError == .network(destination, URLError(.networkConnectionLost)))
    }

    @Test func aFileThatChangedSizeBeforeItsTaskStartedFailsItsRequest() throws {
        defer { folder.remove() }
        let session = ScriptedSession()
        let transport = try transport(on: session)

        let (recorder, _) = send(.file(source, offset: 0, length: 100_000), through: transport)
        try session.answerLast(200, bodySize: 120_000)

        guard case .unreadableFile(let file, let reason)? = recorder.error as? UploadError else {
            Issue.record("expected unreadableFile, got \(String(describing: recorder.error))")
            return
        }
        #expect(file == source && reason.contains("from 100000 to 120000 bytes"))
    }

    @Test func aSessionThatDoesNotSayTheBodysSizeIsTakenAtItsWord() throws {
        defer { folder.remove() }
        let session = ScriptedSession()
        let transport = try transport(on: session)

        let (unknown, _) = send(.file(source, offset: 0, length: 100_000), through: transport)
        try session.answerLast(200, bodySize: -1)
        let (streamed, _) = send(.file(source, offset: 0, length: 100_000), through: transport)
        try session.answerLast(200, bodySize: 0)

        #expect(unknown.isSucceeded && streamed.isSucceeded)
    }

    @Test func aSessionThatCannotBeMadeFailsTheTransport() throws {
        defer { folder.remove() }
        struct Live: Error {}
        #expect(throws: Live.self) {
            try BackgroundTransport(identifier: "com.example.uploads", partsIn: parts) { _, _ in throw Live() }
        }
    }

    @Test func aRequestWithNoBodyGoesInProcessAndEachTaskHasANameOfItsOwn() async throws {
        defer { folder.remove() }
        let session = ScriptedSession()
        let transport = try transport(on: session)

        let error = await #expect(throws: UploadError.self) {
            try await withTimeLimit(.seconds(10)) {
                try await transport.send(URLRequest(url: destination), body: .empty, destination: destination).value
            }
        }
        #expect(error == .network(destination, URLError(.notConnectedToInternet)), "the refusing in-process session")
        _ = send(.data(Data("1".utf8)), through: transport)
        _ = send(.data(Data("2".utf8)), through: transport)
        #expect(session.tasks.count == 2 && Set(session.tasks.map(\.description)).count == 2)
    }

    @Test func theSessionIsGivenUpOnceTheTransportAndItsRequestsAreGone() throws {
        defer { folder.remove() }
        let session = ScriptedSession()
        var transport: BackgroundTransport? = try transport(on: session)
        let (recorder, _) = send(.data(Data("{}".utf8)), through: transport!)
        transport = nil
        #expect(!session.isInvalidated, "a request still runs")

        try session.answerLast(200)

        #expect(recorder.isSucceeded, "its answer still reached it")
        #expect(session.isInvalidated)
        #expect(session.events == nil, "held weakly, and let go of")
    }

    /// An outbox's uploads carried by a background transport have no time
    /// limit of an attempt: the system carries their transfers as long as
    /// they take. Carried in process, they keep it.
    @Test func anAttemptCarriedByABackgroundTransportHasNoTimeLimit() throws {
        var background = UploadAttempts(timeout: .seconds(60))
        background.carried(by: try transport(on: ScriptedSession()))
        #expect(background.timeout == nil)
        var inProcess = UploadAttempts(timeout: .seconds(60))
        inProcess.carried(by: InProcessTransport(configuration: .ephemeral))
        #expect(inProcess.timeout == .seconds(60))
        inProcess.carried(by: nil)
        #expect(inProcess.timeout == .seconds(60))
    }
}
