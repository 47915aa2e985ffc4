import Foundation
import JobKit

/// What an ``Outbox`` knows of its posts, kept behind its lock: every
/// decision is made here, and what it leaves to do (a record to write, an
/// upload to start, observers to tell) is done after the lock, by
/// ``Outbox``.
struct OutboxBook: Sendable {
    /// A post as this launch sees it.
    struct Tracked: Sendable {
        /// The record as this launch knows it: each receipt as soon as it
        /// comes.
        var record: OutboxRecord
        /// Whether the record on disk holds every medium's receipt: the
        /// document starts only then.
        var hasEveryReceiptOnDisk: Bool
        /// Whether ``record`` could not be written; ``Outbox/retry(_:)``
        /// writes it again.
        var isUnwritten = false
        /// The post, rebuilt once from its record.
        let post: Post
        var phase: Phase
        /// The uploads in flight: medium index (the media's count for the
        /// document) to upload.
        var running: [Int: Running] = [:]
        /// The size of the post's document, once built.
        var documentSize: Int64 = 0
        /// How many times in a row it went to wait for the network, which
        /// sets the wait before it is tried again.
        var waits = 0
        /// The try after a wait for the network, to cancel when the post
        /// goes on before.
        var wake: DelayedWork?

        /// Each medium's weight against the budget of bytes in flight.
        let weights: [Int64]
        /// The post was in the folder when the outbox opened: a run before
        /// this one may have stored a medium without recording it.
        var wasOnDisk = false
        /// The host (``OutboxPacer/host(of:)``) whose pushback the post
        /// waits out: it goes on when the host takes requests again.
        var waitsForHost: String?

        init(_ record: OutboxRecord, weights: [Int64]) {
            self.record = record
            hasEveryReceiptOnDisk = record.receiptsIfComplete != nil
            documentSize = record.documentSize ?? 0
            self.weights = weights
            post = record.post
            phase =
                switch record.status {
                case .pending: .ready
                case .paused: .paused
                case .failed: .failed(OutboxError.failedInEarlierLaunch(reason: record.error ?? "it failed"))
                case .published: .published
                }
        }
    }

    /// Where a post is in this launch.
    enum Phase: Sendable {
        /// Its uploads start when the budget and the posts before it allow.
        case ready
        /// It waits for the network, after this transient failure.
        case waitingForNetwork(any Error)
        /// The app paused it.
        case paused
        /// It failed for good, with this error.
        case failed(any Error)
        case published

        var isReady: Bool {
            if case .ready = self { true } else { false }
        }

        var isOver: Bool {
            switch self {
            case .failed, .published: true
            case .ready, .waitingForNetwork, .paused: false
            }
        }
    }

    /// One upload in flight.
    struct Running: Sendable {
        /// Tells this upload from a later one of the same medium.
        let token: Int
        /// Set once the upload is performed; `nil` before.
        var handle: JobHandle?
        var bytesSent: Int64 = 0
        /// The most bytes it has in flight, counted against the budget.
        let weight: Int64
        /// Cancelled, and not ended yet: it still counts as in flight, and
        /// its medium does not start again until it ended, so one medium
        /// never has two uploads at once.
        var isCancelling = false
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
        /// A run before this one may have stored it without recording it
        /// (see ``Tracked/wasOnDisk``).
        var mayBeStored = false

        var isDocument: Bool { index == record.media.count }
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
    }

    var posts: [URL: Tracked] = [:]
    var nextSequence = 0
    var nextToken = 0
    var isClosed = false
    /// Whether a queue item that starts uploads waits to run.
    var isPumpScheduled = false
    /// Whether ``Outbox/networkDidChange()`` has a try of the waiting
    /// posts pending, and the handle that cancels it.
    var isNoticePending = false
    var notice: DelayedWork?
    /// Tells a pending try's handle from an earlier one's.
    var noticeGeneration = 0
    /// Records to write, newest of each post.
    var toWrite: [URL: OutboxRecord] = [:]
    var toRemoveCopies: [OutboxRecord] = []
    /// Records of removed posts, to delete after the writes taken before.
    var toRemove: [OutboxRecord] = []
    /// Whether the observers have not seen the latest change.
    var isChanged = false
    var observers: [Int: AsyncStream<[Outbox.Entry]>.Continuation] = [:]
    var nextObserver = 0

