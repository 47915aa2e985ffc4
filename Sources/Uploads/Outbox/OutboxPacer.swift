import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How an ``Outbox`` sends toward each host: as one client, however many
/// of its uploads go there.
///
/// Every request of the outbox's uploads (a whole upload, or one request
/// of an uploader that retries each on its own) is admitted here first.
/// Toward each host, at most `window` requests are in flight: the
/// outbox's ``Outbox/Options/maxConcurrentUploads`` at first, halved at
/// each pushback, one more at each request sent after it and stored, as
/// TCP opens and closes its window. What a request sent before the last
/// pushback says is old news, and changes nothing but its slot.
///
/// A pushback (a `429` or `503`, or ``transientRunLimit`` transient
/// failures in a row) also holds the host: no request goes until the wait
/// is over, whichever upload it belongs to. The wait is the server's `Retry-After` (at most the retry policy's
/// ``RetryPolicy/maximumRetryAfter``) plus a wait drawn at random below
/// ``Outbox/Options/pushbackDelay``: the phones a server turned away
/// together come back spread over it. A failure of a phone without
/// network says nothing of the server, but the network it comes back to
/// may be everyone's: the window closes to one request, which probes the
/// server before the rest go.
final class OutboxPacer: RequestGate {
    /// One host as the outbox sends to it.
    private struct Host {
        /// The most requests in flight toward it.
        var window: Int
        var inFlight = 0
        /// Counts the pushbacks: a request admitted before the last one
        /// does not open the window again when it is stored.
        var epoch = 0
        /// No request goes while held.
        var isHeld = false
        /// Whether the hold came from a run of transient failures, which a
        /// new network may end, rather than from the server's answer.
        var isHeldForFailures = false
        /// Transient failures in a row.
        var transientRun = 0
        /// Requests waiting to go, first come first, each told the epoch
        /// it goes in.
        var waiting: [(id: Int, go: @Sendable (Int) -> Void)] = []
        /// The end of the hold, and which hold it ends.
        var release: DelayedWork?
        var holdID = 0
    }

    private struct State {
        var hosts: [String: Host] = [:]
        var nextID = 0
        var isClosed = false
    }

    /// Transient failures in a row that count as a pushback.
    static let transientRunLimit = 3

    private let state = Lock(State())
    private let maxWindow: Int
    private let queue: any JobQueue
    private let retry: RetryPolicy
    private let pushbackDelay: Duration
    /// Called, outside the lock, with a host's key when it takes requests
    /// again: the outbox starts the uploads it held back.
    private let opened = Lock<(@Sendable (String) -> Void)?>(nil)

    init(options: Outbox.Options, queue: any JobQueue) {
        maxWindow = options.maxConcurrentUploads
        self.queue = queue
        retry = options.retry
        pushbackDelay = options.pushbackDelay
    }

    /// Calls `opened` with a host's key whenever it takes requests again.
    func whenOpened(_ opened: @escaping @Sendable (String) -> Void) {
        self.opened.withLock { $0 = opened }
    }

    /// The key of `url`'s host: scheme, host and port.
    static func host(of url: URL) -> String {
        "\(url.scheme ?? "")://\(url.host ?? "")" + (url.port.map { ":\($0)" } ?? "")
    }

    /// Whether a new upload toward the host `key` names may start, with
    /// `running` of the outbox's uploads already going there: not while
    /// the host is held, nor beyond its window.
    func admitsUpload(toward key: String, running: Int) -> Bool {
        state.withLock { state in
            guard let host = state.hosts[key] else { return true }
            return !host.isHeld && running < host.window
        }
    }

    /// Whether `url`'s host takes no request now: it pushed back, and its
    /// wait is not over.
    func isHeld(_ url: URL) -> Bool {
        state.withLock { $0.hosts[Self.host(of: url)]?.isHeld == true }
    }

    /// A job that performs `attempt`, one request toward `url`'s host, once
    /// the host admits it, and learns from what its failure means
    /// (``UploadFailure``).
    func admitting<Success: Sendable>(_ attempt: Job<Success>, toward url: URL) -> Job<Success> {
        let key = Self.host(of: url)
        return Job { [self] controller in
            let admitted = Lock(false)
            let go: @Sendable (Int) -> Void = { [self] epoch in
                admitted.withLock { $0 = true }
                guard !controller.isCompleted else { return done(key, failure: .cancelled, epoch: epoch) }
                controller.perform(attempt) { [self] outcome in
                    let failure: UploadFailure? =
                        switch outcome {
                        case .success: nil
                        case .failure(let error): UploadFailure(error)
                        }
                    done(key, failure: failure, epoch: epoch)
                    controller.complete(with: outcome)
                }
            }
            switch admit(key, go) {
            case .closed:
                controller.fail(with: CancellationError())
            case .now(let epoch):
                go(epoch)
            case .queued(let id):
                controller.onCancel { [self] in
                    if !admitted.withLock({ $0 }) { withdraw(key, id) }
                }
            }
        }
    }

    /// How a request was admitted.
    private enum Admission {
        /// At once, in this epoch: the caller runs it.
        case now(Int)
        /// Later: queued under this ticket.
        case queued(Int)
        /// Never: the outbox closed.
        case closed
    }

    /// Admits a request toward `key` now, or queues `go`.
    private func admit(_ key: String, _ go: @escaping @Sendable (Int) -> Void) -> Admission {
        state.withLock { state in
            guard !state.isClosed else { return .closed }
            var host = state.hosts[key] ?? Host(window: maxWindow)
            defer { state.hosts[key] = host }
            if !host.isHeld, host.inFlight < host.window, host.waiting.isEmpty {
                host.inFlight += 1
                return .now(host.epoch)
            }
            defer { state.nextID += 1 }
            host.waiting.append((state.nextID, go))
            return .queued(state.nextID)
        }
    }

