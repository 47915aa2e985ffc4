import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends requests as a background `URLSession` takes them, so that their
/// transfers go on while the app is suspended: each request with a body is
/// an upload task of a ``BackgroundSession``, its body a whole file (every
/// other body written to a part file first, see ``FileBodyTransport``), and
/// its answer read from the session's events, with the errors an
/// in-process session gives.
///
/// A background session takes only tasks whose body is a file (and
/// downloads): a request with no body (a `HEAD`, an `OPTIONS`, a question
/// about a medium's processing) goes through an in-process session, which
/// sends only while the app runs. Each task is named by a description of
/// its own, which the session keeps with it.
///
/// What a background session does that an in-process one does not: it may
/// send a request again whole by itself (when the network returns), so a
/// request that is not ``HTTPRequest/resendable`` (a tus `PATCH`) can reach
/// the server twice, which the server answers `409` and the tus upload
/// asks it its offset; and it may defer a task it was given while the app
/// is in the background.
final class BackgroundTransport: HTTPTransport {
    /// The identifier of the session.
    let identifier: String
    /// Makes every body a whole file, then hands it to ``Tasks``.
    private let bodies: FileBodyTransport

    /// A transport that sends through the background session `session`
    /// makes for `identifier`, writing part files in `folder`, and sends
    /// requests with no body with `configuration`.
    ///
    /// - Throws: What `session` throws.
    init(
        identifier: String,
        partsIn folder: URL,
        configuration: URLSessionConfiguration = .ephemeral,
        session: (_ identifier: String, _ events: any BackgroundSessionEvents) throws -> any BackgroundSession
    ) throws {
        self.identifier = identifier
        let tasks = try Tasks(session: session, identifier: identifier, configuration: configuration)
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
            session make: (String, any BackgroundSessionEvents) throws -> any BackgroundSession,
            identifier: String,
            configuration: URLSessionConfiguration
        ) throws {
            session = try make(identifier, running)
            inProcess = InProcessTransport(configuration: configuration)
        }

        deinit {
            session.finishTasksAndInvalidate()
        }

        func send(_ request: HTTPRequest) -> Job<HTTPAnswer> {
            guard let (file, length) = request.body.fileFromItsStart else {
                // FileBodyTransport hands on whole files and empty bodies
                // only.
                return inProcess.send(request)
            }
            return Job { [self] controller in
                let description = UUID().uuidString
                let url = request.urlRequest.url ?? request.destination
                // The request holds this object, and so the session and
                // what its events reach, until it ends or is cancelled (a
                // task the session never ends would keep them): a
                // transport let go of gives up its session once its last
                // request ended.
                let answer = TaskAnswer(request, size: length) { [self] outcome in
                    withExtendedLifetime(self) {
                        _ = controller.complete(
                            with: outcome.map { HTTPAnswer(url: url, receipt: $0.receipt, body: $0.body) })
                    }
                }
                running.start(description, answer, file: file)
                controller.onCancel { [running, session] in
                    running.forget(description)
                    session.cancel(description: description)
                }
                guard !controller.isCompleted else { return }
                do {
                    try session.upload(request.urlRequest, fromFile: file, description: description)
                } catch {
                    running.forget(description)
                    controller.fail(with: error)
                    return
                }
                // A cancel between the check and the task's start found no
                // task to cancel: cancel it now.
                if controller.isCompleted {
                    session.cancel(description: description)
                }
            }
        }
    }

    /// The requests in flight, by their tasks' descriptions: what the
    /// session's events reach.
    private final class Running: BackgroundSessionEvents {
        private struct Request: Sendable {
            var answer: TaskAnswer
            /// The body's file.
            var file: URL
        }

        private let requests = Lock<[String: Request]>([:])

        /// Routes the events of the task `description` to `answer`, whose
        /// body is `file`.
        func start(_ description: String, _ answer: TaskAnswer, file: URL) {
            requests.withLock { $0[description] = Request(answer: answer, file: file) }
        }

        /// Drops `description`: its events no longer matter.
        func forget(_ description: String) {
            _ = requests.withLock { $0.removeValue(forKey: description) }
        }

        func task(_ task: String, didSendBodyBytes sent: Int64) {
            requests.withLock { $0[task] }?.answer.sent(sent)
        }

        func task(_ task: String, didReceive data: Data) {
            requests.withLock { $0[task]?.answer.received(data) }
        }

        func task(_ task: String, didCompleteWith response: URLResponse?, error: (any Error)?, bodySize: Int64) {
            guard let request = requests.withLock({ $0.removeValue(forKey: task) }) else { return }
            let size = request.answer.size
            if bodySize > 0, bodySize != size {
                // The session read the file as it was when the task
                // started, not as the request was made.
                let reason = "it changed from \(size) to \(bodySize) bytes before it was sent"
                request.answer.complete(.failure(.unreadableFile(request.file, reason: reason)))
                return
            }
            // A body file that went missing or shrank fails its task: say
            // so, rather than what the session says.
            let fileFailure = error == nil ? nil : BoundedFileStream.failure(of: request.file, upTo: size)
            request.answer.ended(response: response, error: error, fileFailure: fileFailure)
        }

        /// Nothing here waits for it: the handler an app delegate is given
        /// is not the transport's.
        func sessionDidFinishEvents() {}
    }
}
