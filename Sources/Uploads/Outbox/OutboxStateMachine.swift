// Past 400 lines: the machine's state can be changed in this file only
// (each property is `private` or `private(set)`), so every event is a
// method here. What only reads the state (the uploads that may start, the
// entries the app sees) and each post's own changes are in
// OutboxStateMachine+Posts.swift, and the types the machine hands out are
// in OutboxStateMachine+Actions.swift.

import Foundation
import JobKit

/// Every decision of an ``Outbox``, as a state machine: each event (a post
/// added, an upload's end, a pause, a resume, a retry, a removal, a network
/// change, a timer's end, a request's end, the close) is one method that
/// changes the state and returns the ``Actions`` to take once the lock is
/// released. It runs nothing itself: ``Outbox`` holds it under its lock
/// (a ``Handoff``) and acts.
///
/// Two kinds of work are left to do. What rests on the disk (records to
/// write or delete, then the lists to tell the observers) is taken by
/// the handoff (``takeEffects()``), by one thread at a time, in the order
/// of the changes. Everything else (uploads to start or cancel, timers to
/// arm, requests to let go) is in the ``Actions`` an event returns, for
/// the thread that made it.
///
/// The machine owns the outbox's pacer (``OutboxPacer``): how many
/// requests go to each host, and which hosts are held after a pushback.
struct OutboxStateMachine: Sendable {
    /// The outbox's folder, which its errors name.
    let folder: URL
    let options: Outbox.Options
    private(set) var posts: [URL: Tracked] = [:]
    /// How requests go to each host.
    private(set) var pacer: OutboxPacer
    private var nextSequence = 0
    private(set) var nextToken = 0
    private(set) var isClosed = false
    /// Whether a queue item that starts uploads waits to run.
    private var isPumpScheduled = false
    /// Whether a network change has a try of the waiting posts pending,
    /// and the handle that cancels it.
    private var isNoticePending = false
    private var notice: DelayedWork?
    /// Tells a pending try's handle from an earlier one's.
    private var noticeGeneration = 0
    /// Records to write, newest of each post.
    private var toWrite: [URL: OutboxRecord] = [:]
    private var toRemoveCopies: [OutboxRecord] = []
    /// Records of removed posts, to delete after the writes taken before.
    private var toRemove: [OutboxRecord] = []
    /// Whether a host's streak of pushbacks changed since the journal
    /// kept them.
    private var streaksChanged = false
    /// Whether the observers have not seen the latest change.
    private var isChanged = false
    private var observers: [Int: AsyncStream<[Outbox.Entry]>.Continuation] = [:]
    private var nextObserver = 0

    /// A machine for the outbox kept in `folder`, with nothing loaded yet.
    init(folder: URL, options: Outbox.Options) {
        self.folder = folder
        self.options = options
        pacer = OutboxPacer(options: options)
    }

    // MARK: - Reading

    /// Whether something waits to be written or told.
    var hasEffects: Bool {
        !toWrite.isEmpty || !toRemoveCopies.isEmpty || !toRemove.isEmpty || streaksChanged
            || (isChanged && !observers.isEmpty)
    }

    /// Takes what is left to write and tell.
    mutating func takeEffects() -> Effects {
        var effects = Effects()
        effects.writes = toWrite.values.sorted { $0.sequence < $1.sequence }
        effects.removedCopies = toRemoveCopies
        effects.removals = toRemove
        toWrite = [:]
        toRemoveCopies = []
        toRemove = []
        if streaksChanged { effects.streaks = pacer.streaks }
        streaksChanged = false
        if isChanged, !observers.isEmpty {
            effects.snapshot = posts
            effects.observers = Array(observers.values)
        }
        isChanged = false
        return effects
    }

    // MARK: - Posts

    /// A record read from the folder as the outbox opens, in the order they
    /// were added; returns what of the disk goes.
    mutating func load(_ record: OutboxRecord, weights: [Int64]) -> Leftovers {
        // A kill between the removal of a post and its removal from disk,
        // after it was added again, left two records: the newer one counts.
        let leftovers = Leftovers(older: posts[record.destination]?.record, removesCopies: record.status == .published)
        posts[record.destination] = Tracked(record, weights: weights)
        posts[record.destination]?.wasOnDisk = true
        nextSequence = max(nextSequence, record.sequence + 1)
        return leftovers
    }

    /// The hosts' streaks of pushbacks the journal kept, read as the
    /// outbox opens.
    mutating func load(_ streaks: [String: OutboxPacer.Streak]) {
        pacer.resume(streaks)
    }

