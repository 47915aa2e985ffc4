import Foundation
import JobKit
import JobKitTesting
import Testing

@testable import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The transport that hands on only whole files: each body that is not one
/// is written to a part file of exactly its bytes, which is gone once the
/// request ends, whatever ended it. (The strict servers take such bodies in
/// ``HTTPTransportTests``.)
@Suite("Every body a file", .timeLimit(.minutes(1)))
struct FileBodyTransportTests {
    /// A transport that answers as it is told, and keeps what each body's
    /// file held when it was handed over.
    final class AnsweringTransport: HTTPTransport {
        /// What one request carried.
        struct Handed: Sendable {
            var body: HTTPBody
            /// The bytes of the body's file, from its offset, as it was
            /// handed over.
            var bytes: Data?
        }

        private let answer: Result<Int, UploadError>?
        private let log = LockedValue<[Handed]>([])
        /// The requests it never answers, kept running.
        private let unanswered = LockedValue<[Job<HTTPAnswer>.Controller]>([])
        var handed: [Handed] { log.value }

        /// Answers each request with `answer`'s status or fails it with
        /// its error; never answers when `nil`.
        init(answering answer: Result<Int, UploadError>? = .success(200)) {
            self.answer = answer
        }

        func send(_ request: HTTPRequest) -> Job<HTTPAnswer> {
            let (body, destination) = (request.body, request.destination)
            return Job { [log, answer, unanswered] controller in
                var bytes: Data?
                if case .file(let file, let offset, let length) = body {
                    bytes = (try? Data(contentsOf: file))?.dropFirst(Int(offset)).prefix(Int(length))
                }
                log.withValue { $0.append(Handed(body: body, bytes: bytes)) }
                switch answer {
                case .success(let status):
                    let receipt = UploadReceipt(destination: destination, status: status, headers: [:], body: Data())
                    controller.finish(with: HTTPAnswer(url: destination, receipt: receipt, body: Data()))
                case .failure(let error):
                    controller.fail(with: error)
                case nil:
                    unanswered.withValue { $0.append(controller) }
                }
            }
        }
    }

    let folder: TemporaryFolder
    let source: URL
    var parts: URL { folder.url.appendingPathComponent("parts") }
    let destination = URL(string: "https://media.example.com/upload")!

    init() throws {
        folder = try TemporaryFolder()
        source = folder.url.appendingPathComponent("clip.mp4")
        try writePatternedFile(source, size: 100_000)
    }

    /// Sends `body` through a file-body transport in front of `inner`, on
    /// an `ImmediateQueue`; the recorder of its outcome, and its handle.
    func send(_ body: HTTPBody, through inner: AnsweringTransport) -> (OutcomeRecorder, JobHandle) {
        let transport = FileBodyTransport(sendingThrough: inner, partsIn: parts)
        let recorder = OutcomeRecorder()
        let handle = transport.send(URLRequest(url: destination), body: body, destination: destination)
            .perform(on: ImmediateQueue(), then: recorder.handler)
        return (recorder, handle)
    }

    @Test func aFormsBodyIsWrittenWithTheBytesAroundEachFileThenRemoved() throws {
        defer { folder.remove() }
        let inner = AnsweringTransport()
        let head = Data("--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n".utf8)
        let between = Data("\r\n--b\r\nContent-Disposition: form-data; name=\"more\"\r\n\r\n".utf8)
        let tail = Data("\r\n--b--\r\n".utf8)
        let body = HTTPBody.segments([
            .bytes(head), .file(source, offset: 1_000, length: 50_000), .bytes(between),
            .file(source, offset: 0, length: 0), .file(source, offset: 90_000, length: 10_000), .bytes(tail),
        ])

        let (recorder, _) = send(body, through: inner)

        #expect(recorder.isSucceeded)
        let handed = try #require(inner.handed.first)
        guard case .file(let part, 0, let length) = handed.body else {
            Issue.record("expected a whole file, got \(handed.body)")
            return
        }
        #expect(part.deletingLastPathComponent().lastPathComponent == "parts")
        #expect(length == body.count)
        let file = try Data(contentsOf: source)
        var expected = head
        expected += file[1_000..<51_000]
        expected += between
        expected += file[90_000..<100_000]
        expected += tail
        #expect(handed.bytes == expected)
        #expect(TemporaryFolder.files(in: parts) == [], "removed once answered")
    }

