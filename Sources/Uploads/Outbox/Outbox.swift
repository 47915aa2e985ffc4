import Foundation
import JobKit

/// Publishing that survives the app: posts kept in a folder until they are
/// published, across kills, relaunches and lost networks.
///
/// An outbox keeps a journal in the folder the app gives it: one small
/// record per post, replaced atomically as its media are stored, so that a
/// kill at any instant leaves every record whole. Opening the outbox again
/// resumes every post where it was:
///
/// - A photo or video whose receipt is recorded is never sent again. An
///   ``S3Uploader`` resumes a multipart upload of the same file through
///   its own manifest, sending only the parts the storage lacks.
/// - A post's document is uploaded after every medium's receipt is on
///   disk, with the same `Idempotency-Key` on every attempt and in every
///   launch (``URLSessionUploader`` sends it), so that a server that
///   honours the key stores it once even when a kill came between its
///   answer and the outbox's record of it.
/// - A post recorded as published is never uploaded again.
///
/// ```swift
/// let outbox = try Outbox(folder: applicationSupport.appendingPathComponent("outbox"), uploader: uploader)
/// try outbox.add(post, priority: .high)
/// for await posts in outbox.changes {
///     print(posts.map { "\($0.id): \($0.state)" })
///     if posts.allSatisfy({ [.published, .failed].contains($0.state) }) { break }
/// }
/// ```
///
/// Posts go by priority (``Priority``), then in the order they were added.
/// At most ``PublishOptions/maxConcurrentUploads`` uploads are in flight across
/// every post; a post added with a higher priority does not interrupt
/// them, it goes next. An upload that keeps failing in a way that can pass
/// (no network) leaves its post waiting for the network
/// (``State/waitingForNetwork``), tried again when the app calls
/// ``networkDidChange()``; a failure for good (a missing file, a 403)
/// leaves it ``State/failed``, its record kept, until ``retry(_:)``.
///
/// An outbox is one client to each host, however many of its uploads go
/// there: a `429` or `503`, or three transient failures in a row, holds
/// every upload to that host (for its `Retry-After`, or a wait drawn below
/// ``Options/pushbackDelay`` whose ceiling grows as pushbacks go on), and
/// halves the requests in flight to it until the host stores them again.
/// Its own waits are jittered too, so that the phones an outage cut off do
/// not come back in step.
///
/// Its requests go by each uploader's own session, or by a background
/// `URLSession` (``Transfers/background(identifier:)``), whose transfers go
/// on while the app is suspended: see <doc:BackgroundUploads>.
///
/// Its uploads run on the queue it is given, which tests replace with a
/// `TestQueue`, whose time passes when the test says. (On an
/// `ImmediateQueue`, where every wait ends at once, a post waiting for the
/// network is tried again at once, and again, until an upload goes.) One
/// folder has one outbox at a time: a second one on the
/// same folder, in this process or another, is refused with
/// ``OutboxError/alreadyOpen(_:)`` until the first is closed (``close()``)
/// or its process ends. An outbox the app lets go of goes on while uploads
/// are in flight, and closes when the last one ends. ``add(_:priority:)``
/// and ``close()`` wait for the disk: call them off the main thread when a
/// post's media are large bytes in memory, which are copied.
public final class Outbox: Sendable {
    /// The folder that holds the journal.
    public let folder: URL
    /// Where the posts go.
    public let uploader: any Uploader
    /// How they go.
    public let options: Options
    /// The files of the journal that were not records this outbox could
    /// read, when it opened: each moved to the folder's `corrupt` folder,
    /// while every other post loaded.
    public let corruptRecords: [CorruptRecord]
    let queue: any JobQueue
    /// What carries every request of its uploads, in place of each
    /// uploader's own session; `nil` for the uploaders' own.
    let transport: (any HTTPTransport)?
    let journal: OutboxJournal
    /// Every decision, behind the lock; what rests on the disk is acted on
    /// by one thread at a time (``carryOut(_:journal:machine:)``).
    let machine: Handoff<OutboxStateMachine, OutboxStateMachine.Effects>
    /// Runs one ``add(_:priority:)`` at a time.
    private let adds = DispatchQueue(label: "JobKit.Outbox.adds")