    /// Takes what is left to do.
    mutating func takeEffects() -> Effects {
        var effects = Effects()
        effects.writes = toWrite.values.sorted { $0.sequence < $1.sequence }
        effects.removedCopies = toRemoveCopies
        effects.removals = toRemove
        toWrite = [:]
        toRemoveCopies = []
        toRemove = []
        if isChanged, !observers.isEmpty {
            effects.snapshot = posts
            effects.observers = Array(observers.values)
        }
        isChanged = false
        return effects
    }

    /// The posts in the order they go: by priority, then first added first.
    var ordered: [Tracked] { Self.ordered(posts) }

    /// `posts` in the order they go.
    static func ordered(_ posts: [URL: Tracked]) -> [Tracked] {
        // Sorts small keys, not the posts: moving a post's whole state at
        // each step of the sort costs more than the sort itself.
        let tracked = Array(posts.values)
        let keys = tracked.indices.map {
            (index: $0, priority: tracked[$0].record.priority, sequence: tracked[$0].record.sequence)
        }
        return keys.sorted { $0.priority != $1.priority ? $0.priority > $1.priority : $0.sequence < $1.sequence }
            .map { tracked[$0.index] }
    }

    /// Every post as the app sees it, in the order they go.
    var entries: [Outbox.Entry] { Self.entries(posts) }

    /// `posts` as the app sees them, in the order they go.
    static func entries(_ posts: [URL: Tracked]) -> [Outbox.Entry] {
        ordered(posts).map(entry)
    }

    static func entry(_ tracked: Tracked) -> Outbox.Entry {
        let record = tracked.record
        let stored = record.media.filter { $0.receipt != nil }
        let storedBytes = stored.reduce(Int64(0)) { $0 + $1.size }
        let inFlight = tracked.running.filter { $0.key < record.media.count && !$0.value.isCancelling }.values.reduce(
            Int64(0)
        ) {
            $0 + $1.bytesSent
        }
        let mediaBytes = record.media.reduce(Int64(0)) { $0 + $1.size }
        let isPublished = record.status == .published
        let documentSent = isPublished ? tracked.documentSize : (tracked.running[record.media.count]?.bytesSent ?? 0)
        let state: Outbox.State
        var error: (any Error)?
        switch tracked.phase {
        case .published:
            state = .published
        case .failed(let failure):
            state = .failed
            error = failure
        case .waitingForNetwork(let failure):
            state = .waitingForNetwork
            error = failure
        case .paused:
            state = .paused
        case .ready:
            state = tracked.running.values.allSatisfy(\.isCancelling) ? .queued : .uploading
        }
        return Outbox.Entry(
            id: Outbox.PostID(record.destination),
            post: tracked.post,
            priority: record.priority,
            state: state,
            bytesSent: storedBytes + inFlight + documentSent,
            bytesTotal: mediaBytes + tracked.documentSize,
            storedMediaCount: stored.count,
            error: error,
            receipt: record.postReceipt.map { post in
                PublishReceipt(media: record.media.compactMap { $0.receipt?.receipt }, post: post.receipt)
            }
        )
    }

    // MARK: - Decisions