    /// The outbox opened, with every record loaded: the posts go.
    mutating func opened() -> Actions {
        Actions(pump: .scheduled)
    }

    /// A post to `destination` is being added: its place in the order, or
    /// `nil` when the outbox has a post to `destination` already.
    /// - Throws: ``OutboxError/closed(_:)``.
    mutating func reserve(_ destination: URL) throws(OutboxError) -> Int? {
        guard !isClosed else { throw .closed(folder) }
        guard posts[destination] == nil else { return nil }
        defer { nextSequence += 1 }
        return nextSequence
    }

    /// The record of a post reserved before is on disk: the post goes.
    mutating func added(_ record: OutboxRecord, weights: [Int64]) -> Actions {
        posts[record.destination] = Tracked(record, weights: weights)
        isChanged = true
        return Actions(pump: .scheduled)
    }

    /// A sequence of changes starts; its key, or `nil` when the outbox is
    /// closed.
    mutating func observe(_ observer: AsyncStream<[Outbox.Entry]>.Continuation) -> Int? {
        guard !isClosed else { return nil }
        defer { nextObserver += 1 }
        observers[nextObserver] = observer
        isChanged = true
        return nextObserver
    }

    /// The sequence of changes `key` ended.
    mutating func stopObserving(_ key: Int) {
        observers[key] = nil
    }

    /// The app pauses the post to `destination`.
    /// - Throws: ``OutboxError/closed(_:)``, ``OutboxError/unknownPost(_:)``.
    mutating func pause(_ destination: URL) throws(OutboxError) -> Actions {
        _ = try known(destination)
        return Actions(cancels: pausing(destination))
    }

    /// The app pauses every post.
    mutating func pauseAll() -> Actions {
        guard !isClosed else { return Actions() }
        return Actions(cancels: posts.keys.flatMap { pausing($0) })
    }

    /// The app resumes the post to `destination`.
    /// - Throws: ``OutboxError/closed(_:)``, ``OutboxError/unknownPost(_:)``.
    mutating func resume(_ destination: URL) throws(OutboxError) -> Actions {
        _ = try known(destination)
        resuming(destination)
        return Actions(pump: .scheduled)
    }

    /// The app resumes every paused post.
    mutating func resumeAll() -> Actions {
        if !isClosed {
            for destination in posts.keys { resuming(destination) }
        }
        return Actions(pump: .scheduled)
    }

    /// The app removes the post to `destination`: its uploads stop, what
    /// they kept to resume is discarded, and its record goes once the
    /// writes decided before are made.
    /// - Throws: ``OutboxError/closed(_:)``, ``OutboxError/unknownPost(_:)``.
    mutating func remove(_ destination: URL) throws(OutboxError) -> Actions {
        let record = try known(destination).record
        let cancels = stop(destination)
        posts[destination] = nil
        toWrite[destination] = nil
        toRemove.append(record)
        isChanged = true
        let discards = record.media.indices.filter { record.media[$0].receipt == nil }.map(record.upload)
        return Actions(cancels: cancels, discards: discards, pump: .scheduled)
    }

    /// The app tries the post to `destination` again: a post that failed
    /// or waits for the network goes at once; any other stays as it is.
    /// - Throws: ``OutboxError/closed(_:)``, ``OutboxError/unknownPost(_:)``.
    mutating func retry(_ destination: URL) throws(OutboxError) -> Actions {
        _ = try known(destination)
        guard let retried = posts[destination]?.retry(), let record = posts[destination]?.record else {
            return Actions(pump: .scheduled)
        }
        if retried.writes { toWrite[destination] = record }
        if retried.removesCopies { toRemoveCopies.append(record) }
        isChanged = true
        return Actions(cancels: retried.cancels, pump: .scheduled)
    }

    /// The records in `written` are on disk; those of `failed` could not
    /// be written, and their posts fail.
    mutating func wrote(_ written: [OutboxRecord], failed: [(URL, OutboxError)]) {
        for record in written where posts[record.destination]?.record.idempotencyKey == record.idempotencyKey {
            // Unless the post was removed (or removed and added again)
            // since.
            if record.receiptsIfComplete != nil { posts[record.destination]?.hasEveryReceiptOnDisk = true }
            posts[record.destination]?.isUnwritten = false
        }
        for (destination, error) in failed where posts[destination] != nil {
            posts[destination]?.phase = .failed(error)
            posts[destination]?.isUnwritten = true
            isChanged = true
        }
    }