    /// Opens the outbox kept in `folder`, creating it if needed, and
    /// resumes every post its journal holds.
    ///
    /// It reads every record before it returns: open it off the main
    /// thread.
    /// - Parameters:
    ///   - folder: A folder of the app's own that outlives the process,
    ///     such as one in Application Support.
    ///   - uploader: Where posts go.
    ///   - options: How many uploads at once, retries, time limits.
    ///   - queue: Where uploads run; the global concurrent queue by
    ///     default. Tests give a `TestQueue`.
    ///   - transfers: What carries the requests: the uploader's own
    ///     session by default, or a background session
    ///     (``Transfers/background(identifier:)``), whose transfers go on
    ///     while the app is suspended.
    /// - Throws: ``OutboxError/folderNotWritable(_:reason:)`` when the
    ///   folder cannot be written, ``OutboxError/alreadyOpen(_:)`` when
    ///   another outbox has it open, ``InvalidOptionError`` when an
    ///   option cannot work. No record in the folder changes then.
    public convenience init(
        folder: URL,
        uploader: any Uploader,
        options: Options = Options(),
        queue: any JobQueue = DispatchQueue.global(),
        transfers: Transfers = .inProcess
    ) throws {
        try self.init(
            folder: folder, uploader: uploader, options: options, queue: queue, writer: .system, transfers: transfers)
    }

    /// Opens the outbox with `writer` writing its files: `.unsynced` for
    /// tests and benchmarks whose subject is not the disk.
    package convenience init(
        folder: URL,
        uploader: any Uploader,
        options: Options,
        queue: any JobQueue,
        writer: DurableFileWriter,
        transfers: Transfers = .inProcess
    ) throws {
        try self.init(
            folder: folder, uploader: uploader, options: options, queue: queue, writer: writer,
            transport: { try transfers.transport(folder: folder, queue: queue) })
    }

    /// Opens the outbox with the transport `transport` makes, once the
    /// folder is the outbox's, carrying every request of its uploads (see
    /// ``HTTPTransport``); `nil` for the uploaders' own.
    init(
        folder: URL,
        uploader: any Uploader,
        options: Options,
        queue: any JobQueue,
        writer: DurableFileWriter,
        transport makeTransport: () throws -> (any HTTPTransport)?
    ) throws {
        try options.validate()
        let journal = try OutboxJournal(folder: folder, writer: writer)
        let transport: (any HTTPTransport)?
        do {
            transport = try makeTransport()
        } catch {
            journal.close()
            throw error
        }
        let (records, corrupt) = journal.load()
        var machine = OutboxStateMachine(folder: folder, options: options)
        machine.load(journal.loadStreaks())
        for record in records.sorted(by: { $0.sequence < $1.sequence }) {
            let leftovers = machine.load(record, weights: Self.weights(of: record, uploader))
            if let older = leftovers.older { journal.remove(older) }
            // A kill between the published record and the removal of
            // its copies left them.
            if leftovers.removesCopies { journal.removeCopies(of: record) }
        }
        self.folder = folder
        self.uploader = uploader
        self.options = options
        self.queue = queue
        self.transport = transport
        self.journal = journal
        corruptRecords = corrupt
        self.machine = Handoff(
            machine, take: { $0.takeEffects() },
            actingOn: { [journal] effects, machine in
                Self.carryOut(effects, journal: journal, machine: machine)
            })
        attachToBackgroundTransport()
        perform(changing { $0.opened() })
    }

    // MARK: - Posts

    /// Adds `post`, to be published when its turn comes, and returns its
    /// name in the outbox; when the outbox already has a post with its
    /// destination, that post is kept as it is, and its name returned.
    ///
    /// The post's record is on disk when this returns. Photos and videos
    /// given as bytes in memory are copied into the outbox's folder first;
    /// files are read from where they are when their upload starts, so
    /// keep them until the post is published.
    ///
    /// - Throws: ``UploadError/missingDestination`` for a post without a
    ///   destination, ``UploadError/invalidDestination(_:reason:)`` for a
    ///   destination the uploader refuses,
    ///   ``UploadError/fileNotFound(_:)`` or
    ///   ``UploadError/unreadableFile(_:reason:)`` for a medium's file,
    ///   ``OutboxError/writeFailed(_:reason:)`` when its record cannot be
    ///   written, ``OutboxError/closed(_:)``. Nothing is added then.
    @discardableResult
    public func add(_ post: Post, priority: Priority = .normal) throws -> PostID {
        let (destination, sizes) = try options.publishing.check(post, uploadingWith: uploader)
        // One add at a time, and `close()` waits for the one in progress:
        // an add of a post being added finds it added (or not, if that
        // add failed), and none writes into a folder another outbox owns.
        let actions = try adds.sync { () throws -> OutboxStateMachine.Actions in
            guard let sequence = try changing({ machine throws(OutboxError) in try machine.reserve(destination) })
            else { return OutboxStateMachine.Actions() }
            return try record(post, to: destination, sizes: sizes, priority: priority, sequence: sequence)
        }
        perform(actions)
        return PostID(destination)
    }