    /// The uploads to start now, in the order posts go: each post's media,
    /// then its document once they are stored. At most `limit` uploads
    /// and `budget` bytes (each upload's `weight`) are in flight, but an
    /// upload heavier than the budget goes when nothing else is in flight.
    /// The first upload that does not fit stops the rest, so a large video
    /// is not passed over forever by smaller ones. An upload toward a host
    /// (``OutboxPacer/host(of:)``) that `admits` refuses, given the uploads
    /// already running toward it, waits without stopping the rest. Marks
    /// them running.
    mutating func starts(
        limit: Int, budget: Int64, admits: (_ host: String, _ running: Int) -> Bool = { _, _ in true }
    ) -> [Start] {
        guard !isClosed else { return [] }
        var running = posts.values.reduce(0) { $0 + $1.running.count }
        var runningByHost: [String: Int] = [:]
        for tracked in posts.values {
            for index in tracked.running.keys {
                runningByHost[OutboxPacer.host(of: tracked.record.destination(of: index)), default: 0] += 1
            }
        }
        var inFlight = posts.values.reduce(Int64(0)) { $0 + $1.running.values.reduce(0) { $0 + $1.weight } }
        var starts: [Start] = []
        for tracked in ordered where tracked.phase.isReady {
            let record = tracked.record
            var indices = record.media.indices.filter { record.media[$0].receipt == nil && tracked.running[$0] == nil }
            // The document, once every receipt is on disk: a kill after it
            // went up cannot send a medium again.
            if indices.isEmpty, tracked.running.isEmpty, tracked.hasEveryReceiptOnDisk {
                indices = [record.media.count]
            }
            for index in indices {
                let upload = tracked.weights.indices.contains(index) ? tracked.weights[index] : 0
                guard running < limit, running == 0 || inFlight + upload <= budget else { return starts }
                let host = OutboxPacer.host(of: record.destination(of: index))
                guard admits(host, runningByHost[host] ?? 0) else { continue }
                runningByHost[host, default: 0] += 1
                starts.append(
                    Start(
                        destination: record.destination, index: index, token: nextToken, record: record,
                        mayBeStored: tracked.wasOnDisk))
                posts[record.destination]?.running[index] = Running(token: nextToken, weight: upload)
                nextToken += 1
                running += 1
                inFlight += upload
            }
        }
        return starts
    }

    /// Stops the uploads of the post to `destination` and its next try
    /// after a wait; returns what cancels them, to call after the lock.
    mutating func stop(_ destination: URL) -> [@Sendable () -> Void] {
        guard let tracked = posts[destination] else { return [] }
        for index in tracked.running.keys { posts[destination]?.running[index]?.isCancelling = true }
        posts[destination]?.wake = nil
        var cancels: [@Sendable () -> Void] = tracked.running.values.compactMap(\.handle).map { handle in
            { handle.cancel() }
        }
        if let wake = tracked.wake { cancels.append { wake.cancel() } }
        return cancels
    }

    /// Keeps the handle of a started upload; `false` when the upload is no
    /// longer wanted (it ended already, or the outbox closed).
    mutating func attach(_ handle: JobHandle, to start: Start) -> Bool {
        guard !isClosed, let running = posts[start.destination]?.running[start.index], running.token == start.token,
            !running.isCancelling
        else { return false }
        posts[start.destination]?.running[start.index]?.handle = handle
        return true
    }

    /// Records what the servers have of an upload in flight.
    mutating func progressed(_ start: Start, bytesSent: Int64) -> Bool {
        guard posts[start.destination]?.running[start.index]?.token == start.token else { return false }
        posts[start.destination]?.running[start.index]?.bytesSent = bytesSent
        isChanged = true
        return !observers.isEmpty
    }

    /// Records the document's size once built.
    mutating func built(_ start: Start, size: Int64) {
        guard posts[start.destination]?.running[start.index]?.token == start.token else { return }
        posts[start.destination]?.documentSize = size
    }

    /// How an upload's end was taken.
    struct Finish: Sendable {
        /// `false` when the upload was no longer wanted.
        var isTaken: Bool
        /// The count of waits in a row, when the post just went to wait
        /// for the network: its next try is to be scheduled.
        var waits: Int?
    }

