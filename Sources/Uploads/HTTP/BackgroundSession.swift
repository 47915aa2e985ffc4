import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A background `URLSession` as an app sees it: Apple's
/// (``URLSessionBackgroundSession``), or the double of it in
/// UploadsTesting (`TestBackgroundSystem`). It takes upload tasks whose
/// body is a file, each named by a description that outlives the app, and
/// tells each task's events, by that description, to the
/// ``BackgroundSessionEvents`` it was made with, which it holds weakly:
/// the transfers belong to the system, not to the app's objects. A
/// session made again with the identifier of one whose app was killed is
/// told the events of its tasks that ended meanwhile.
package protocol BackgroundSession: Sendable {
    /// Starts a task that sends `request` with the bytes of `file` as its
    /// body, named `description`.
    ///
    /// - Throws: When the session refuses the task outright: the double
    ///   does for a request that carries a body of its own (bytes or a
    ///   stream), which a background session does not take, and for a
    ///   session invalidated or whose app is gone, or a description of a
    ///   task that has not ended.
    func upload(_ request: URLRequest, fromFile file: URL, description: String) throws
    /// Cancels the task named `description`, if the session has it (one
    /// it made, or listed by ``getAllTasks(_:)``); whether it had it (the
    /// task then reads its file no more).
    @discardableResult
    func cancel(description: String) -> Bool
    /// Calls `body`, on a thread of the session's, with the descriptions
    /// of the tasks the session has that have not ended: those it carried
    /// on while the app was gone too.
    func getAllTasks(_ body: @escaping @Sendable ([String]) -> Void)
    /// Gives up the session once its tasks end: they go on, and tell their
    /// events, but no task can be started after this.
    func finishTasksAndInvalidate()
}

/// What a ``BackgroundSession`` tells its owner of each task, named by its
/// description; from a thread of the session's, one event at a time.
package protocol BackgroundSessionEvents: AnyObject, Sendable {
    /// `sent` bytes of the body of `task` have gone out.
    func task(_ task: String, didSendBodyBytes sent: Int64)
    /// The server's answer to `task` went on with `data`.
    func task(_ task: String, didReceive data: Data)
    /// `task` ended, answered with `response` or failed with `error`; its
    /// body was `bodySize` bytes, as the session found its file when the
    /// task started (0 or less when it does not say).
    func task(_ task: String, didCompleteWith response: URLResponse?, error: (any Error)?, bodySize: Int64)
    /// The session told every event it held for an app the system
    /// launched or woke in the background for it
    /// (`urlSessionDidFinishEvents(forBackgroundURLSession:)`): the moment
    /// to call the handler the app delegate was given.
    func sessionDidFinishEvents()
}