    /// Writes the record of a new post, with copies of its media in
    /// memory, and takes it on; on failure, removes what it wrote.
    private func record(
        _ post: Post, to destination: URL, sizes: [Int64], priority: Priority, sequence: Int
    ) throws(OutboxError) -> OutboxStateMachine.Actions {
        let key = UUID().uuidString
        var copies: [URL] = []
        do {
            var media: [OutboxRecord.Medium] = []
            for (index, medium) in post.media.enumerated() {
                let file: URL
                let isCopy: Bool
                switch medium.content {
                case .file(let url):
                    (file, isCopy) = (url, false)
                case .bytes(let bytes):
                    (file, isCopy) = (try journal.copy(bytes, medium: index, key: key), true)
                    copies.append(file)
                }
                media.append(
                    OutboxRecord.Medium(
                        file: file, destination: medium.destination, contentType: medium.contentType,
                        size: sizes[index], isCopy: isCopy, idempotencyKey: UUID().uuidString,
                        filename: medium.filename ?? (isCopy ? medium.defaultFilename : nil),
                        formFields: medium.formFields.isEmpty ? nil : medium.formFields))
            }
            let record = OutboxRecord(
                destination: destination, text: post.text, photoCount: post.photos.count, media: media,
                priority: priority, sequence: sequence, status: .pending, idempotencyKey: key)
            try journal.save(record)
            let weights = Self.weights(of: record, uploader)
            return changing { $0.added(record, weights: weights) }
        } catch {
            for copy in copies { try? FileManager.default.removeItem(at: copy) }
            throw error
        }
    }

    /// Every post, in the order they go: by priority, then first added
    /// first.
    public var posts: [Entry] {
        machine.read { $0.entries }
    }

    /// The post named `id` as it is now; `nil` when the outbox has none.
    public func entry(_ id: PostID) -> Entry? {
        machine.read { $0.entry(id.destination) }
    }

