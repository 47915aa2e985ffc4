import Foundation
import JobKit

/// What the machine hands its owner: the work an event leaves to do after
/// the lock.
extension OutboxStateMachine {
    /// What the thread that made a change does once the lock is released,
    /// in this order.
    struct Actions: Sendable {
        /// Uploads, tries and holds to cancel.
        var cancels: [@Sendable () -> Void] = []
        /// Sequences of changes to end: the outbox closed.
        var finishes: [AsyncStream<[Outbox.Entry]>.Continuation] = []
        /// Media whose resumable uploads to discard: their post was
        /// removed.
        var discards: [Media] = []
        /// Timers to arm, each then handed back
        /// (``armed(_:lasting:until:)``).
        var timers: [Timer] = []
        /// Requests the pacer admitted, to perform.
        var requests: [@Sendable () -> Void] = []
        /// Uploads to start.
        var starts: [Start] = []
        /// How the uploads that may go now are started, once the writes
        /// decided so far are made.
        var pump: Pump?
    }

    /// How the uploads that may go now are started.
    enum Pump: Sendable {
        /// From the queue: the posts changed in one go start in priority
        /// order, whatever order they changed in.
        case scheduled
        /// At once.
        case now
    }

    /// A wait the machine asks for, and what its end is.
    enum Timer: Sendable, Equatable {
        /// The try of the post to this destination after its `waits`-th
        /// wait in a row for the network.
        case wake(URL, waits: Int)
        /// The try of every waiting post after the network changed.
        case notice(generation: Int)
        /// The end of a host's hold.
        case hold(OutboxPacer.Hold)
        /// The end of a host's streak, its window full again.
        case streakEnd(OutboxPacer.StreakEnd)

        /// How long it waits, drawn from the retry policy's generator:
        /// outside the lock, since the generator is the app's.
        func delay(_ options: Outbox.Options) -> Duration {
            switch self {
            case .wake(_, let waits): options.delayBeforeTry(afterWaits: waits)
            case .notice: options.networkWakeWindow * options.publishing.retry.jitter()
            case .hold(let hold): options.holdDelay(hold)
            case .streakEnd: options.streakGrace
            }
        }
    }

    /// What the disk holds that the outbox does not want any more, found
    /// while it loads its records.
    struct Leftovers: Sendable {
        /// An older record of a post added again.
        var older: OutboxRecord?
        /// Whether the loaded post is published, and the copies of its
        /// media still on disk go.
        var removesCopies = false
    }

    /// An upload decided under the lock, started after it.
    struct Start: Sendable {
        let destination: URL
        /// The medium's index; the media's count for the document.
        let index: Int
        let token: Int
        /// The record when the upload was decided: the medium to send, or
        /// the receipts to build the document from.
        let record: OutboxRecord
        /// The most bytes it has in flight, counted against the budget.
        let weight: Int64
        /// A run before this one may have stored it without recording it
        /// (see ``Tracked/wasOnDisk``).
        var mayBeStored = false

        var isDocument: Bool { index == record.media.count }

        /// What names the upload in every launch.
        var uploadName: String { record.uploadName(of: index) }
    }

    /// What the lock's holder leaves to do, in this order.
    struct Effects: Sendable {
        var writes: [OutboxRecord] = []
        var removedCopies: [OutboxRecord] = []
        var removals: [OutboxRecord] = []
        /// The posts to tell the observers of, listed after the lock (a
        /// copy of the dictionary costs nothing until it is changed).
        var snapshot: [URL: Tracked]?
        var observers: [AsyncStream<[Outbox.Entry]>.Continuation] = []
        /// The hosts' streaks of pushbacks, to keep, when they changed.
        var streaks: [String: OutboxPacer.Streak]?
    }
}

extension Outbox.Options {
    /// How much the ceiling of a hold's drawn wait grows with the time the
    /// host has held the outbox in its streak.
    static let holdGrowth = 2.0
    /// The least share of its ceiling a hold's drawn wait takes.
    static let holdFloor = 0.1
    /// The least share of ``pushbackDelay`` a hold's drawn wait takes: a
    /// minute by default, so that a phone turned away again after it
    /// obeyed the server's `Retry-After` sends nothing more toward the
    /// host in the minute after (the herd's first minute: at most one
    /// request of a phone toward a held host, where 133 of 1,000 phones,
    /// D = 25 min, sent two when the floor was a tenth of the ceiling,
    /// 24 s).
    static let leastHoldShare = 0.25
    /// The most a hold adds to a server's `Retry-After` that is not its
    /// slot, as a share of it.
    static let retryAfterJitter = 0.2
    /// The most a hold adds to a server's slot: a `Retry-After` counts
    /// whole seconds, so the hold ends within the second it names.
    static let slotJitter = Duration.seconds(1)

    /// How long a host's window stays full again before its streak ends:
    /// the least hold, so that a pushback soon after a window taken in the
    /// middle of a backlog goes on from its streak rather than at the
    /// server's word again.
    var streakGrace: Duration { pushbackDelay * Self.leastHoldShare }

    /// How long `hold` lasts. A server's `Retry-After` is its slot: the
    /// first pushback in a row that names one is held for it, ending
    /// within the second it names, unless the host turned the outbox away
    /// after such a hold before. Otherwise the wait is drawn between a
    /// floor and a ceiling, or is the `Retry-After` with up to a fifth
    /// more if that is longer. The floor is a quarter of
    /// ``pushbackDelay``, or a tenth of the ceiling once that is more: a
    /// phone the server turned away again after its slot does not come
    /// back within the minute (by default). The ceiling is
    /// ``pushbackDelay`` at first; then twice as long as the host has held
    /// the outbox in this streak, once that is longer, up to
    /// ``maxPushbackDelay``. With no pushback delay, the `Retry-After`
    /// alone, exactly. Drawn from the retry policy's generator.
    func holdDelay(_ hold: OutboxPacer.Hold) -> Duration {
        // Zero: the server's word alone.
        guard pushbackDelay > .zero else { return hold.asked }
        // Phones that the server told to come back one after another come
        // back one after another: a wider draw would bunch them as chance
        // does (the herd's slot server, in its busiest ten seconds after
        // the first minute: up to 2.9 times its capacity with a fifth, at
        // most 1.3 within the second).
        guard !hold.isSlot else { return hold.asked + Self.slotJitter * publishing.retry.jitter() }
        let asked = hold.asked * (1 + Self.retryAfterJitter * publishing.retry.jitter())
        let ceiling = max(pushbackDelay, min(maxPushbackDelay, hold.streak.held * holdCeilingGrowth))
        let floor = max(ceiling * Self.holdFloor, pushbackDelay * Self.leastHoldShare)
        let drawn = floor + (ceiling - floor) * publishing.retry.jitter()
        return max(asked, drawn)
    }

    /// The wait before a post is tried again after its `waits`-th wait in a
    /// row for the network: drawn at random below a ceiling of
    /// ``networkRetryDelay``, doubled each time, at most
    /// ``maxNetworkRetryDelay``.
    func delayBeforeTry(afterWaits waits: Int) -> Duration {
        var ceiling = networkRetryDelay
        for _ in 1..<max(waits, 1) where ceiling < maxNetworkRetryDelay {
            ceiling *= 2
        }
        return min(ceiling, maxNetworkRetryDelay) * publishing.retry.jitter()
    }
}
