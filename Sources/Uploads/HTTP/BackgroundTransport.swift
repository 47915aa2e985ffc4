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
/// its own, which the session keeps with it: the request's name in every
/// launch (``HTTPRequest/name``: an outbox's post and medium, and what the
/// request is within its upload) and a mark of its own, so that a launch
/// after the app was killed finds the tasks it left
/// (``BackgroundTaskRegistry``), and its part file is named after it.
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
    private let tasks: Tasks

    /// A transport that sends through the background session `session`
    /// makes for `identifier`, writing part files in `folder`, and sends
    /// requests with no body with `configuration`.
    ///
    /// A transport made with the identifier of one an earlier launch left
    /// finds the tasks it left (``BackgroundTaskRegistry``): a request
    /// named as one of them joins it rather than sending again.
    ///
    /// It takes the completion handler the app delegate hands
    /// ``Outbox/handleBackgroundEvents(identifier:completionHandler:)`` for
    /// `identifier`, and calls it once its owner settled the session's
    /// events (``ownerRuns(_:)``, ``settled(_:)``), or once
    /// ``BackgroundTaskRegistry/handlerTimeLimit`` passed on `queue`.
    ///
    /// - Throws: What `session` throws.
    init(
        identifier: String,
        partsIn folder: URL,
        configuration: URLSessionConfiguration = .ephemeral,
        queue: any JobQueue = DispatchQueue.global(),
        session: (_ identifier: String, _ events: any BackgroundSessionEvents) throws -> any BackgroundSession
    ) throws {
        self.identifier = identifier
        tasks = try Tasks(
            session: session, identifier: identifier, configuration: configuration, parts: folder, queue: queue)
        bodies = FileBodyTransport(sendingThrough: tasks, partsIn: folder, removesParts: false)
    }

    /// Its owner tells, with `runs`, whether it still runs the upload of a
    /// given name (``UploadAttempts/uploadName``): the completion handler
    /// does not wait for one it does not.
    func ownerRuns(_ runs: @escaping @Sendable (String) -> Bool) {
        tasks.registry.ownerRuns(runs)
    }

    /// Its owner recorded what the upload named `upload` came to.
    func settled(_ upload: String) {
        tasks.registry.settled(upload)
    }

    /// Its owner records nothing more: the completion handler it holds,
    /// if any, is called now, and a later one goes to the next transport
    /// of the identifier.
    func close() {
        tasks.close()
    }

    func send(_ request: HTTPRequest) -> Job<HTTPAnswer> {
        guard let name = request.name else {
            // Described by a name of its own, that its part file is named
            // after.
            var request = request
            request.taskDescription = UUID().uuidString
            return bodies.send(request)
        }
        return Job { [self] controller in
            let stopWaiting = tasks.registry.admit(name) { [self] admission in
                let job: Job<HTTPAnswer>
                switch admission {
                case .join(let description):
                    job = tasks.join(request, task: description)
                case .send(let description):
                    var request = request
                    request.taskDescription = description
                    job = bodies.send(request)
                }
                controller.perform(job) { controller.complete(with: $0) }
            }
            controller.onCancel(stopWaiting)
        }
    }

    /// Sends each request whose body is a whole file as a task of the
    /// session, and the others in process; the owner of the session.
    private final class Tasks: HTTPTransport {
        private let session: any BackgroundSession
        /// The requests in flight and the tasks an earlier launch left,
        /// told of the session's events; held by the session weakly.
        let registry: BackgroundTaskRegistry
        private let inProcess: InProcessTransport

        private let identifier: String

        init(
            session make: (String, any BackgroundSessionEvents) throws -> any BackgroundSession,
            identifier: String,
            configuration: URLSessionConfiguration,
            parts: URL,
            queue: any JobQueue
        ) throws {
            let registry = BackgroundTaskRegistry(parts: parts, queue: queue)
            self.registry = registry
            self.identifier = identifier
            session = try make(identifier, registry)
            inProcess = InProcessTransport(configuration: configuration)
            BackgroundCompletionHandlers.shared.attach(registry, for: identifier)
            session.getAllTasks { registry.listed($0) }
        }

        deinit {
            session.finishTasksAndInvalidate()
            close()
        }

        /// Hands no completion handler to the registry from now on, and
        /// calls the one it holds.
        func close() {
            BackgroundCompletionHandlers.shared.detach(registry, for: identifier)
            registry.close()
        }

        func send(_ request: HTTPRequest) -> Job<HTTPAnswer> {
            guard let (file, length) = request.body.fileFromItsStart else {
                // FileBodyTransport hands on whole files and empty bodies
                // only.
                if let name = request.name { registry.wentOn(name) }
                return inProcess.send(request)
            }
            return Job { [self] controller in
                let description = request.taskDescription ?? UUID().uuidString
                carry(request, size: length, by: description, file: file, controller)
                guard !controller.isCompleted else {
                    registry.removePart(of: description)
                    return
                }
                do {
                    try session.upload(request.urlRequest, fromFile: file, description: description)
                } catch {
                    registry.forget(description)
                    registry.removePart(of: description)
                    controller.fail(with: error)
                    return
                }
                // In the system's hands: the app may be suspended now.
                if let name = request.name { registry.wentOn(name) }
                // A cancel between the check and the task's start found no
                // task to cancel: cancel it now.
                if controller.isCompleted {
                    cancel(description)
                }
            }
        }

        /// Cancels the task `description`; its part file goes once the
        /// session took the cancel (a session its app lost takes none: the
        /// task goes on, and reads its file when it starts).
        private func cancel(_ description: String) {
            if session.cancel(description: description) {
                registry.removePart(of: description)
            }
        }

        /// A job that joins the task `description` an earlier launch
        /// left, carrying `request`: its progress and answer are the
        /// request's.
        func join(_ request: HTTPRequest, task description: String) -> Job<HTTPAnswer> {
            Job { [self] controller in
                let file =
                    request.body.fileFromItsStart?.file
                    ?? FileBodyTransport.partFile(for: description, in: registry.parts)
                carry(request, size: request.body.count, by: description, file: file, controller)
            }
        }

        /// Completes `controller` with what the events of the task
        /// `description` make of `request`, whose body is `size` bytes of
        /// `file`; a cancel gives the task up.
        private func carry(
            _ request: HTTPRequest,
            size: Int64,
            by description: String,
            file: URL,
            _ controller: Job<HTTPAnswer>.Controller
        ) {
            let url = request.urlRequest.url ?? request.destination
            // The request holds this object, and so the session and what
            // its events reach, until it ends or is cancelled (a task the
            // session never ends would keep them): a transport let go of
            // gives up its session once its last request ended.
            let answer = TaskAnswer(request, size: size) { [self] outcome in
                withExtendedLifetime(self) {
                    _ = controller.complete(
                        with: outcome.map { HTTPAnswer(url: url, receipt: $0.receipt, body: $0.body) })
                }
            }
            registry.start(description, answer, file: file)
            controller.onCancel { [self] in
                registry.forget(description)
                cancel(description)
            }
        }
    }
}
