import Foundation

extension Outbox {
    /// Which posts go first: `.high` before `.normal` before `.low`, and
    /// among equals, the first added first.
    public enum Priority: String, Sendable, Hashable, CaseIterable, Comparable, Codable {
        /// After every other post.
        case low
        /// The default.
        case normal
        /// Before every other post.
        case high

        /// Whether `lhs` goes after `rhs`.
        public static func < (lhs: Priority, rhs: Priority) -> Bool {
            lhs.rank < rhs.rank
        }

        private var rank: Int {
            switch self {
            case .low: 0
            case .normal: 1
            case .high: 2
            }
        }
    }

    /// A post in an outbox, named by its destination: one destination, one
    /// post.
    public struct PostID: Sendable, Hashable, CustomStringConvertible {
        /// The destination of the post's document.
        public let destination: URL

        /// The post whose document goes to `destination`.
        public init(_ destination: URL) {
            self.destination = destination
        }

        /// The destination, as a user would name it.
        public var description: String { UploadError.name(of: destination) }
    }

    /// Where a post of an outbox is.
    public enum State: Sendable, Hashable {
        /// Waiting its turn: other posts go first, or the budget is spent.
        case queued
        /// Some of its uploads are in flight.
        case uploading
        /// The app paused it (``Outbox/pause(_:)``): nothing of it is sent
        /// until ``Outbox/resume(_:)``, in this launch or a later one.
        case paused
        /// An upload failed in a way that can pass (no network, a server
        /// answering 503) more often than the retry policy allows. It is
        /// tried again when the app calls ``Outbox/networkDidChange()``, or
        /// after a wait that doubles each time (see
        /// ``Outbox/Options/networkRetryDelay``); after a `429` or `503`
        /// while the outbox holds that server's host (see
        /// ``Outbox/Options/pushbackDelay``), once the hold is over.
        case waitingForNetwork
        /// An upload failed for good (a missing file, a 403); its record is
        /// kept, and ``Outbox/retry(_:)`` starts it again.
        case failed
        /// Every medium and the post's document are stored. It is never
        /// uploaded again.
        case published
    }

    /// One post of an outbox as it is now: what a list of posts shows.
    public struct Entry: Sendable {
        /// The post's name in the outbox.
        public var id: PostID
        /// The post. Photos and videos given as bytes in memory are read
        /// from the outbox's copy of them, in its folder, which is removed
        /// once the post is published.
        public var post: Post
        /// Its priority.
        public var priority: Priority
        /// Where it is.
        public var state: State
        /// Bytes of it that the servers hold: its stored media whole, and
        /// what its uploads in flight have sent.
        public var bytesSent: Int64
        /// The bytes of its media, and of its document once built.
        public var bytesTotal: Int64
        /// How many of its photos and videos are stored.
        public var storedMediaCount: Int
        /// Why it is ``State/failed`` or ``State/waitingForNetwork``; `nil`
        /// otherwise. After a relaunch, a failure of an earlier launch is
        /// ``OutboxError/failedInEarlierLaunch(reason:)``.
        public var error: (any Error)?
        /// What the servers answered, once it is ``State/published``.
        public var receipt: PublishReceipt?

        /// The share sent, from 0 to 1; 1 only once the post is
        /// published (its document counts only once built).
        public var fractionCompleted: Double {
            guard state != .published else { return 1 }
            guard bytesTotal > 0 else { return 0 }
            return min(Double(bytesSent) / Double(bytesTotal), 1.0.nextDown)
        }
    }

    /// A file of the journal that is not a record this outbox can read,
    /// moved aside to the `corrupt` folder when the outbox opened.
    public struct CorruptRecord: Sendable, Hashable, CustomStringConvertible {
        /// Where the file is now, in the `corrupt` folder.
        public var file: URL
        /// Why it could not be read.
        public var reason: String

        /// One sentence: which file, why, and where it went.
        public var description: String {
            "\(file.lastPathComponent): not a record this outbox can read (\(reason)); moved to \(file.path)"
        }
    }

