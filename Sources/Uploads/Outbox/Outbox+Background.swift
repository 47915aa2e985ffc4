import Foundation
import JobKit

extension Outbox {
    /// What carries an outbox's requests: the uploader's own session, in
    /// the app's process, or a background session, whose transfers go on
    /// while the app is suspended or killed by the system.
    ///
    /// ```swift
    /// let outbox = try Outbox(
    ///     folder: applicationSupport.appendingPathComponent("outbox"), uploader: URLSessionUploader(),
    ///     transfers: .background(identifier: "com.example.app.outbox"))
    /// ```
    public struct Transfers: Sendable {
        /// Makes the session of an identifier, telling the events it is
        /// given.
        package typealias Sessions =
            @Sendable (_ identifier: String, _ events: any BackgroundSessionEvents) throws -> any BackgroundSession

        /// The identifier and what makes the session; `nil` in process.
        let background: (identifier: String, sessions: Sessions)?

        /// Each request goes by the uploader's own session, while the app
        /// runs: a suspended app's uploads wait until it runs again. The
        /// default.
        public static var inProcess: Transfers { Transfers(background: nil) }

        /// Each request with a body goes by the background `URLSession` of
        /// `identifier`, which carries its transfer on while the app is
        /// suspended, and after the system killed it. The app gives the
        /// same identifier in every launch, to one outbox at a time, and
        /// forwards the system's events for it to
        /// ``Outbox/handleBackgroundEvents(identifier:completionHandler:)``.
        ///
        /// A background session takes only a file as a task's body: every
        /// other body (a form, an S3 part, a tus chunk) is written to a
        /// part file in the outbox's folder (`transfers/`) first, removed
        /// when its task ends. Requests without a body (a tus `HEAD`, a
        /// question about a medium's processing) go in process, while the
        /// app runs.
        ///
        /// On Apple platforms the session is Apple's
        /// (`URLSessionConfiguration.background(withIdentifier:)`). Linux's
        /// Foundation has no background sessions: there an in-process
        /// session of the same identifier stands in, which ends with the
        /// process.
        public static func background(identifier: String) -> Transfers {
            background(identifier: identifier) { identifier, events in
                URLSessionBackgroundSession(identifier: identifier, events: events)
            }
        }

        /// Each request with a body goes by the background session that
        /// `sessions` makes for `identifier`: the double of the system in
        /// UploadsTesting, in tests.
        package static func background(identifier: String, sessions: @escaping Sessions) -> Transfers {
            Transfers(background: (identifier, sessions))
        }

        /// The transport of an outbox kept in `folder` whose uploads run
        /// on `queue`; `nil` for the uploaders' own.
        func transport(folder: URL, queue: any JobQueue) throws -> (any HTTPTransport)? {
            guard let (identifier, sessions) = background else { return nil }
            return try BackgroundTransport(
                identifier: identifier, partsIn: folder.appendingPathComponent("transfers", isDirectory: true),
                queue: queue, session: sessions)
        }
    }

    /// Forwards the system's events of a background session to the outbox
    /// whose transfers go by it, and calls `completionHandler` once they
    /// are in its journal: the call an app delegate makes from
    /// `application(_:handleEventsForBackgroundURLSession:completionHandler:)`.
    ///
    /// ```swift
    /// func application(
    ///     _ application: UIApplication,
    ///     handleEventsForBackgroundURLSession identifier: String,
    ///     completionHandler: @escaping () -> Void
    /// ) {
    ///     Outbox.handleBackgroundEvents(identifier: identifier, completionHandler: completionHandler)
    /// }
    /// ```
    ///
    /// The system launches or wakes the app in the background when the
    /// transfers of a session it carried on have ended. The outbox on that
    /// session (``Transfers/background(identifier:)``), whether the app
    /// opened it before this call or opens it after, hears the events its
    /// session held, records what each transfer came to, and then calls
    /// `completionHandler`, exactly once, on the main actor: the app may be
    /// suspended after it. It calls it sooner when an upload takes longer
    /// to settle (at the latest 20 seconds after the outbox took the
    /// handler) and when the outbox is closed; what it had not recorded,
    /// the next launch finds out again. A handler given before the app
    /// opened the outbox waits for it: open it in every launch.
    ///
    /// - Parameters:
    ///   - identifier: The session's identifier, as the system gives it.
    ///     Forward only those given to outboxes: a handler of another
    ///     identifier waits for an outbox of it.
    ///   - completionHandler: The system's handler.
    @MainActor
    public static func handleBackgroundEvents(identifier: String, completionHandler: @escaping () -> Void) {
        let handler = MainActorHandler(completionHandler)
        BackgroundCompletionHandlers.shared.hand({ handler.call() }, for: identifier)
    }

    /// Forwards the system's events of a background session to the outbox
    /// whose transfers go by it, and returns once they are in its journal:
    /// the asynchronous form of
    /// ``handleBackgroundEvents(identifier:completionHandler:)``, for
    /// `application(_:handleEventsForBackgroundURLSession:) async`, and
    /// for code off the main actor.
    public static func handleBackgroundEvents(identifier: String) async {
        await withCheckedContinuation { (handled: CheckedContinuation<Void, Never>) in
            BackgroundCompletionHandlers.shared.hand({ handled.resume() }, for: identifier)
        }
    }

    /// The system's completion handler, which UIKit declares neither
    /// `Sendable` nor isolated: kept, and called, on the main actor, where
    /// it was given.
    @MainActor
    private final class MainActorHandler {
        let call: () -> Void

        init(_ call: @escaping () -> Void) {
            self.call = call
        }
    }

    /// The background transport that carries the requests, if any.
    var backgroundTransport: BackgroundTransport? { transport as? BackgroundTransport }

    /// Tells the background transport, if the outbox has one, which
    /// uploads it runs, so that the completion handler of a wake waits for
    /// those a task's end concerns.
    func attachToBackgroundTransport() {
        backgroundTransport?.ownerRuns { [weak self] upload in
            self?.machine.read { $0.runsUpload(named: upload) } ?? false
        }
    }

    /// `start` came to an end, recorded: a completion handler waiting for
    /// the end of its task may be called.
    func settledInBackgroundTransport(_ start: OutboxStateMachine.Start) {
        guard let background = backgroundTransport else { return }
        machine.afterActions { background.settled(start.uploadName) }
    }
}

extension UploadAttempts {
    /// Has every request go through `transport` (the uploader's own
    /// session when `nil`). A background transport drops the time limit
    /// of an attempt: the system carries its transfers as long as they
    /// take, while the app sleeps, and the limit, whose timer stops with
    /// the suspended app, would cancel at the next wake a transfer that
    /// went on well meanwhile.
    mutating func carried(by transport: (any HTTPTransport)?) {
        self.transport = transport
        if transport is BackgroundTransport { timeout = nil }
    }
}
