import Foundation
import JobKit
import JobKitTesting
import UploadsTesting

@testable import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A transport that sends each request through another (in process, by
/// default) and records it as it goes: what an `Outbox` given it sends.
final class RecordingTransport: HTTPTransport {
    /// One request, as it was handed to the transport.
    struct Sent: Sendable, Hashable, CustomStringConvertible {
        var method: String
        var path: String
        /// Its body, and whether that was a whole file of exactly its
        /// length when it was handed over (or no body).
        var body: HTTPBody = .empty
        var bodyIsWholeFile = true

        var description: String { "\(method) \(path)" }
    }

    private let transport: any HTTPTransport
    private let log = LockedValue<[Sent]>([])

    init(sendingThrough transport: any HTTPTransport = InProcessTransport(configuration: .ephemeral)) {
        self.transport = transport
    }

    /// Every request sent so far, in the order they were sent.
    var sent: [Sent] { log.value }

    /// The files the bodies sent so far were read from.
    var bodyFiles: [URL] {
        sent.flatMap { sent in
            sent.body.segments.compactMap { if case .file(let file, _, _) = $0 { file } else { nil } }
        }
    }

    func send(_ request: HTTPRequest) -> Job<HTTPAnswer> {
        let inner = transport.send(request)
        return Job { [log] controller in
            let whole =
                request.body == .empty
                || request.body.fileFromItsStart.map { (try? Media.sizeOfReadableFile(at: $0.file)) == $0.length }
                    == true
            let sent = Sent(
                method: request.urlRequest.httpMethod ?? "GET", path: request.urlRequest.url?.path ?? "",
                body: request.body, bodyIsWholeFile: whole)
            log.withValue { $0.append(sent) }
            controller.perform(inner) { controller.complete(with: $0) }
        }
    }
}

/// Records the tasks of the background sessions it makes (the platform's,
/// ``URLSessionBackgroundSession``, in process on Linux, by default).
final class RecordingBackgroundSession: Sendable {
    /// One task, as it was started.
    struct Task: Sendable {
        var file: URL
        /// The file's size when the task started.
        var size: Int64?
    }

    /// Makes the sessions, and keeps what they record.
    final class Maker: Sendable {
        private let log = LockedValue<[Task]>([])
        private let makeSession: @Sendable (String, any BackgroundSessionEvents) throws -> any BackgroundSession
        /// Every task started so far, in order.
        var tasks: [Task] { log.value }

        /// Records the sessions `makeSession` makes: the platform's by
        /// default.
        init(
            _ makeSession: @escaping @Sendable (String, any BackgroundSessionEvents) throws -> any BackgroundSession = {
                URLSessionBackgroundSession(identifier: $0, events: $1)
            }
        ) {
            self.makeSession = makeSession
        }

        func make(_ identifier: String, _ events: any BackgroundSessionEvents) throws -> any BackgroundSession {
            HookedBackgroundSession(session: try makeSession(identifier, events)) { [log] _, file, _ in
                log.withValue { $0.append(Task(file: file, size: try? Media.sizeOfReadableFile(at: file))) }
            }
        }
    }
}

/// A background session that hands everything to another, running
/// `before` as each task is given to it and `after` once it was.
struct HookedBackgroundSession: BackgroundSession {
    let session: any BackgroundSession
    var before: @Sendable (_ request: URLRequest, _ file: URL, _ description: String) -> Void
    var after: @Sendable (_ description: String) -> Void = { _ in }

    init(
        session: any BackgroundSession,
        after: @escaping @Sendable (String) -> Void = { _ in },
        before: @escaping @Sendable (URLRequest, URL, String) -> Void
    ) {
        self.session = session
        self.before = before
        self.after = after
    }

    func upload(_ request: URLRequest, fromFile file: URL, description: String) throws {
        before(request, file, description)
        try session.upload(request, fromFile: file, description: description)
        after(description)
    }

    func cancel(description: String) -> Bool {
        session.cancel(description: description)
    }

    func getAllTasks(_ body: @escaping @Sendable ([String]) -> Void) {
        session.getAllTasks(body)
    }

    func finishTasksAndInvalidate() {
        session.finishTasksAndInvalidate()
    }
}

extension URLSessionConfiguration {
    /// A session that fails every request at once, as with no network,
    /// without sending anything: an uploader whose own session is this
    /// sends nothing but through a transport handed to it.
    static var refusingEveryRequest: URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [RefusingURLProtocol.self]
        return configuration
    }
}

/// Answers every request with `URLError(.notConnectedToInternet)`.
private final class RefusingURLProtocol: URLProtocol {
    override class func canInit(with request: URLRequest) -> Bool { true }

    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        client?.urlProtocol(self, didFailWithError: URLError(.notConnectedToInternet))
    }

    override func stopLoading() {}
}

/// A gate that admits every request at once, as an ``Outbox``'s does
/// toward an idle host, and records the bytes each said it sends.
final class RecordingGate: RequestGate {
    private let log = LockedValue<[Int64]>([])
    private let continues = LockedValue<[URL]>([])
    /// Whether each request asks the server first, as an outbox's do
    /// after a pushback.
    private let asks: Bool

    init(asksFirst: Bool = false) {
        asks = asksFirst
    }

    /// The bytes of every request admitted so far, in the order they came.
    var bytes: [Int64] { log.value }

    /// The destination of each request that asked first and was let send
    /// its body, in the order the gate was told.
    var continued: [URL] { continues.value }

    func admitting<Success: Sendable>(_ attempt: Job<Success>, toward url: URL, bytes: Int64) -> Job<Success> {
        Job { [log] controller in
            log.withValue { $0.append(bytes) }
            controller.perform(attempt) { controller.complete(with: $0) }
        }
    }

    func asksFirst(toward url: URL) -> Bool {
        asks
    }

    func continued(toward url: URL) {
        continues.withValue { $0.append(url) }
    }

    func holdLength(toward url: URL) -> Duration? {
        nil
    }
}