    /// The app stops the outbox: every upload, try and hold is cancelled,
    /// and every sequence of changes ends.
    mutating func close() -> Actions {
        guard !isClosed else { return Actions() }
        isClosed = true
        // The pacer first: an upload cancelled then frees no slot for
        // another.
        var actions = Actions(cancels: pacer.close().timers.map { timer in { timer.cancel() } })
        actions.cancels += posts.keys.flatMap { stop($0) }
        if let notice { actions.cancels.append { notice.cancel() } }
        notice = nil
        actions.finishes = Array(observers.values)
        observers = [:]
        return actions
    }

    // MARK: - Network and timers

    /// The app says the network changed: every waiting post is tried again
    /// at a moment drawn within the wake window (at once when it is zero),
    /// unless such a try is pending.
    mutating func networkDidChange() -> Actions {
        guard options.networkWakeWindow > .zero else { return wakeEveryWaitingPost() }
        guard !isClosed, !isNoticePending else { return Actions() }
        isNoticePending = true
        noticeGeneration += 1
        return Actions(timers: [.notice(generation: noticeGeneration)])
    }

    /// `timer` was armed, to last `delay`: `work` ends it. `false` when it
    /// is not wanted any more: cancel `work`.
    mutating func armed(_ timer: Timer, lasting delay: Duration, until work: DelayedWork) -> Bool {
        guard !isClosed else { return false }
        switch timer {
        case .wake(let destination, let waits):
            guard case .waitingForNetwork = posts[destination]?.phase, posts[destination]?.waits == waits else {
                return false
            }
            posts[destination]?.wake = work
        case .notice(let generation):
            guard isNoticePending, noticeGeneration == generation else { return false }
            notice = work
        case .hold(let hold):
            guard pacer.armed(hold, lasting: delay, until: work) else { return false }
            streaksChanged = true
        case .streakEnd(let end):
            return pacer.armed(end, until: work)
        }
        return true
    }

    /// `timer` ended.
    mutating func fired(_ timer: Timer) -> Actions {
        switch timer {
        case .wake(let destination, _):
            // This is the try: nothing of it is left to cancel.
            return wake(destination) != nil ? Actions(pump: .now) : Actions()
        case .notice:
            isNoticePending = false
            notice = nil
            return wakeEveryWaitingPost()
        case .hold(let hold):
            return paced(pacer.holdEnded(hold.key, id: hold.id))
        case .streakEnd(let end):
            return paced(pacer.streakEnded(end))
        }
    }

    /// Tries again every post waiting for the network, now, and ends the
    /// holds that the old network's failures started.
    private mutating func wakeEveryWaitingPost() -> Actions {
        guard !isClosed else { return Actions(pump: .scheduled) }
        var actions = paced(pacer.networkChanged())
        actions.cancels += posts.keys.compactMap { wake($0) }.flatMap { $0 }
        actions.pump = .scheduled
        return actions
    }

    // MARK: - Requests

    /// A request of an upload toward the host `key` names, sending
    /// `bytes`, asks to go.
    mutating func admit(_ key: String, bytes: Int64, _ go: @escaping @Sendable (Int) -> Void) -> OutboxPacer.Admission {
        pacer.admit(key, bytes: bytes, go)
    }

    /// A queued request was cancelled.
    mutating func withdraw(_ key: String, ticket: Int) -> Actions {
        paced(pacer.withdraw(key, ticket: ticket))
    }

    /// A request toward `key`, admitted in `epoch`, ended as `failure`
    /// says (`nil`: it succeeded).
    mutating func requestEnded(_ key: String, failure: UploadFailure?, epoch: Int) -> Actions {
        paced(pacer.ended(key, failure: failure, epoch: epoch))
    }

    /// A request toward `key` that asked first was let send its body
    /// (``OutboxPacer/continued(_:)``).
    mutating func requestContinued(_ key: String) -> Actions {
        paced(pacer.continued(key))
    }

    /// The pacer's actions as the outbox's: a host that opened lets the
    /// posts that waited out its pushback go on.
    private mutating func paced(_ paced: OutboxPacer.Actions) -> Actions {
        var actions = Actions(
            cancels: paced.timers.map { timer in { timer.cancel() } },
            timers: (paced.hold.map { [.hold($0)] } ?? []) + (paced.streakEnd.map { [.streakEnd($0)] } ?? []),
            requests: paced.requests)
        if paced.streaksChanged { streaksChanged = true }
        for host in paced.opened {
            for (destination, tracked) in posts where tracked.waitsForHost == host {
                posts[destination]?.hostOpened()
                isChanged = true
            }
        }
        if !paced.opened.isEmpty { actions.pump = .scheduled }
        return actions
    }

