import Foundation
import JobKit

/// How an ``Outbox`` sends toward each host: as one client, however many
/// of its uploads go there.
///
/// Every request of the outbox's uploads (a whole upload, or one request
/// of an uploader that retries each on its own) is admitted here first.
/// Toward each host, at most `window` requests are in flight: the
/// outbox's ``PublishOptions/maxConcurrentUploads`` at first, halved at
/// each pushback, one more at each request sent after it and stored, as
/// TCP opens and closes its window. What a request sent before the last
/// pushback says is old news, and changes nothing but its slot.
///
/// After a pushback, or a failure of the phone's network, the host is
/// probed: one request goes at a time, the smallest waiting (a tus
/// creation, a `HEAD`, a small photo rather than a video), until the
/// server takes one. The outbox starts the smallest upload it has for the
/// host first, so that its request is the first to wait. A server still
/// turning the outbox away then costs a small request, not a large one.
/// Until the window is full again, each request with a body asks the
/// server before it sends it (`Expect: 100-continue`,
/// ``asksFirst(_:)``): one turned away costs its headers alone. After a
/// failure of the phone's network, which said nothing of the server, the
/// window opens again to what it was as soon as the server lets the probe
/// send its body (``continued(_:)``), or stores it; its requests still ask
/// first until one is stored. A phone alone on an idle server then sends
/// its uploads at once, a round trip after the first.
///
/// A pushback (a `429` or `503`, or ``transientRunLimit`` transient
/// failures in a row) also holds the host: no request goes until the wait
/// is over, whichever upload it belongs to. Pushbacks in a row are a
/// streak (``Streak``), which ends when the window has been full again
/// for a grace of a quarter of the pushback delay (a pushback in it goes
/// on from the streak), and is kept in the journal. The wait
/// (``Outbox/Options/holdDelay(_:)``) is the server's `Retry-After` at the
/// start of a streak, its slot; otherwise a wait drawn below a ceiling
/// that grows with the time the streak has held the outbox: the phones a
/// server turned away together come back spread over it, and the longer
/// the backlog they are in, the wider. A failure of a phone without
/// network says nothing of the server, but the network it comes back to
/// may be everyone's: the host is probed before the rest go.
///
/// The pacer is a state machine: each event changes the hosts and returns
/// what to do once the lock is released (``Actions``). It runs nothing
/// itself: ``OutboxStateMachine`` owns it, and ``OutboxGate`` performs the
/// requests it admits and arms the holds it decides.
struct OutboxPacer: Sendable {
    /// One host as the outbox sends to it.
    private struct Host: Sendable {
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
        /// Requests waiting to go, first come first, with the bytes each
        /// sends, each told the epoch it goes in.
        var waiting: [(id: Int, bytes: Int64, go: @Sendable (Int) -> Void)] = []
        /// Whether the host is probed: after a pushback, or a failure of
        /// the phone's network, until it takes a request.
        var isProbed = false
        /// After a failure of the phone's network, until the host takes a
        /// request: the window it had then, to open to again once the
        /// server shows it takes requests (the failure said nothing of the
        /// server). A pushback ends it: its window is the pushback's.
        var windowBeforeOffline: Int?
        /// Whether the phone's network failed and the host has stored no
        /// request since: its requests ask first, even in a full window.
        var isUnconfirmed = false
        /// The end of the hold and how long it was armed to last, once
        /// armed; which hold it is.
        var release: (timer: DelayedWork, length: Duration)?
        var holdID = 0
        /// The pushbacks since its window was last full for a grace.
        var streak: Streak?
        /// The end of its streak, once its window is full again: which end
        /// it is, and the timer that ends it once armed. A pushback before
        /// it goes on from the streak.
        var streakEnd: (id: Int, timer: DelayedWork?)?
        /// Whether its last hold was for its `Retry-After`, its slot.
        var lastHoldWasSlot = false
        /// Whether the host pushed back again after a hold for its slot:
        /// its `Retry-After` is not a slot it keeps. For the outbox's
        /// life: a relaunch trusts it again, at the cost of a request.
        var breaksSlots = false

        /// The most requests in flight now: one while probed.
        var room: Int { isProbed ? 1 : window }

