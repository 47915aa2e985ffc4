import Foundation
import JobKit

/// The posts as the machine knows them, and as the app sees them.
extension OutboxStateMachine {
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

    /// The uploads that may start now, in the order posts go: each post's
    /// media, then its document once they are stored. At most
    /// ``Outbox/Options/maxConcurrentUploads`` uploads and
    /// ``Outbox/Options/maxBytesInFlight`` bytes (each upload's weight) are
    /// in flight, but an upload heavier than the budget goes when nothing
    /// else is in flight. The first upload that does not fit stops the
    /// rest, so a large video is not passed over forever by smaller ones.
    /// An upload toward a host the pacer does not admit now waits without
    /// stopping the rest.
    func plannedStarts() -> [Start] {
        guard !isClosed else { return [] }
        let (limit, budget) = (options.maxConcurrentUploads, options.maxBytesInFlight)
        var running = posts.values.reduce(0) { $0 + $1.running.count }
        var runningByHost: [String: Int] = [:]
        for tracked in posts.values {
            for index in tracked.running.keys {
                runningByHost[OutboxPacer.host(of: tracked.record.destination(of: index)), default: 0] += 1
            }
        }
        var inFlight = posts.values.reduce(Int64(0)) { $0 + $1.running.values.reduce(0) { $0 + $1.weight } }
        var starts: [Start] = []
        for tracked in Self.ordered(posts) where tracked.phase.isReady {
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
                guard pacer.admitsUpload(toward: host, running: runningByHost[host] ?? 0) else { continue }
                runningByHost[host, default: 0] += 1
                starts.append(
                    Start(
                        destination: record.destination, index: index, token: nextToken + starts.count,
                        record: record, weight: upload, mayBeStored: tracked.wasOnDisk))
                running += 1
                inFlight += upload
            }
        }
        return starts
    }

    /// Every post as the app sees it, in the order they go.
    var entries: [Outbox.Entry] { Self.entries(posts) }

    /// The post to `destination` as the app sees it.
    func entry(_ destination: URL) -> Outbox.Entry? {
        posts[destination].map(Self.entry)
    }

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

    /// Whether a failure that outlived its retries is the network's, which
    /// waits rather than fails: one that can pass
    /// (``UploadFailure/isTransient``), or a cancellation the outbox did
    /// not ask for.
    static func canPass(_ error: any Error) -> Bool {
        let failure = UploadFailure(error)
        return failure.isTransient || failure == .cancelled
    }

    /// Whether `error` is a server's pushback.
    static func isPushback(_ error: any Error) -> Bool {
        if case .pushback = UploadFailure(error) { true } else { false }
    }
}