    @Test func bytesInMemoryGoAsAPartFile() throws {
        defer { folder.remove() }
        let inner = AnsweringTransport()
        let document = Data(#"{"text":"hello"}"#.utf8)

        let (recorder, _) = send(.data(document), through: inner)

        #expect(recorder.isSucceeded)
        #expect(inner.handed.map(\.bytes) == [document])
        #expect(TemporaryFolder.files(in: parts) == [])
    }

    @Test func aWholeFileAndNoBodyGoAsTheyAre() throws {
        defer { folder.remove() }
        let inner = AnsweringTransport()
        let whole = HTTPBody.file(source, offset: 0, length: 100_000)

        let (first, _) = send(whole, through: inner)
        let (second, _) = send(.empty, through: inner)

        #expect(first.isSucceeded && second.isSucceeded)
        #expect(inner.handed.map(\.body) == [whole, .empty])
        #expect(!FileManager.default.fileExists(atPath: parts.path), "no part file was needed")
    }

    @Test func theStartOfAFileGoesAsAPartFileOfItsBytes() throws {
        defer { folder.remove() }
        let inner = AnsweringTransport()

        let (recorder, _) = send(.file(source, offset: 0, length: 40_000), through: inner)

        #expect(recorder.isSucceeded)
        #expect(inner.handed.map(\.bytes) == [try Data(contentsOf: source).prefix(40_000)])
        #expect(inner.handed.first.map(\.body) != .file(source, offset: 0, length: 40_000))
    }

    @Test func aPartFileThatCannotBeWrittenFailsTheRequestUnsent() throws {
        defer { folder.remove() }
        let inner = AnsweringTransport()
        // Where the part files' folder should be, a file.
        try Data("in the way".utf8).write(to: parts)

        let (recorder, _) = send(.data(Data("{}".utf8)), through: inner)

        guard case .writeFailed(let part, _)? = recorder.error as? UploadError else {
            Issue.record("expected writeFailed, got \(String(describing: recorder.error))")
            return
        }
        #expect(part.deletingLastPathComponent().lastPathComponent == "parts")
        #expect(inner.handed.isEmpty)
    }

    @Test func aFileThatShrankFailsBeforeAnythingIsSent() throws {
        defer { folder.remove() }
        let inner = AnsweringTransport()
        let body = HTTPBody.segments([.bytes(Data("h".utf8)), .file(source, offset: 60_000, length: 30_000)])
        try FileHandle(forWritingTo: source).truncate(atOffset: 70_000)

        let (recorder, _) = send(body, through: inner)

        guard case .unreadableFile(let file, let reason)? = recorder.error as? UploadError else {
            Issue.record("expected unreadableFile, got \(String(describing: recorder.error))")
            return
        }
        #expect(file == source && reason.contains("shrank from 90000 to 70000 bytes"))
        #expect(inner.handed.isEmpty)
        #expect(TemporaryFolder.files(in: parts) == [])
    }

    @Test func aMissingFileFailsAsMissing() throws {
        defer { folder.remove() }
        let inner = AnsweringTransport()
        try FileManager.default.removeItem(at: source)

        let (recorder, _) = send(
            .segments([.file(source, offset: 0, length: 10), .bytes(Data("t".utf8))]), through: inner)

        #expect(recorder.error as? UploadError == .fileNotFound(source))
        #expect(inner.handed.isEmpty)
    }

    @Test func aPartFileGoesWhenItsRequestFailsOrIsCancelled() throws {
        defer { folder.remove() }
        let failing = AnsweringTransport(answering: .failure(.network(destination, URLError(.timedOut))))
        let (failed, _) = send(.data(Data("one".utf8)), through: failing)
        #expect(failed.error as? UploadError == .network(destination, URLError(.timedOut)))
        #expect(TemporaryFolder.files(in: parts) == [])

        let silent = AnsweringTransport(answering: nil)
        let (cancelled, handle) = send(.data(Data("two".utf8)), through: silent)
        #expect(TemporaryFolder.files(in: parts).count == 1, "kept while its request runs")
        handle.cancel()
        #expect(cancelled.error is CancellationError)
        #expect(TemporaryFolder.files(in: parts) == [])
    }

    /// A transport that leaves part files to the one it sends through (a
    /// background transport's tasks may outlive their requests) removes a
    /// part file itself when its request was cancelled before it handed
    /// it on: nothing else would.
    @Test func aPartFileLeftToTheTransportSentThroughGoesWhenCancelledBeforeItWasHandedOn() throws {
        defer { folder.remove() }
        let inner = AnsweringTransport(answering: nil)
        let transport = FileBodyTransport(sendingThrough: inner, partsIn: parts, removesParts: false)
        let queue = TestQueue()
        let recorder = OutcomeRecorder()
        let handle = transport.send(
            URLRequest(url: destination), body: .data(Data("one".utf8)), destination: destination
        )
        .perform(on: queue, then: recorder.handler)
        // The part file is written; the request is not handed on yet.
        #expect(queue.runNext())
        #expect(TemporaryFolder.files(in: parts).count == 1)
        handle.cancel()
        try queue.run()
        #expect(recorder.error is CancellationError)
        #expect(inner.handed.isEmpty)
        #expect(TemporaryFolder.files(in: parts) == [], "removed, not left to a transport that never had it")

        // Handed on, it is the transport sent through's.
        let kept = transport.send(URLRequest(url: destination), body: .data(Data("two".utf8)), destination: destination)
            .perform(on: ImmediateQueue()) { _ in }
        #expect(inner.handed.count == 1)
        kept.cancel()
        #expect(TemporaryFolder.files(in: parts).count == 1, "left to the transport it was handed to")
    }
}
