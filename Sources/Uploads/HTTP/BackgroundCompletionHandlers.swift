import Foundation
import JobKit

/// The completion handlers the system gives an app for its background
/// sessions (`application(_:handleEventsForBackgroundURLSession:completionHandler:)`),
/// each handed to the ``BackgroundTaskRegistry`` of the session of its
/// identifier, which calls it: at once when the registry is there, or when
/// a transport makes it (the app may make its outbox after the handler
/// came).
final class BackgroundCompletionHandlers: Sendable {
    private struct Entry {
        /// A handler that came while no registry of the identifier was
        /// there.
        var handler: (@MainActor () -> Void)?
        weak var registry: BackgroundTaskRegistry?
    }

    /// The app's.
    static let shared = BackgroundCompletionHandlers()

    private let entries = Lock<[String: Entry]>([:])

    /// Hands `handler` to the registry of `identifier`, or keeps it for
    /// the next one made.
    func hand(_ handler: @escaping @MainActor () -> Void, for identifier: String) {
        let (registry, earlier) = entries.withLock { entries -> (BackgroundTaskRegistry?, (@MainActor () -> Void)?) in
            if let registry = entries[identifier]?.registry { return (registry, nil) }
            let earlier = entries[identifier]?.handler
            entries[identifier] = Entry(handler: handler)
            return (nil, earlier)
        }
        // The system gave a new one: the one it gave before is done with.
        if let earlier { Task { @MainActor in earlier() } }
        registry?.hold(handler)
    }

    /// `registry` carries the events of the session of `identifier` from
    /// now on: it takes the handler that waits for it, if any.
    func attach(_ registry: BackgroundTaskRegistry, for identifier: String) {
        let handler = entries.withLock { entries in
            defer { entries[identifier] = Entry(registry: registry) }
            return entries[identifier]?.handler
        }
        if let handler { registry.hold(handler) }
    }

    /// `registry` carries the events of `identifier` no more.
    func detach(_ registry: BackgroundTaskRegistry, for identifier: String) {
        entries.withLock { entries in
            if let attached = entries[identifier], attached.registry === registry || attached.registry == nil,
                attached.handler == nil
            {
                entries[identifier] = nil
            }
        }
    }
}