    /// How an outbox uploads: each post as publishing would
    /// (``publishing``), and what an outbox adds across posts: a budget of
    /// bytes in flight, and how long posts wait for the network and for a
    /// server that pushed back.
    ///
    /// ```swift
    /// let options = Outbox.Options(
    ///     publishing: PublishOptions(maxConcurrentUploads: 2, retry: RetryPolicy(attempts: 4)),
    ///     maxBytesInFlight: 16 * 1024 * 1024)
    /// ```
    public struct Options: Sendable {
        /// How each upload goes, as `Job.publishing(_:using:options:progress:)`
        /// has it: its ``PublishOptions/maxConcurrentUploads`` counts the
        /// uploads in flight across every post; its
        /// ``PublishOptions/retry`` tries failed uploads again at once, and
        /// an upload whose transient failures outlast it waits for the
        /// network, while a permanent failure fails its post; its
        /// ``PublishOptions/uploadTimeout``, ``PublishOptions/onFailedAttempt``,
        /// ``PublishOptions/document`` and
        /// ``PublishOptions/documentUploader`` (the outbox's uploader when
        /// `nil`) are publishing's.
        public var publishing: PublishOptions
        /// The most bytes in flight at any moment, across every post: an
        /// upload counts what its uploader can have in flight at once
        /// (``Uploader/bytesInFlight(uploading:size:)``: the whole file
        /// for one request, a part size for each part an ``S3Uploader``
        /// sends at once). An upload larger than the budget still goes,
        /// alone.
        public var maxBytesInFlight: Int64
        /// The longest a post waiting for the network waits before it is
        /// tried again, the first time; each wait in a row doubles it. The
        /// wait is drawn at random below it ("full jitter", from the
        /// generator of ``publishing``'s ``PublishOptions/retry``), so
        /// that phones cut off together do not come back in step.
        public var networkRetryDelay: Duration
        /// The longest wait before a post waiting for the network is tried
        /// again: the most its doubling ceiling reaches.
        public var maxNetworkRetryDelay: Duration
        /// How long ``Outbox/networkDidChange()`` may wait before it tries
        /// the waiting posts again: a moment drawn at random in this
        /// window, from the retry policy's generator, so that the phones an
        /// outage cut off, which all see the network come back within
        /// seconds, do not all send at once. Zero tries them at once.
        public var networkWakeWindow: Duration
        /// The most the outbox waits before it sends again to a host that
        /// pushed back once (a `429` or `503`, or three transient failures
        /// in a row) without a `Retry-After`: the wait is drawn between a
        /// quarter of it and it, from the retry policy's generator.
        /// Pushbacks in a row after that draw below a ceiling that grows
        /// up to ``maxPushbackDelay``; a
        /// server's `Retry-After` is obeyed (<doc:UsingTheOutbox#When-the-server-pushes-back>).
        /// A longer delay spares the server of a long backlog and publishes
        /// a short one later; a shorter one the other way round.
        /// Zero honours `Retry-After` alone. A hold that transient failures started ends when the
        /// outbox tries its waiting posts after
        /// ``Outbox/networkDidChange()``.
        public var pushbackDelay: Duration
        /// The most the ceiling of a hold's drawn wait grows to, however
        /// long the host has turned the outbox away; below
        /// ``pushbackDelay``, the ceiling does not grow.
        public var maxPushbackDelay: Duration
        /// The longest `Retry-After` the outbox obeys: a longer one counts
        /// as this long (before the jitter drawn on top of it).
        public var maxRetryAfter: Duration
        /// How many times the time a host has held the outbox in its streak
        /// the ceiling of the next drawn hold is (``holdGrowth`` unless
        /// set): for the herd benchmark, which measures what it trades.
        package var holdCeilingGrowth = Outbox.Options.holdGrowth

        /// Creates options.
        /// - Parameters:
        ///   - publishing: How each upload goes: by default 4 uploads at
        ///     once across posts, up to 3 attempts for transient failures
        ///     only, no time limit, the default document.
        ///   - maxBytesInFlight: The most bytes in flight at once, across
        ///     posts; 64 MiB by default.
        ///   - networkRetryDelay: The first wait before a post waiting for
        ///     the network is tried again; 30 seconds by default.
        ///   - maxNetworkRetryDelay: The longest such wait; 15 minutes by
        ///     default.
        ///   - networkWakeWindow: How long ``Outbox/networkDidChange()``
        ///     may wait before it tries the waiting posts again; 10
        ///     seconds by default, zero for at once.
        ///   - pushbackDelay: The most the outbox waits before it sends
        ///     again to a server that pushed back once without a
        ///     `Retry-After`; 4 minutes by default.
        ///   - maxPushbackDelay: The most the ceiling of that wait grows
        ///     to as pushbacks go on; 15 minutes by default (below
        ///     `pushbackDelay`, the ceiling does not grow).
        ///   - maxRetryAfter: The longest `Retry-After` the outbox obeys;
        ///     an hour by default.
        public init(
            publishing: PublishOptions = PublishOptions(),
            maxBytesInFlight: Int64 = 64 * 1024 * 1024,
            networkRetryDelay: Duration = .seconds(30),
            maxNetworkRetryDelay: Duration = .seconds(15 * 60),
            networkWakeWindow: Duration = .seconds(10),
            pushbackDelay: Duration = .seconds(4 * 60),
            maxPushbackDelay: Duration = .seconds(15 * 60),
            maxRetryAfter: Duration = .seconds(3600)
        ) {
            self.publishing = publishing
            self.maxBytesInFlight = maxBytesInFlight
            self.networkRetryDelay = networkRetryDelay
            self.maxNetworkRetryDelay = maxNetworkRetryDelay
            self.networkWakeWindow = networkWakeWindow
            self.pushbackDelay = pushbackDelay
            self.maxPushbackDelay = maxPushbackDelay
            self.maxRetryAfter = maxRetryAfter
        }
    }
}