    /// Every post (``posts``) now and after each change, until the outbox
    /// closes.
    ///
    /// A slow reader gets the newest list and skips the older ones it
    /// missed, so a list of posts can follow it at a display's pace
    /// however fast the uploads report. Each call makes a new sequence.
    public var changes: AsyncStream<[Entry]> {
        let (stream, continuation) = AsyncStream.makeStream(of: [Entry].self, bufferingPolicy: .bufferingNewest(1))
        guard let observer = changing({ $0.observe(continuation) }) else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [machine] _ in
            machine.update { machine in
                machine.stopObserving(observer)
                return false
            }
        }
        return stream
    }

    // MARK: - Control

    /// Pauses the post named `id`: cancels its uploads in flight, and
    /// starts none until ``resume(_:)``, in this launch and the next ones.
    /// What is stored stays stored (with an ``S3Uploader``, the parts of a
    /// multipart upload too), and resuming sends only the rest. A post
    /// that failed or is published stays as it is.
    /// - Throws: ``OutboxError/unknownPost(_:)``, ``OutboxError/closed(_:)``.
    public func pause(_ id: PostID) throws(OutboxError) {
        perform(try changing { machine throws(OutboxError) in try machine.pause(id.destination) })
    }

    /// Pauses every post that is not failed or published, as ``pause(_:)``
    /// does. A post added later is not paused.
    public func pauseAll() {
        perform(changing { $0.pauseAll() })
    }

    /// Resumes the post named `id` after ``pause(_:)``: it goes again in
    /// its place by priority, and sends only what is not stored.
    /// - Throws: ``OutboxError/unknownPost(_:)``, ``OutboxError/closed(_:)``.
    public func resume(_ id: PostID) throws(OutboxError) {
        perform(try changing { machine throws(OutboxError) in try machine.resume(id.destination) })
    }

    /// Resumes every paused post.
    public func resumeAll() {
        perform(changing { $0.resumeAll() })
    }

    /// Removes the post named `id`: cancels its uploads in flight,
    /// discards what they kept to resume (``Uploader/discardResumableUpload(of:)``:
    /// an ``S3Uploader`` aborts its multipart uploads) and deletes its
    /// record and the outbox's copies of its media, once the writes decided
    /// before are made. The media the servers already stored stay there.
    /// - Throws: ``OutboxError/unknownPost(_:)``, ``OutboxError/closed(_:)``.
    public func remove(_ id: PostID) throws(OutboxError) {
        perform(try changing { machine throws(OutboxError) in try machine.remove(id.destination) })
    }

    /// Starts the post named `id` again after it failed, or waited for the
    /// network; does nothing to a post in any other state.
    /// - Throws: ``OutboxError/unknownPost(_:)``, ``OutboxError/closed(_:)``.
    public func retry(_ id: PostID) throws(OutboxError) {
        perform(try changing { machine throws(OutboxError) in try machine.retry(id.destination) })
    }

    /// Tries again every post waiting for the network, at a moment drawn
    /// at random within ``Options/networkWakeWindow`` (at once when it is
    /// zero). Call it when the network comes back (from `NWPathMonitor`'s
    /// update handler, say): it checks nothing itself, and sending is what
    /// tells. Calls while a try is pending change nothing. Without it, a
    /// waiting post is tried again after a wait drawn below
    /// ``Options/networkRetryDelay``, doubled at each wait in a row up to
    /// ``Options/maxNetworkRetryDelay``.
    public func networkDidChange() {
        perform(changing { $0.networkDidChange() })
    }

    /// Stops every upload in flight, ends every ``changes`` sequence and
    /// releases the folder for another outbox, once the writes in progress
    /// are made: when it returns, another outbox can open the folder. What
    /// is stored stays recorded: a later outbox on the folder resumes from
    /// there.
    ///
    /// It waits for the outbox's writes: call it from the app, not from an
    /// uploader or a document builder, which may run while one is made.
    public func close() {
        perform(changing { $0.close() })
        // An add in progress ends first: its record is in the folder for
        // the next outbox. So do the writes in progress on other threads.
        adds.sync {}
        let released = DispatchSemaphore(value: 0)
        machine.afterActions { [journal] in
            journal.close()
            released.signal()
        }
        released.wait()
        // The handler of a wake, if one is held: nothing more is recorded.
        backgroundTransport?.close()
    }

    deinit {
        // Let go of without `close()`: nothing is in flight (an upload
        // would hold the outbox). The folder is released once the writes
        // are made, without waiting: the last reference may go on the
        // thread that makes them.
        perform(changing { $0.close() })
        // The handler of a wake, once what the outbox writes is written.
        let background = backgroundTransport
        machine.afterActions { [journal] in
            journal.close()
            background?.close()
        }
    }
}

extension Outbox.Options {
    /// Throws when the options cannot work: fewer than one upload, one
    /// attempt or one byte in flight, a time limit that is not above zero,
    /// waits for the network that are not above zero or not in order.
    func validate() throws(InvalidOptionError) {
        try InvalidOptionError.within("publishing") { () throws(InvalidOptionError) in try publishing.validate() }
        try InvalidOptionError.check(
            maxBytesInFlight >= 1, "maxBytesInFlight", "must be at least 1, got \(maxBytesInFlight)")
        try InvalidOptionError.check(positive: networkRetryDelay, "networkRetryDelay")
        try InvalidOptionError.check(
            maxNetworkRetryDelay >= networkRetryDelay, "maxNetworkRetryDelay",
            "must be at least networkRetryDelay (\(networkRetryDelay)), got \(maxNetworkRetryDelay)")
        try InvalidOptionError.check(
            networkWakeWindow >= .zero, "networkWakeWindow", "must not be negative, got \(networkWakeWindow)")
        try InvalidOptionError.check(
            pushbackDelay >= .zero, "pushbackDelay", "must not be negative, got \(pushbackDelay)")
        try InvalidOptionError.check(
            maxRetryAfter >= .zero, "maxRetryAfter", "must not be negative, got \(maxRetryAfter)")
    }
}

extension Outbox {
    /// Each medium's weight against the budget of bytes in flight, asked of
    /// `uploader` before any lock is taken.
    static func weights(of record: OutboxRecord, _ uploader: any Uploader) -> [Int64] {
        record.media.indices.map { uploader.bytesInFlight(uploading: record.upload($0), size: record.media[$0].size) }
    }
}