        /// The next waiting request to go: the smallest while probed, else
        /// the first.
        var next: Int? {
            guard isProbed else { return waiting.indices.first }
            return waiting.indices.min { waiting[$0].bytes < waiting[$1].bytes }
        }
    }

    /// The pushbacks a host gave since the outbox's window toward it was
    /// last full for a grace (halved at each pushback, one more for each
    /// request it takes after it; the grace is a quarter of the pushback
    /// delay): the longer it has turned the outbox away, the longer the
    /// backlog it is in, and the longer its next hold. Kept in
    /// the outbox's journal, so an app killed and relaunched goes on where
    /// it was.
    struct Streak: Sendable, Equatable, Codable {
        /// Pushbacks in a row.
        var pushbacks: Int
        /// The holds of those pushbacks, together: how long the host has
        /// turned the outbox away.
        var held: Duration

        private enum CodingKeys: String, CodingKey {
            case pushbacks
            case heldSeconds
        }

        init(pushbacks: Int, held: Duration) {
            self.pushbacks = pushbacks
            self.held = held
        }

        /// The most a kept streak can say: more is a file that is not
        /// one, and starts the streaks over.
        static let mostPushbacks = 10_000
        static let mostHeld = Duration.seconds(7 * 24 * 3600)

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            pushbacks = try container.decode(Int.self, forKey: .pushbacks)
            let seconds = try container.decode(Double.self, forKey: .heldSeconds)
            guard (1...Self.mostPushbacks).contains(pushbacks), seconds.isFinite,
                (0...Self.mostHeld / .seconds(1)).contains(seconds)
            else {
                throw DecodingError.dataCorrupted(
                    DecodingError.Context(codingPath: container.codingPath, debugDescription: "not a streak"))
            }
            held = .seconds(seconds)
        }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(pushbacks, forKey: .pushbacks)
            try container.encode(held / .seconds(1), forKey: .heldSeconds)
        }
    }

    /// A hold to arm: the host `key` takes no request until it ends: after
    /// the server's `Retry-After`, or a wait drawn below a ceiling that
    /// grows with the streak, whichever is longer
    /// (``Outbox/Options/holdDelay(_:)``).
    struct Hold: Sendable, Equatable {
        let key: String
        /// The server's `Retry-After`, at most the outbox's
        /// ``Outbox/Options/maxRetryAfter``.
        let asked: Duration
        /// The host's pushbacks in a row, this one included, and how long
        /// the holds before it lasted.
        let streak: Streak
        /// Whether the hold is the server's slot: the first of a streak,
        /// with a `Retry-After`, toward a host that kept its slots so far.
        var isSlot: Bool { asked > .zero && streak.pushbacks == 1 && !breaksSlots }
        /// Whether the host pushed back after a hold for its `Retry-After`.
        var breaksSlots = false
        /// Tells this hold from a later one of the host.
        let id: Int
    }

    /// The end of a host's streak, once its window has been full again for
    /// a grace (``Outbox/Options/streakGrace``).
    struct StreakEnd: Sendable, Equatable {
        let key: String
        /// Tells this end from a later one of the host.
        let id: Int
    }

    /// What is left to do once the lock is released, in this order.
    struct Actions: Sendable {
        /// The ends of holds that ended early, and of streaks a pushback
        /// went on from, to cancel.
        var timers: [DelayedWork] = []
        /// A hold to arm.
        var hold: Hold?
        /// The end of a streak to arm, after its grace.
        var streakEnd: StreakEnd?
        /// Requests admitted now, to perform.
        var requests: [@Sendable () -> Void] = []
        /// The hosts that take requests again, or more of them: the outbox
        /// starts the uploads it held back.
        var opened: [String] = []
        /// Whether a host's streak changed: the journal keeps them.
        var streaksChanged = false

        mutating func append(_ other: Actions) {
            timers += other.timers
            hold = hold ?? other.hold
            streakEnd = streakEnd ?? other.streakEnd
            requests += other.requests
            opened += other.opened
            streaksChanged = streaksChanged || other.streaksChanged
        }
    }

    /// How a request was admitted.
    enum Admission: Sendable, Equatable {
        /// At once, in this epoch: the caller performs it.
        case now(epoch: Int)
        /// Later: queued under this ticket.
        case queued(ticket: Int)
        /// Never: the outbox closed.
        case closed
    }

    /// Transient failures in a row that count as a pushback.
    static let transientRunLimit = 3

    private var hosts: [String: Host] = [:]
    private var nextTicket = 0
    private var nextStreakEnd = 0
    private(set) var isClosed = false
    private let maxWindow: Int
    /// The longest `Retry-After` the outbox obeys.
    private let maximumRetryAfter: Duration
    /// Whether a pushback that asks for no wait holds the host all the
    /// same: the pushback delay is above zero.
    private let holdsWithoutRetryAfter: Bool

    init(options: Outbox.Options) {
        maxWindow = options.publishing.maxConcurrentUploads
        maximumRetryAfter = options.maxRetryAfter
        holdsWithoutRetryAfter = options.pushbackDelay > .zero
    }

    /// The streak of each host that has one: what the journal keeps.
    var streaks: [String: Streak] {
        hosts.compactMapValues(\.streak)
    }

    /// Takes up the streaks the journal kept: the next pushback of each
    /// host goes on from its streak. The host was pushing back when the
    /// app stopped: it is probed, one request goes first, and the streak
    /// ends once its window has been full again for the grace.
    mutating func resume(_ streaks: [String: Streak]) {
        for (key, streak) in streaks {
            hosts[key, default: Host(window: 1)].streak = streak
            hosts[key]?.isProbed = true
        }
    }

    /// The key of `url`'s host: scheme, host and port.
    static func host(of url: URL) -> String {
        "\(url.scheme ?? "")://\(url.host ?? "")" + (url.port.map { ":\($0)" } ?? "")
    }

    /// Whether a new upload toward the host `key` names may start, with
    /// `running` of the outbox's uploads already going there: not while
    /// the host is held, nor beyond its window. (While it is probed, their
    /// requests go one at a time all the same.)
    func admitsUpload(toward key: String, running: Int) -> Bool {
        guard let host = hosts[key] else { return true }
        return !host.isHeld && running < host.window
    }

    /// Whether the host `key` names is probed: one request goes at a
    /// time, the smallest waiting, until it takes one.
    func isProbed(_ key: String) -> Bool {
        hosts[key]?.isProbed == true
    }

    /// Whether a request toward the host `key` names asks the server
    /// before it sends its body (`Expect: 100-continue`): while the host is
    /// probed, or its window is not full again after a pushback or a
    /// failure of the phone's network. A server that turns such a request
    /// away then costs it its headers, not its body.
    func asksFirst(_ key: String) -> Bool {
        guard let host = hosts[key] else { return false }
        return host.isProbed || host.window < maxWindow || host.isUnconfirmed
    }

    /// Whether some host is probed.
    var probesSomeHost: Bool {
        hosts.values.contains { $0.isProbed }
    }

    /// Whether the host `key` names takes no request now: it pushed back,
    /// and its wait is not over.
    func isHeld(_ key: String) -> Bool {
        hosts[key]?.isHeld == true
    }

    /// How long the hold of the host `key` names was armed to last, when
    /// the host is held (zero until it is armed); `nil` when it takes
    /// requests.
    func holdLength(_ key: String) -> Duration? {
        guard !isClosed, let host = hosts[key], host.isHeld else { return nil }
        return host.release?.length ?? .zero
    }

    // MARK: - Events

    /// A request toward `key`, sending `bytes`: admitted now, or queued
    /// until `go` is called with the epoch it goes in.
    mutating func admit(_ key: String, bytes: Int64 = 0, _ go: @escaping @Sendable (Int) -> Void) -> Admission {
        guard !isClosed else { return .closed }
        var host = hosts[key] ?? Host(window: maxWindow)
        defer { hosts[key] = host }
        if !host.isHeld, host.inFlight < host.room, host.waiting.isEmpty {
            host.inFlight += 1
            return .now(epoch: host.epoch)
        }
        defer { nextTicket += 1 }
        host.waiting.append((nextTicket, bytes, go))
        return .queued(ticket: nextTicket)
    }

    /// A queued request was cancelled: it is dropped.
    mutating func withdraw(_ key: String, ticket: Int) -> Actions {
        hosts[key]?.waiting.removeAll { $0.id == ticket }
        return Actions(requests: admitWaiting(key))
    }

    /// A request toward `key`, admitted in `epoch`, ended: it succeeded
    /// (`failure` is `nil`) or failed as `failure` says.
    mutating func ended(_ key: String, failure: UploadFailure?, epoch: Int) -> Actions {
        // Closed: nothing is decided, nor kept, any more.
        guard !isClosed, var host = hosts[key] else { return Actions() }
        host.inFlight -= 1
        let window = host.window
        var hold: Hold?
        var streakEnd: StreakEnd?
        let streak = host.streak
        // Sent before the last pushback: old news, its slot aside.
        let heard = epoch == host.epoch ? failure : .cancelled
        switch heard {
        case nil:
            host.transientRun = 0
            host.isProbed = false
            host.isUnconfirmed = false
            host.window = min(maxWindow, max(host.window + 1, host.windowBeforeOffline ?? 0))
            host.windowBeforeOffline = nil
            if host.window == maxWindow {
                // Its window, halved at each pushback, is full again: a
                // pushback now does not say its slots fail, and once the
                // grace is over, the backlog it was in is. (Ended at once,
                // a full window taken in the middle of a backlog, a burst
                // the server had room for, started the next pushback's
                // streak over, at the server's word: a phone came back
                // twice within the minute.)
                host.lastHoldWasSlot = false
                if host.streak != nil && host.streakEnd == nil {
                    if holdsWithoutRetryAfter {
                        nextStreakEnd += 1
                        host.streakEnd = (nextStreakEnd, nil)
                        streakEnd = StreakEnd(key: key, id: nextStreakEnd)
                    } else {
                        host.streak = nil
                    }
                }
            }
        case .offline:
            // Says nothing of the server, but the network it comes back
            // to may be everyone's: one request probes it, and the
            // window opens again to what it was once the server shows
            // it takes requests.
            if host.windowBeforeOffline == nil { host.windowBeforeOffline = host.window }
            host.window = 1
            host.isProbed = true
            host.isUnconfirmed = true
        case .pushback(let asked):
            hold = pushBack(key, &host, asking: asked, forFailures: false)
        case .transient:
            host.transientRun += 1
            if host.transientRun >= Self.transientRunLimit {
                host.transientRun = 0
                hold = pushBack(key, &host, asking: nil, forFailures: true)
            }
        case .permanent:
            // An answer, not about load (a 404): ends a run. Not a probe:
            // the server took nothing (and the failure may be the
            // phone's own, a file gone).
            host.transientRun = 0
        case .cancelled:
            break
        }
        // A pushback in the grace goes on from the streak: the end goes.
        var timers: [DelayedWork] = []
        if hold != nil, let end = host.streakEnd {
            host.streakEnd = nil
            if let timer = end.timer { timers.append(timer) }
        }
        hosts[key] = host
        // A window that opened takes an upload the outbox held back.
        let opens = host.window > window && !host.isHeld
        // A hold is kept once armed, with its length.
        return Actions(
            timers: timers, hold: hold, streakEnd: streakEnd, requests: admitWaiting(key), opened: opens ? [key] : [],
            streaksChanged: hold == nil && host.streak != streak)
    }

    /// A request toward `key` that asked first was let send its body (the
    /// server's `100 Continue`): a host probed after a failure of the
    /// phone's network takes requests, and its window opens again to what
    /// it was. Its requests still ask first until one is stored.
    mutating func continued(_ key: String) -> Actions {
        guard !isClosed, var host = hosts[key], host.isProbed, !host.isHeld,
            let window = host.windowBeforeOffline
        else { return Actions() }
        host.isProbed = false
        host.window = max(host.window, window)
        host.windowBeforeOffline = nil
        hosts[key] = host
        return Actions(requests: admitWaiting(key), opened: [key])
    }

    /// The end of `end`'s streak was armed: `timer` ends it. `false` when
    /// it is not wanted any more (a pushback went on from the streak, or
    /// the outbox closed): cancel `timer`.
    mutating func armed(_ end: StreakEnd, until timer: DelayedWork) -> Bool {
        guard !isClosed, hosts[end.key]?.streakEnd?.id == end.id else { return false }
        hosts[end.key]?.streakEnd?.timer = timer
        return true
    }

    /// The grace of `end` is over, if it is still the one: the host's
    /// streak ends.
    mutating func streakEnded(_ end: StreakEnd) -> Actions {
        guard !isClosed, hosts[end.key]?.streakEnd?.id == end.id else { return Actions() }
        hosts[end.key]?.streakEnd = nil
        hosts[end.key]?.streak = nil
        return Actions(streaksChanged: true)
    }

    /// `hold` was armed, to last `duration`: `release` ends it. `false`
    /// when the hold is over already (or the outbox closed): cancel
    /// `release`. The host's streak counts the hold's duration.
    mutating func armed(_ hold: Hold, lasting duration: Duration, until release: DelayedWork) -> Bool {
        guard !isClosed, hosts[hold.key]?.isHeld == true, hosts[hold.key]?.holdID == hold.id else { return false }
        hosts[hold.key]?.release = (release, duration)
        let held = min(hold.streak.held + duration, Streak.mostHeld)
        hosts[hold.key]?.streak = Streak(pushbacks: hold.streak.pushbacks, held: held)
        return true
    }

    /// Hold `id` of `key` ended, if it is still the one: the waiting
    /// requests and uploads go.
    mutating func holdEnded(_ key: String, id: Int) -> Actions {
        guard !isClosed, hosts[key]?.isHeld == true, hosts[key]?.holdID == id else { return Actions() }
        var actions = Actions()
        // Ended early, by a new network: its timer goes.
        if let timer = hosts[key]?.release?.timer { actions.timers.append(timer) }
        hosts[key]?.isHeld = false
        hosts[key]?.release = nil
        actions.requests = admitWaiting(key)
        actions.opened = [key]
        return actions
    }

    /// The phone's network changed: the holds that runs of transient
    /// failures started end, since those may have been the network's. A
    /// server's `429` or `503` still holds.
    mutating func networkChanged() -> Actions {
        let held = hosts.compactMap { key, host in host.isHeld && host.isHeldForFailures ? (key, host.holdID) : nil }
        var actions = Actions()
        for (key, id) in held { actions.append(holdEnded(key, id: id)) }
        return actions
    }

    /// The outbox closed: no request goes any more, and every hold's
    /// timer is to cancel.
    mutating func close() -> Actions {
        isClosed = true
        return Actions(
            timers: hosts.values.compactMap(\.release?.timer) + hosts.values.compactMap { $0.streakEnd?.timer })
    }

    // MARK: - Decisions

    /// Halves the window and holds the host, unless it is held already;
    /// returns the hold to arm. (The requests in flight when it pushed
    /// back belong to the epoch before, and say nothing.) A server that
    /// asks for no wait, when the pushback delay is zero, is not held:
    /// the post waits for the network instead, as after any failure.
    private func pushBack(_ key: String, _ host: inout Host, asking asked: Duration?, forFailures: Bool) -> Hold? {
        guard !host.isHeld else { return nil }
        host.windowBeforeOffline = nil
        host.window = max(1, host.window / 2)
        host.epoch += 1
        host.isProbed = true
        let asked = min(asked ?? .zero, maximumRetryAfter)
        guard asked > .zero || holdsWithoutRetryAfter else { return nil }
        host.isHeld = true
        host.isHeldForFailures = forFailures
        host.holdID += 1
        // Counted now; its duration once drawn and armed.
        let streak = Streak(
            pushbacks: min((host.streak?.pushbacks ?? 0) + 1, Streak.mostPushbacks), held: host.streak?.held ?? .zero)
        // Turned away again after a hold for its slot: its slots do not
        // hold, and its word alone no longer holds the outbox.
        if host.lastHoldWasSlot { host.breaksSlots = true }
        host.streak = streak
        let hold = Hold(key: key, asked: asked, streak: streak, breaksSlots: host.breaksSlots, id: host.holdID)
        host.lastHoldWasSlot = hold.isSlot
        return hold
    }

    /// Admits the waiting requests the host `key` takes now; marks them
    /// in flight, and returns them to perform after the lock. None once
    /// closed.
    private mutating func admitWaiting(_ key: String) -> [@Sendable () -> Void] {
        guard !isClosed, var host = hosts[key], !host.isHeld else { return [] }
        var go: [@Sendable () -> Void] = []
        while host.inFlight < host.room, let next = host.next {
            let request = host.waiting.remove(at: next).go
            let epoch = host.epoch
            go.append { request(epoch) }
            host.inFlight += 1
        }
        hosts[key] = host
        return go
    }
}