    /// Records how an upload ended: a medium's receipt, the post
    /// published, or the post waiting or failed.
    ///
    /// A post whose upload failed on a server's pushback while its host is
    /// held (`isHeld`) waits for the host to take requests again, not for
    /// the network: the outbox's pacer backs off for it.
    mutating func finish(
        _ start: Start, with outcome: Result<UploadReceipt, any Error>, isHeld: (URL) -> Bool = { _ in false }
    ) -> Finish {
        guard !isClosed, var tracked = posts[start.destination], let running = tracked.running[start.index],
            running.token == start.token
        else { return Finish(isTaken: false) }
        var waits: Int?
        tracked.running[start.index] = nil
        if running.isCancelling, case .failure = outcome {
            // Paused meanwhile: its failure (its cancellation, most often)
            // says nothing of the post. A success that came before the
            // pause is kept, as any other.
            posts[start.destination] = tracked
            isChanged = true
            return Finish(isTaken: true)
        }
        switch outcome {
        case .success(let receipt) where start.isDocument:
            tracked.record.status = .published
            tracked.record.postReceipt = OutboxRecord.Receipt(receipt)
            tracked.record.documentSize = tracked.documentSize
            tracked.record.error = nil
            tracked.phase = .published
            toWrite[start.destination] = tracked.record
            toRemoveCopies.append(tracked.record)
        case .success(let receipt):
            tracked.record.media[start.index].receipt = OutboxRecord.Receipt(receipt)
            // Not while it waits: its next try counts on the waits so far.
            if tracked.phase.isReady { tracked.waits = 0 }
            toWrite[start.destination] = tracked.record
        case .failure where tracked.phase.isOver:
            break
        case .failure(let error)
        where tracked.phase.isReady && Self.isPushback(error) && isHeld(start.record.destination(of: start.index)):
            tracked.phase = .waitingForNetwork(error)
            tracked.waitsForHost = OutboxPacer.host(of: start.record.destination(of: start.index))
        case .failure(let error) where Self.canPass(error):
            if tracked.phase.isReady {
                tracked.waits += 1
                waits = tracked.waits
            }
            tracked.phase = .waitingForNetwork(error)
        case .failure(let error):
            tracked.phase = .failed(error)
            tracked.record.status = .failed
            tracked.record.error = error.localizedDescription
            toWrite[start.destination] = tracked.record
        }
        posts[start.destination] = tracked
        isChanged = true
        return Finish(isTaken: true, waits: waits)
    }

    /// Tries the post to `destination` again now if it waits for the
    /// network; returns what cancels its scheduled try, to call after the
    /// lock, or `nil` when it did not wait.
    mutating func wake(_ destination: URL) -> [@Sendable () -> Void]? {
        guard let tracked = posts[destination], case .waitingForNetwork = tracked.phase, tracked.waitsForHost == nil
        else { return nil }
        posts[destination]?.phase = .ready
        posts[destination]?.wake = nil
        isChanged = true
        return tracked.wake.map { wake in [{ wake.cancel() }] } ?? []
    }

    /// Lets every post that waits out the pushback of `host` go on.
    mutating func hostOpened(_ host: String) {
        for (destination, tracked) in posts where tracked.waitsForHost == host {
            posts[destination]?.waitsForHost = nil
            if case .waitingForNetwork = tracked.phase { posts[destination]?.phase = .ready }
            isChanged = true
        }
    }

    /// Marks the post to `destination` failed because its record could
    /// not be written.
    mutating func failWriting(_ destination: URL, _ error: OutboxError) {
        guard posts[destination] != nil else { return }
        posts[destination]?.phase = .failed(error)
        posts[destination]?.isUnwritten = true
        isChanged = true
    }

    /// Keeps `record` as the one on disk of its post, unless the post was
    /// removed (or removed and added again) since.
    mutating func wrote(_ record: OutboxRecord) {
        guard posts[record.destination]?.record.idempotencyKey == record.idempotencyKey else { return }
        if record.receiptsIfComplete != nil { posts[record.destination]?.hasEveryReceiptOnDisk = true }
        posts[record.destination]?.isUnwritten = false
    }

    /// Whether a failure that outlived its retries is the network's, which
    /// waits rather than fails: one that can pass (``UploadFailure/isTransient``),
    /// or a cancellation the outbox did not ask for.
    static func canPass(_ error: any Error) -> Bool {
        let failure = UploadFailure(error)
        return failure.isTransient || failure == .cancelled
    }

    /// Whether `error` is a server's pushback.
    static func isPushback(_ error: any Error) -> Bool {
        if case .pushback = UploadFailure(error) { true } else { false }
    }
}
