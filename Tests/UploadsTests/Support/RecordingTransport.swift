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
        sent.compactMap { if case .file(let file, _, _, _, _) = $0.body { file } else { nil } }
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

/// A background session (the platform's, ``URLSessionBackgroundSession``,
/// in process on Linux, by default), recording the tasks it is given.
final class RecordingBackgroundSession: BackgroundSession {
    /// One task, as it was started.
    struct Task: Sendable {
        var file: URL
        /// The file's size when the task started.
        var size: Int64?
    }

    /// Makes the sessions, and keeps what they record.
    final class Maker: Sendable {
        fileprivate let log = LockedValue<[Task]>([])
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
            RecordingBackgroundSession(session: try makeSession(identifier, events), log: log)
        }
    }

    private let session: any BackgroundSession
    private let log: LockedValue<[Task]>

    private init(session: any BackgroundSession, log: LockedValue<[Task]>) {
        self.session = session
        self.log = log
    }

    func upload(_ request: URLRequest, fromFile file: URL, description: String) throws {
        let task = Task(file: file, size: try? Media.sizeOfReadableFile(at: file))
        log.withValue { $0.append(task) }
        try session.upload(request, fromFile: file, description: description)
    }

    func cancel(description: String) {
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