/// Apple's background `URLSession`, as a ``BackgroundSession``.
///
/// `URLSessionConfiguration.background(withIdentifier:)` does not exist in
/// Linux's Foundation: there, an ephemeral, in-process session stands in,
/// with the same events by task description, so that tests here drive all
/// but Apple's daemon itself. Two things differ: the line that makes the
/// configuration, and how a task is made, which on Linux streams the file
/// (as ``InProcessTransport`` does) rather than handing it to the session,
/// as FoundationNetworking traps when an upload task from a file is
/// cancelled while it reads the file. So on Linux, as with Apple's daemon,
/// which sends a task again whole when the network returns, a request may
/// be sent again whole by the session (libcurl does when the connection it
/// reused died), whether or not it is ``HTTPRequest/resendable``.
package final class URLSessionBackgroundSession: BackgroundSession {
    private let session: URLSession
    private let delegate: Delegate

    /// Makes the session of `identifier`, telling `events` of its tasks.
    package convenience init(identifier: String, events: any BackgroundSessionEvents) {
        #if canImport(Darwin)
        let configuration = URLSessionConfiguration.background(withIdentifier: identifier)
        #else
        let configuration = URLSessionConfiguration.ephemeral
        #endif
        self.init(configuration: configuration, events: events)
    }

    /// Makes an in-process session of `configuration` that takes tasks as
    /// a background one does, telling `events` of them: what carries the
    /// transfers of the double of the system (`TestBackgroundSystem`).
    package init(configuration: URLSessionConfiguration, events: any BackgroundSessionEvents) {
        // No cache: an upload's answer has no use for one (and see
        // InProcessTransport for what one costs on Linux).
        configuration.urlCache = nil
        delegate = Delegate(events: events)
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    package func upload(_ request: URLRequest, fromFile file: URL, description: String) {
        #if canImport(FoundationNetworking)
        var request = request
        guard let size = try? Media.sizeOfReadableFile(at: file) else {
            // As a session told of a file it cannot read: the task fails,
            // and nothing is sent.
            DispatchQueue.global().async { [delegate] in
                delegate.events?.task(
                    description, didCompleteWith: nil, error: URLError(.fileDoesNotExist), bodySize: 0)
            }
            return
        }
        request.setValue(String(size), forHTTPHeaderField: "Content-Length")
        request.frameStreamedBodyByLengthAlone()
        delegate.files.withLock { $0[description] = (file, size) }
        let task = session.uploadTask(withStreamedRequest: request)
        #else
        let task = session.uploadTask(with: request, fromFile: file)
        #endif
        task.taskDescription = description
        delegate.tasks.withLock { $0[description] = task }
        task.resume()
    }

    @discardableResult
    package func cancel(description: String) -> Bool {
        guard let task = delegate.tasks.withLock({ $0[description] }) else { return false }
        task.cancel()
        return true
    }

    package func getAllTasks(_ body: @escaping @Sendable ([String]) -> Void) {
        session.getAllTasks { [delegate] tasks in
            let running = tasks.filter { $0.state != .completed }
            // The tasks an earlier launch made are this session's to
            // cancel too.
            let described = running.compactMap { task in task.taskDescription.map { ($0, task) } }
            delegate.tasks.withLock { known in known.merge(described) { made, _ in made } }
            body(described.map(\.0))
        }
    }

    package func finishTasksAndInvalidate() {
        session.finishTasksAndInvalidate()
    }

    /// Routes the session's events to its owner, by task description.
    private final class Delegate: NSObject, URLSessionDataDelegate, Sendable {
        weak let events: (any BackgroundSessionEvents)?
        /// The tasks made in this process that have not ended, by
        /// description: what ``cancel(description:)`` finds.
        let tasks = Lock<[String: URLSessionTask]>([:])
        /// The file each task's body streams from, and its size, on Linux.
        let files = Lock<[String: (file: URL, size: Int64)]>([:])

        init(events: any BackgroundSessionEvents) {
            self.events = events
        }

        func urlSession(
            _ session: URLSession,
            task: URLSessionTask,
            needNewBodyStream completionHandler: @escaping (InputStream?) -> Void
        ) {
            guard let description = task.taskDescription, let body = files.withLock({ $0[description] }) else {
                completionHandler(nil)
                return
            }
            completionHandler(BoundedFileStream(file: body.file, length: body.size))
        }

        func urlSession(
            _ session: URLSession,
            task: URLSessionTask,
            didSendBodyData bytesSent: Int64,
            totalBytesSent: Int64,
            totalBytesExpectedToSend: Int64
        ) {
            guard let description = task.taskDescription else { return }
            events?.task(description, didSendBodyBytes: totalBytesSent)
        }

        func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            guard let description = dataTask.taskDescription else { return }
            events?.task(description, didReceive: data)
        }

        func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            guard let description = task.taskDescription else { return }
            _ = tasks.withLock { $0.removeValue(forKey: description) }
            // A streamed body's size is the one the task was made with; a
            // file's, the session's.
            let streamed = files.withLock { $0.removeValue(forKey: description) }
            let bodySize = streamed?.size ?? task.countOfBytesExpectedToSend
            events?.task(description, didCompleteWith: task.response, error: error, bodySize: bodySize)
        }

        func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
            events?.sessionDidFinishEvents()
        }
    }
}
