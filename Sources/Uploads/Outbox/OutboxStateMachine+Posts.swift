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
    /// ``PublishOptions/maxConcurrentUploads`` uploads and
    /// ``Outbox/Options/maxBytesInFlight`` bytes (each upload's weight) are
    /// in flight, but an upload heavier than the budget goes when nothing
    /// else is in flight. The first upload that does not fit stops the
    /// rest, so a large video is not passed over forever by smaller ones.
    /// An upload toward a host the pacer does not admit now waits without
    /// stopping the rest. Toward a host the pacer probes, the smallest
    /// upload the outbox has for it starts first, out of turn (a post's
    /// document still after its media): the pacer lets its request go
    /// first, alone.
    func plannedStarts() -> [Start] {
        guard !isClosed else { return [] }
        let (limit, budget) = (options.publishing.maxConcurrentUploads, options.maxBytesInFlight)
        var running = posts.values.reduce(0) { $0 + $1.running.count }
        var runningByHost: [String: Int] = [:]
        for tracked in posts.values {
            for index in tracked.running.keys {
                runningByHost[OutboxPacer.host(of: tracked.record.destination(of: index)), default: 0] += 1
            }
        }
        var inFlight = posts.values.reduce(Int64(0)) { $0 + $1.running.values.reduce(0) { $0 + $1.weight } }
        var starts: [Start] = []
        /// Starts upload `index` of `tracked` if its host admits it;
        /// `false` once the limit or the budget stops every start.
        func start(_ tracked: Tracked, _ index: Int) -> Bool {
            let record = tracked.record
            let upload = tracked.weights.indices.contains(index) ? tracked.weights[index] : 0
            guard running < limit, running == 0 || inFlight + upload <= budget else { return false }
            let host = OutboxPacer.host(of: record.destination(of: index))
            guard pacer.admitsUpload(toward: host, running: runningByHost[host] ?? 0) else { return true }
            runningByHost[host, default: 0] += 1
            starts.append(
                Start(
                    destination: record.destination, index: index, token: nextToken + starts.count,
                    record: record, weight: upload, mayBeStored: tracked.wasOnDisk))
            running += 1
            inFlight += upload
            return true
        }
        let ordered = Self.ordered(posts).filter(\.phase.isReady)
        let probes = probes(in: ordered)
        for (tracked, index) in probes {
            guard start(tracked, index) else { return starts }
        }
        for tracked in ordered {
            for index in tracked.startable
            where !probes.contains(where: { $0.0.record.destination == tracked.record.destination && $0.1 == index }) {
                guard start(tracked, index) else { return starts }
            }
        }
        return starts
    }

    /// The upload of `ordered` that starts first toward each host the
    /// pacer probes: the smallest, the first of those as small; in the
    /// order of the posts.
    private func probes(in ordered: [Tracked]) -> [(Tracked, Int)] {
        guard pacer.probesSomeHost else { return [] }
        var probes: [(upload: (Tracked, Int), host: String, size: Int64)] = []
        for tracked in ordered {
            let record = tracked.record
            for index in tracked.startable {
                let host = OutboxPacer.host(of: record.destination(of: index))
                guard pacer.isProbed(host) else { continue }
                let size = index < record.media.count ? record.media[index].size : tracked.documentSize
                if let found = probes.firstIndex(where: { $0.host == host }) {
                    if size < probes[found].size { probes[found] = ((tracked, index), host, size) }
                } else {
                    probes.append(((tracked, index), host, size))
                }
            }
        }
        return probes.map(\.upload)
    }

    /// Every post as the app sees it, in the order they go.
    var entries: [Outbox.Entry] { Self.entries(posts) }

    /// Whether the upload named `name` (``Start/uploadName``) runs, or
    /// starts when its turn comes: its post is ready, and the medium is not
    /// stored (or the document not published).
    func runsUpload(named name: String) -> Bool {
        posts.values.contains { tracked in
            let record = tracked.record
            return tracked.phase.isReady
                && (0...record.media.count).contains { index in
                    record.uploadName(of: index) == name
                        && (index == record.media.count || record.media[index].receipt == nil)
                }
        }
    }

    /// The post to `destination` as the app sees it.
    func entry(_ destination: URL) -> Outbox.Entry? {
        posts[destination].map(Self.entry)
    }

    /// The post to `destination`.
    /// - Throws: ``OutboxError/closed(_:)``, ``OutboxError/unknownPost(_:)``.
    func known(_ destination: URL) throws(OutboxError) -> Tracked {
        guard !isClosed else { throw .closed(folder) }
        guard let tracked = posts[destination] else { throw .unknownPost(destination) }
        return tracked
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

/// A post's own changes, which the machine makes and records.
extension OutboxStateMachine.Tracked {
    /// How an upload's end changed the post.
    enum Ended: Sendable, Equatable {
        /// Nothing to record: a failure of an upload cancelled meanwhile,
        /// of a post that is over, or of one that waits already.
        case unchanged
        /// Its record changed (a medium's receipt, or the post failed).
        case recorded
        /// Its document is stored: its record changed, and the copies of
        /// its media go.
        case published
        /// It went to wait for the network, its `waits`-th time in a row:
        /// its next try is to be armed.
        case waitsForNetwork(waits: Int)
    }

    /// What a retry changed.
    struct Retried: Sendable {
        /// Its record is to be written.
        var writes = false
        /// It is published, and the copies of its media go.
        var removesCopies = false
        /// Its scheduled try, to cancel.
        var cancels: [@Sendable () -> Void] = []
    }

    /// Records how `start`, one of its uploads, ended: a medium's receipt,
    /// the post published, or the post waiting or failed.
    ///
    /// A post whose upload failed on a server's pushback while its host is
    /// held (by `pacer`) waits for the host to take requests again, not
    /// for the network: the pacer backs off for it.
    mutating func ended(
        _ start: OutboxStateMachine.Start, with outcome: Result<UploadReceipt, any Error>, pacer: OutboxPacer
    ) -> Ended {
        let host = { OutboxPacer.host(of: start.record.destination(of: start.index)) }
        let wasCancelled = running[start.index]?.isCancelling == true
        running[start.index] = nil
        // Paused meanwhile: its failure (its cancellation, most often) says
        // nothing of the post. A success that came before the pause is
        // kept, as any other.
        if wasCancelled, case .failure = outcome { return .unchanged }
        switch outcome {
        case .success(let receipt) where start.isDocument:
            record.status = .published
            record.postReceipt = OutboxRecord.Receipt(receipt)
            record.documentSize = documentSize
            record.error = nil
            phase = .published
            return .published
        case .success(let receipt):
            record.media[start.index].receipt = OutboxRecord.Receipt(receipt)
            // Not while it waits: its next try counts on the waits so far.
            if phase.isReady { waits = 0 }
            return .recorded
        case .failure where phase.isOver:
            return .unchanged
        case .failure(let error) where phase.isReady && OutboxStateMachine.isPushback(error) && pacer.isHeld(host()):
            phase = .waitingForNetwork(error)
            waitsForHost = host()
            return .unchanged
        case .failure(let error) where OutboxStateMachine.canPass(error):
            defer { phase = .waitingForNetwork(error) }
            guard phase.isReady else { return .unchanged }
            waits += 1
            return .waitsForNetwork(waits: waits)
        case .failure(let error):
            phase = .failed(error)
            record.status = .failed
            record.error = error.localizedDescription
            return .recorded
        }
    }

    /// The uploads of it that may start, in its order: its media not
    /// stored nor in flight; or its document, once every receipt is on
    /// disk (a kill after the document went up cannot send a medium
    /// again).
    var startable: [Int] {
        let indices = record.media.indices.filter { record.media[$0].receipt == nil && running[$0] == nil }
        guard indices.isEmpty, running.isEmpty, hasEveryReceiptOnDisk else { return indices }
        return [record.media.count]
    }

    /// Pauses it, unless it is over or paused already; returns what
    /// cancels its uploads, or `nil` when it did not change.
    mutating func pause() -> [@Sendable () -> Void]? {
        guard !phase.isOver else { return nil }
        if case .paused = phase { return nil }
        let cancels = stop()
        phase = .paused
        record.status = .paused
        return cancels
    }

    /// Resumes it if it is paused; whether it was.
    mutating func resume() -> Bool {
        guard case .paused = phase else { return false }
        phase = .ready
        waits = 0
        waitsForHost = nil
        record.status = .pending
        return true
    }

    /// Starts it again if it failed or waits for the network; `nil` when
    /// it is in any other state. A post paused or published before its
    /// record's write failed stays so.
    mutating func retry() -> Retried? {
        switch phase {
        case .failed, .waitingForNetwork: break
        case .ready, .paused, .published: return nil
        }
        var retried = Retried()
        if let wake { retried.cancels = [{ wake.cancel() }] }
        wake = nil
        waits = 0
        waitsForHost = nil
        if record.status == .failed {
            record.status = .pending
            record.error = nil
            retried.writes = true
        }
        // A record that could not be written is written again.
        if isUnwritten { retried.writes = true }
        phase =
            switch record.status {
            case .published: .published
            case .paused: .paused
            case .pending, .failed: .ready
            }
        retried.removesCopies = record.status == .published && isUnwritten
        return retried
    }

    /// Stops its uploads and its next try after a wait; returns what
    /// cancels them.
    mutating func stop() -> [@Sendable () -> Void] {
        var cancels: [@Sendable () -> Void] = running.values.compactMap(\.handle).map { handle in
            { handle.cancel() }
        }
        for index in running.keys { running[index]?.isCancelling = true }
        if let wake { cancels.append { wake.cancel() } }
        wake = nil
        return cancels
    }

    /// Tries it again now if it waits for the network (and not for a
    /// host); returns what cancels its scheduled try, or `nil` when it did
    /// not wait.
    mutating func wakeUp() -> [@Sendable () -> Void]? {
        guard case .waitingForNetwork = phase, waitsForHost == nil else { return nil }
        phase = .ready
        defer { wake = nil }
        return wake.map { wake in [{ wake.cancel() }] } ?? []
    }

    /// The host it waited for takes requests again: it goes on.
    mutating func hostOpened() {
        waitsForHost = nil
        if case .waitingForNetwork = phase { phase = .ready }
    }
}
