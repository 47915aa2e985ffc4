import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends requests as a background `URLSession` takes them, so that their
/// transfers go on while the app is suspended: each request with a body is
/// an upload task of a ``BackgroundSession``, its body a whole file (every
/// other body written to a part file first, see ``FileBodyTransport``), and
/// its answer read from the session's events; a request with no body (a
/// `HEAD`, an `OPTIONS`, a question about a medium's processing) goes
/// through an in-process session, as it takes no time to send.
///
/// Each task is named by a description of its own, which the session
/// keeps with the task.
final class BackgroundTransport: HTTPTransport {
    /// The identifier of the session.
    let identifier: String
    /// Makes every body a whole file, then hands it to ``tasks``.
    private let bodies: FileBodyTransport

    /// A transport that sends through the background session `session`
    /// makes for `identifier`, writing part files in `folder`, and sends
    /// requests with no body with `configuration`.
    init(
        identifier: String,
        partsIn folder: URL,
        configuration: URLSessionConfiguration = .ephemeral,
        session: (_ identifier: String, _ events: any BackgroundSessionEvents) -> any BackgroundSession
    ) {
        self.identifier = identifier
        let tasks = Tasks(session: session, identifier: identifier, configuration: configuration)
        bodies = FileBodyTransport(sendingThrough: tasks, partsIn: folder)
    }

    func send(_ request: HTTPRequest) -> Job<HTTPAnswer> {
        bodies.send(request)
    }

    /// Sends each request whose body is a whole file as a task of the
    /// session, and the others in process; the owner of the session.
    private final class Tasks: HTTPTransport {
        private let session: any BackgroundSession
        /// The requests in flight, told of the session's events; held by
        /// the session weakly.
        private let running = Running()
        private let inProcess: InProcessTransport

        init(
            session make: (String, any BackgroundSessionEvents) -> any BackgroundSession,
            identifier: String,
            configuration: URLSessionConfiguration
        ) {
            session = make(identifier, running)
            inProcess = InProcessTransport(configuration: configuration)
        }

        deinit {
            session.finishTasksAndInvalidate()
        }

        func send(_ request: HTTPRequest) -> Job<HTTPAnswer> {
            guard case .file(let file, 0, let length, let head, let tail) = request.body, head.isEmpty, tail.isEmpty
            else {
                // FileBodyTransport hands on whole files and empty bodies
                // only.
                return inProcess.send(request)
            }
            return Job { [self] controller in
                let description = UUID().uuidString
                let url = request.urlRequest.url ?? request.destination
                // The request holds this object, and so the session and
                // what its events reach, until it ends: a transport let go
                // of gives up its session once its last request ended.
                running.start(description, request, file: file, size: length) { [self] outcome in
                    withExtendedLifetime(self) {
                        _ = controller.complete(
                            with: outcome.map { HTTPAnswer(url: url, receipt: $0.receipt, body: $0.body) })
                    }
                }
                controller.onCancel { [running, session] in
                    running.forget(description)
                    session.cancel(description: description)
                }
                if !controller.isCompleted {
                    session.upload(request.urlRequest, fromFile: file, description: description)
                }
            }
        }
    }

    /// The requests in flight, by their tasks' descriptions: what the
    /// session's events reach.
    private final class Running: BackgroundSessionEvents {
        private struct Request: Sendable {
            var destination: URL
            var file: URL
            var size: Int64
            var answerLimit: Int
            var progress: @Sendable (UploadProgress) -> Void
            var complete: @Sendable (Result<(receipt: UploadReceipt, body: Data), UploadError>) -> Void
            /// The start of the server's answer, up to `answerLimit` bytes.
            var answer = Data()
        }

        private let requests = Lock<[String: Request]>([:])

        /// Routes the events of the task `description` to `request`, whose
        /// body is `size` bytes of `file`.
        func start(
            _ description: String,
            _ request: HTTPRequest,
            file: URL,
            size: Int64,
            complete: @escaping @Sendable (Result<(receipt: UploadReceipt, body: Data), UploadError>) -> Void
        ) {
            let running = Request(
                destination: request.destination, file: file, size: size, answerLimit: request.answerLimit,
                progress: request.progress, complete: complete)
            requests.withLock { $0[description] = running }
        }

        /// Drops `description`: its events no longer matter.
        func forget(_ description: String) {
            _ = requests.withLock { $0.removeValue(forKey: description) }
        }

        func task(_ task: String, didSendBodyBytes sent: Int64, of expected: Int64) {
            guard let request = requests.withLock({ $0[task] }) else { return }
            request.progress(UploadProgress(bytesSent: min(sent, request.size), bytesTotal: request.size))
        }

        func task(_ task: String, didReceive data: Data) {
            requests.withLock { requests in
                guard var request = requests[task] else { return }
                let room = request.answerLimit - request.answer.count
                guard room > 0 else { return }
                request.answer.append(data.prefix(room))
                requests[task] = request
            }
        }

        func task(_ task: String, didCompleteWith response: URLResponse?, error: (any Error)?) {
            guard let request = requests.withLock({ $0.removeValue(forKey: task) }) else { return }
            if let error {
                // A body file that went missing or shrank fails its task:
                // say so, rather than what the session says.
                if let failure = BoundedFileStream.failure(of: request.file, upTo: request.size) {
                    request.complete(.failure(failure))
                } else {
                    let urlError = URLSessionUploadDelegate.urlError(error, answered: response != nil)
                    request.complete(.failure(.network(request.destination, urlError)))
                }
                return
            }
            switch UploadReceipt.reading(response, body: request.answer, destination: request.destination) {
            case .success(let receipt):
                request.progress(UploadProgress(bytesSent: request.size, bytesTotal: request.size))
                request.complete(.success((receipt, request.answer)))
            case .failure(let error):
                request.complete(.failure(error))
            }
        }
    }
}