    /// Drops a queued request that was cancelled.
    private func withdraw(_ key: String, _ id: Int) {
        let go = state.withLock { state -> [@Sendable () -> Void] in
            state.hosts[key]?.waiting.removeAll { $0.id == id }
            return Self.admitWaiting(key, in: &state)
        }
        for request in go { request() }
    }

    /// Ends a request toward `key`, admitted in `epoch`, that succeeded
    /// (`failure` is `nil`) or failed as `failure` says.
    private func done(_ key: String, failure: UploadFailure?, epoch: Int) {
        let (go, hold, opens) = state.withLock {
            state -> ([@Sendable () -> Void], (wait: Duration, id: Int)?, Bool) in
            guard var host = state.hosts[key] else { return ([], nil, false) }
            host.inFlight -= 1
            let window = host.window
            var hold: (wait: Duration, id: Int)?
            // Sent before the last pushback: old news, its slot aside.
            let heard = epoch == host.epoch ? failure : .cancelled
            switch heard {
            case nil:
                host.transientRun = 0
                host.window = min(maxWindow, host.window + 1)
            case .offline:
                // Says nothing of the server, but the network it comes back
                // to may be everyone's: one request probes it.
                host.window = 1
            case .pushback(let asked):
                hold = pushBack(&host, asking: asked, forFailures: false)
            case .transient:
                host.transientRun += 1
                if host.transientRun >= Self.transientRunLimit {
                    host.transientRun = 0
                    hold = pushBack(&host, asking: nil, forFailures: true)
                }
            case .permanent:
                // An answer, not about load (a 404): ends a run.
                host.transientRun = 0
            case .cancelled:
                break
            }
            if state.isClosed { hold = nil }
            state.hosts[key] = host
            return (Self.admitWaiting(key, in: &state), hold, host.window > window && !host.isHeld)
        }
        if let hold { self.hold(key, for: hold.wait, id: hold.id) }
        for request in go { request() }
        // A window that opened takes an upload the outbox held back.
        if opens { opened.withLock { $0 }?(key) }
    }

    /// Halves the window and holds the host, unless it is held already;
    /// returns the wait, and the hold's ticket. (The requests in flight
    /// when it pushed back belong to the epoch before, and say nothing.)
    /// A server that asks for no wait, when the pushback delay is zero, is
    /// not held: the post waits for the network instead, as after any
    /// failure.
    private func pushBack(
        _ host: inout Host, asking asked: Duration?, forFailures: Bool
    ) -> (wait: Duration, id: Int)? {
        guard !host.isHeld else { return nil }
        host.window = max(1, host.window / 2)
        host.epoch += 1
        let asked = min(asked ?? .zero, retry.maximumRetryAfter)
        guard asked > .zero || pushbackDelay > .zero else { return nil }
        host.isHeld = true
        host.isHeldForFailures = forFailures
        host.holdID += 1
        return (asked, host.holdID)
    }

    /// Holds `key` for `asked` and a wait drawn below the pushback delay,
    /// drawn outside the lock, since the generator is the app's.
    private func hold(_ key: String, for asked: Duration, id: Int) {
        let release = queue.enqueue(after: asked + pushbackDelay * retry.jitter()) { [self] in
            self.release(key, id: id)
        }
        let kept = state.withLock { state in
            guard !state.isClosed, state.hosts[key]?.isHeld == true, state.hosts[key]?.holdID == id else {
                return false
            }
            state.hosts[key]?.release = release
            return true
        }
        if !kept { release.cancel() }
    }

    /// Ends hold `id` of `key`, if it is still the one; lets the waiting
    /// requests and uploads go.
    private func release(_ key: String, id: Int) {
        let ended = state.withLock { state -> (go: [@Sendable () -> Void], timer: DelayedWork?)? in
            guard !state.isClosed, state.hosts[key]?.isHeld == true, state.hosts[key]?.holdID == id else {
                return nil
            }
            let timer = state.hosts[key]?.release
            state.hosts[key]?.isHeld = false
            state.hosts[key]?.release = nil
            return (Self.admitWaiting(key, in: &state), timer)
        }
        guard let (go, timer) = ended else { return }
        timer?.cancel()  // ended early, by a new network
        for request in go { request() }
        opened.withLock { $0 }?(key)
    }

    /// Ends the holds that runs of transient failures started: those may
    /// have been the phone's network, which changed. A server's `429` or
    /// `503` still holds.
    func networkChanged() {
        let held = state.withLock { state in
            state.hosts.compactMap { key, host in
                host.isHeld && host.isHeldForFailures ? (key, host.holdID) : nil
            }
        }
        for (key, id) in held { release(key, id: id) }
    }

    /// Admits the waiting requests the host takes now; marks them in
    /// flight, and returns them to run after the lock. None once closed.
    private static func admitWaiting(_ key: String, in state: inout State) -> [@Sendable () -> Void] {
        guard !state.isClosed, var host = state.hosts[key], !host.isHeld else { return [] }
        var go: [@Sendable () -> Void] = []
        while host.inFlight < host.window, !host.waiting.isEmpty {
            let request = host.waiting.removeFirst().go
            let epoch = host.epoch
            go.append { request(epoch) }
            host.inFlight += 1
        }
        state.hosts[key] = host
        return go
    }

    /// Cancels every hold: the outbox closed.
    func close() {
        let releases = state.withLock { state -> [DelayedWork] in
            state.isClosed = true
            return state.hosts.values.compactMap(\.release)
        }
        for release in releases { release.cancel() }
    }
}