    // MARK: - Uploads

    /// Asks for the uploads that may go now to start from the queue;
    /// `false` when such a start is scheduled already.
    mutating func schedulesPump() -> Bool {
        defer { isPumpScheduled = true }
        return !isPumpScheduled
    }

    /// The scheduled start of uploads runs.
    mutating func scheduledPumpRan() -> Actions {
        isPumpScheduled = false
        return pump()
    }

    /// Starts the uploads that may go now (``plannedStarts()``): marks them
    /// running.
    mutating func pump() -> Actions {
        let starts = plannedStarts()
        for start in starts {
            posts[start.destination]?.running[start.index] = Running(token: start.token, weight: start.weight)
        }
        nextToken += starts.count
        return Actions(starts: starts)
    }

    /// `start` was performed: `handle` cancels it. `false` when the upload
    /// is no longer wanted (it ended already, or the outbox closed): cancel
    /// `handle`.
    mutating func attach(_ handle: JobHandle, to start: Start) -> Bool {
        guard !isClosed, let running = posts[start.destination]?.running[start.index], running.token == start.token,
            !running.isCancelling
        else { return false }
        posts[start.destination]?.running[start.index]?.handle = handle
        return true
    }

    /// The servers have `bytesSent` of an upload in flight; whether there
    /// are observers to tell.
    mutating func progressed(_ start: Start, bytesSent: Int64) -> Bool {
        guard posts[start.destination]?.running[start.index]?.token == start.token else { return false }
        posts[start.destination]?.running[start.index]?.bytesSent = bytesSent
        isChanged = true
        return !observers.isEmpty
    }

    /// The document of `start` was built, `size` bytes long.
    mutating func built(_ start: Start, size: Int64) {
        guard posts[start.destination]?.running[start.index]?.token == start.token else { return }
        posts[start.destination]?.documentSize = size
    }

    /// An upload ended: a medium's receipt, the post published, or the post
    /// waiting or failed.
    ///
    /// A post whose upload failed on a server's pushback while its host is
    /// held waits for the host to take requests again, not for the
    /// network: the pacer backs off for it.
    mutating func finished(_ start: Start, with outcome: Result<UploadReceipt, any Error>) -> Actions {
        guard !isClosed, posts[start.destination]?.running[start.index]?.token == start.token else {
            return Actions(pump: .now)
        }
        let ended = posts[start.destination]?.ended(start, with: outcome, pacer: pacer)
        isChanged = true
        guard let ended, let record = posts[start.destination]?.record else { return Actions(pump: .now) }
        var timers: [Timer] = []
        switch ended {
        case .unchanged: break
        case .recorded: toWrite[start.destination] = record
        case .published:
            toWrite[start.destination] = record
            toRemoveCopies.append(record)
        case .waitsForNetwork(let waits): timers = [.wake(start.destination, waits: waits)]
        }
        return Actions(timers: timers, pump: .now)
    }

    // MARK: - Decisions

    /// Pauses the post to `destination`, unless it is over; returns what
    /// cancels its uploads.
    private mutating func pausing(_ destination: URL) -> [@Sendable () -> Void] {
        guard let cancels = posts[destination]?.pause() else { return [] }
        toWrite[destination] = posts[destination]?.record
        isChanged = true
        return cancels
    }

    /// Resumes the post to `destination` if it is paused.
    private mutating func resuming(_ destination: URL) {
        guard posts[destination]?.resume() == true else { return }
        toWrite[destination] = posts[destination]?.record
        isChanged = true
    }

    /// Stops the uploads of the post to `destination` and its next try
    /// after a wait; returns what cancels them.
    private mutating func stop(_ destination: URL) -> [@Sendable () -> Void] {
        posts[destination]?.stop() ?? []
    }

    /// Tries the post to `destination` again now if it waits for the
    /// network; returns what cancels its scheduled try, or `nil` when it
    /// did not wait.
    private mutating func wake(_ destination: URL) -> [@Sendable () -> Void]? {
        guard let cancels = posts[destination]?.wakeUp() else { return nil }
        isChanged = true
        return cancels
    }
}
