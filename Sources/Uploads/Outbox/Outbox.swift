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
/// At most ``Options/maxConcurrentUploads`` uploads are in flight across
/// every post; a post added with a higher priority does not interrupt
/// them, it goes next. An upload that keeps failing in a way that can pass
/// (no network) leaves its post waiting for the network
/// (``State/waitingForNetwork``), tried again when the app calls
/// ``networkDidChange()``; a failure for good (a missing file, a 403)
/// leaves it ``State/failed``, its record kept, until ``retry(_:)``.
///
/// An outbox is one client to each host, however many of its uploads go
/// there: a `429` or `503`, or three transient failures in a row, holds
/// every upload to that host for its `Retry-After` plus a wait drawn below
/// ``Options/pushbackDelay``, and halves the requests in flight to it until
/// the host stores them again. Its own waits are jittered too, so that the
/// phones an outage cut off do not come back in step.
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
    private let queue: any JobQueue
    private let journal: OutboxJournal
    private let book: Handoff<OutboxBook, OutboxBook.Effects>
    /// Sends toward each host as one client.
    private let pacer: OutboxGate
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
    /// - Throws: ``OutboxError/folderNotWritable(_:reason:)`` when the
    ///   folder cannot be written, ``OutboxError/alreadyOpen(_:)`` when
    ///   another outbox has it open, ``OutboxError/invalidOptions(_:)``.
    ///   No record in the folder changes then.
    public convenience init(
        folder: URL,
        uploader: any Uploader,
        options: Options = Options(),
        queue: any JobQueue = DispatchQueue.global()
    ) throws(OutboxError) {
        try self.init(folder: folder, uploader: uploader, options: options, queue: queue, writer: .system)
    }

    /// Opens the outbox with `writer` writing its files: `.unsynced` for
    /// tests and benchmarks whose subject is not the disk.
    package init(
        folder: URL,
        uploader: any Uploader,
        options: Options,
        queue: any JobQueue,
        writer: DurableFileWriter
    ) throws(OutboxError) {
        try options.validate()
        let journal = try OutboxJournal(folder: folder, writer: writer)
        let (records, corrupt) = journal.load()
        var book = OutboxBook()
        for record in records.sorted(by: { $0.sequence < $1.sequence }) {
            // A kill between the removal of a post and its removal from
            // disk, after it was added again, left two records: the newer
            // one counts.
            if let older = book.posts[record.destination] { journal.remove(older.record) }
            book.posts[record.destination] = OutboxBook.Tracked(record, weights: Self.weights(of: record, uploader))
            book.posts[record.destination]?.wasOnDisk = true
            book.nextSequence = max(book.nextSequence, record.sequence + 1)
            // A kill between the published record and the removal of
            // its copies left them.
            if record.status == .published { journal.removeCopies(of: record) }
        }
        self.folder = folder
        self.uploader = uploader
        self.options = options
        self.queue = queue
        self.journal = journal
        corruptRecords = corrupt
        pacer = OutboxGate(options: options, queue: queue)
        self.book = Handoff(
            book, take: { $0.takeEffects() },
            actingOn: { [journal] effects, book in
                Self.carryOut(effects, journal: journal, book: book)
            })
        pacer.whenOpened { [weak self] host in
            guard let self else { return }
            self.book.update { book in
                book.hostOpened(host)
                return true
            }
            schedulePump()
        }
        schedulePump()
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
        guard let destination = post.destination else { throw UploadError.missingDestination }
        for media in post.media {
            try uploader.validate(destination: media.destination)
        }
        try (options.documentUploader ?? uploader).validate(destination: destination)
        let sizes = try post.media.map { media throws(UploadError) in try media.byteCount() }
        // One add at a time, and `close()` waits for the one in progress:
        // an add of a post being added finds it added (or not, if that
        // add failed), and none writes into a folder another outbox owns.
        let added = try adds.sync { () throws -> Bool in
            let reserved = book.update { book -> (Result<Int?, OutboxError>, actOn: Bool) in
                guard !book.isClosed else { return (.failure(.closed(folder)), false) }
                guard book.posts[destination] == nil else { return (.success(nil), false) }
                defer { book.nextSequence += 1 }
                return (.success(book.nextSequence), false)
            }
            guard let sequence = try reserved.get() else { return false }
            try record(post, to: destination, sizes: sizes, priority: priority, sequence: sequence)
            return true
        }
        if added { schedulePump() }
        return PostID(destination)
    }

    /// Writes the record of a new post, with copies of its media in
    /// memory, and takes it on; on failure, removes what it wrote.
    private func record(
        _ post: Post, to destination: URL, sizes: [Int64], priority: Priority, sequence: Int
    ) throws(OutboxError) {
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
            book.update { book in
                book.posts[destination] = OutboxBook.Tracked(record, weights: weights)
                book.isChanged = true
                return true
            }
        } catch {
            for copy in copies { try? FileManager.default.removeItem(at: copy) }
            throw error
        }
    }

    /// Every post, in the order they go: by priority, then first added
    /// first.
    public var posts: [Entry] {
        book.read { $0.entries }
    }

    /// The post named `id` as it is now; `nil` when the outbox has none.
    public func entry(_ id: PostID) -> Entry? {
        book.read { book in book.posts[id.destination].map(OutboxBook.entry) }
    }

    /// Every post (``posts``) now and after each change, until the outbox
    /// closes.
    ///
    /// A slow reader gets the newest list and skips the older ones it
    /// missed, so a list of posts can follow it at a display's pace
    /// however fast the uploads report. Each call makes a new sequence.
    public var changes: AsyncStream<[Entry]> {
        let (stream, continuation) = AsyncStream.makeStream(of: [Entry].self, bufferingPolicy: .bufferingNewest(1))
        let observer = book.update { book -> (Int?, actOn: Bool) in
            guard !book.isClosed else { return (nil, false) }
            defer { book.nextObserver += 1 }
            book.observers[book.nextObserver] = continuation
            book.isChanged = true
            return (book.nextObserver, true)
        }
        guard let observer else {
            continuation.finish()
            return stream
        }
        continuation.onTermination = { [book] _ in
            book.update { book in
                book.observers[observer] = nil
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
        let cancels = try changing(id) { book, _ in (Self.pause(id.destination, in: &book), actOn: true) }
        for cancel in cancels { cancel() }
    }

    /// Pauses every post that is not failed or published, as ``pause(_:)``
    /// does. A post added later is not paused.
    public func pauseAll() {
        let cancels = book.update { book -> ([@Sendable () -> Void], actOn: Bool) in
            guard !book.isClosed else { return ([], false) }
            return (book.posts.keys.flatMap { Self.pause($0, in: &book) }, true)
        }
        for cancel in cancels { cancel() }
    }

    /// Resumes the post named `id` after ``pause(_:)``: it goes again in
    /// its place by priority, and sends only what is not stored.
    /// - Throws: ``OutboxError/unknownPost(_:)``, ``OutboxError/closed(_:)``.
    public func resume(_ id: PostID) throws(OutboxError) {
        try changing(id) { book, _ in
            Self.resume(id.destination, in: &book)
            return ((), actOn: true)
        }
        book.afterActions { [self] in schedulePump() }
    }

    /// Resumes every paused post.
    public func resumeAll() {
        book.update { book in
            guard !book.isClosed else { return false }
            for destination in book.posts.keys { Self.resume(destination, in: &book) }
            return true
        }
        book.afterActions { [self] in schedulePump() }
    }

    /// Removes the post named `id`: cancels its uploads in flight,
    /// discards what they kept to resume (``Uploader/discardResumableUpload(of:)``:
    /// an ``S3Uploader`` aborts its multipart uploads) and deletes its
    /// record and the outbox's copies of its media, once the writes decided
    /// before are made. The media the servers already stored stay there.
    /// - Throws: ``OutboxError/unknownPost(_:)``, ``OutboxError/closed(_:)``.
    public func remove(_ id: PostID) throws(OutboxError) {
        let (cancels, record) = try changing(id) { book, tracked in
            let cancels = book.stop(id.destination)
            book.posts[id.destination] = nil
            book.toWrite[id.destination] = nil
            book.toRemove.append(tracked.record)
            book.isChanged = true
            return ((cancels, tracked.record), actOn: true)
        }
        for cancel in cancels { cancel() }
        for index in record.media.indices where record.media[index].receipt == nil {
            uploader.discardResumableUpload(of: record.upload(index)).perform(on: queue) { _ in }
        }
        book.afterActions { [self] in schedulePump() }
    }

    /// Starts the post named `id` again after it failed, or waited for the
    /// network; does nothing to a post in any other state.
    /// - Throws: ``OutboxError/unknownPost(_:)``, ``OutboxError/closed(_:)``.
    public func retry(_ id: PostID) throws(OutboxError) {
        let cancels = try changing(id) { book, tracked -> ([@Sendable () -> Void], actOn: Bool) in
            var tracked = tracked
            switch tracked.phase {
            case .failed, .waitingForNetwork:
                let wake = tracked.wake
                tracked.wake = nil
                tracked.waits = 0
                tracked.waitsForHost = nil
                if tracked.record.status == .failed {
                    tracked.record.status = .pending
                    tracked.record.error = nil
                    book.toWrite[id.destination] = tracked.record
                }
                // A record that could not be written is written again.
                if tracked.isUnwritten { book.toWrite[id.destination] = tracked.record }
                // A post paused or published before its write failed stays
                // so.
                tracked.phase =
                    switch tracked.record.status {
                    case .published: .published
                    case .paused: .paused
                    case .pending, .failed: .ready
                    }
                if tracked.record.status == .published, tracked.isUnwritten {
                    book.toRemoveCopies.append(tracked.record)
                }
                book.posts[id.destination] = tracked
                book.isChanged = true
                return (wake.map { wake in [{ wake.cancel() }] } ?? [], true)
            case .ready, .paused, .published:
                return ([], false)
            }
        }
        for cancel in cancels { cancel() }
        book.afterActions { [self] in schedulePump() }
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
        guard options.networkWakeWindow > .zero else { return wakeEveryWaitingPost() }
        let generation = book.update { book -> (Int?, actOn: Bool) in
            guard !book.isClosed, !book.isNoticePending else { return (nil, false) }
            book.isNoticePending = true
            book.noticeGeneration += 1
            return (book.noticeGeneration, false)
        }
        guard let generation else { return }
        // Drawn outside the lock: the generator is the app's.
        let delay = options.networkWakeWindow * options.retry.jitter()
        let notice = queue.enqueue(after: delay) { [weak self] in
            guard let self else { return }
            book.update { book in
                book.isNoticePending = false
                book.notice = nil
                return false
            }
            wakeEveryWaitingPost()
        }
        let kept = book.update { book -> (Bool, actOn: Bool) in
            guard !book.isClosed, book.isNoticePending, book.noticeGeneration == generation else {
                return (false, false)
            }
            book.notice = notice
            return (true, false)
        }
        if !kept { notice.cancel() }
    }

    /// Tries again every post waiting for the network, now, and ends the
    /// holds that the old network's failures started.
    private func wakeEveryWaitingPost() {
        pacer.networkChanged()
        let cancels = book.update { book -> ([@Sendable () -> Void], actOn: Bool) in
            guard !book.isClosed else { return ([], false) }
            return (book.posts.keys.compactMap { book.wake($0) }.flatMap { $0 }, true)
        }
        for cancel in cancels { cancel() }
        book.afterActions { [self] in schedulePump() }
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
        stopEverything()
        // An add in progress ends first: its record is in the folder for
        // the next outbox. So do the writes in progress on other threads.
        adds.sync {}
        let released = DispatchSemaphore(value: 0)
        book.afterActions { [journal] in
            journal.close()
            released.signal()
        }
        released.wait()
    }

    deinit {
        // Let go of without `close()`: nothing is in flight (an upload
        // would hold the outbox). The folder is released once the writes
        // are made, without waiting: the last reference may go on the
        // thread that makes them.
        stopEverything()
        book.afterActions { [journal] in journal.close() }
    }

    /// Marks the outbox closed, stops every upload and try, and ends every
    /// ``changes`` sequence.
    private func stopEverything() {
        let (cancels, observers) = book.update {
            book -> (([@Sendable () -> Void], [AsyncStream<[Entry]>.Continuation]), actOn: Bool) in
            guard !book.isClosed else { return (([], []), false) }
            var cancels = book.posts.keys.flatMap { book.stop($0) }
            if let notice = book.notice { cancels.append { notice.cancel() } }
            book.notice = nil
            book.isClosed = true
            defer { book.observers = [:] }
            return ((cancels, Array(book.observers.values)), false)
        }
        // First: an upload cancelled below frees no slot for another.
        pacer.close()
        for cancel in cancels { cancel() }
        for observer in observers { observer.finish() }
    }

    /// Runs `change` on the book, with the post named `id`.
    /// - Throws: ``OutboxError/closed(_:)``, ``OutboxError/unknownPost(_:)``.
    private func changing<Value: Sendable>(
        _ id: PostID, _ change: (inout OutboxBook, OutboxBook.Tracked) -> (Value, actOn: Bool)
    ) throws(OutboxError) -> Value {
        try book.update { book -> (Result<Value, OutboxError>, actOn: Bool) in
            guard !book.isClosed else { return (.failure(.closed(folder)), false) }
            guard let tracked = book.posts[id.destination] else {
                return (.failure(.unknownPost(id.destination)), false)
            }
            let (value, acts) = change(&book, tracked)
            return (.success(value), acts)
        }.get()
    }

    /// Pauses the post to `destination` in `book`, unless it is over;
    /// returns what cancels its uploads.
    private static func pause(_ destination: URL, in book: inout OutboxBook) -> [@Sendable () -> Void] {
        guard let tracked = book.posts[destination], !tracked.phase.isOver else { return [] }
        if case .paused = tracked.phase { return [] }
        let cancels = book.stop(destination)
        book.posts[destination]?.phase = .paused
        book.posts[destination]?.record.status = .paused
        book.toWrite[destination] = book.posts[destination]?.record
        book.isChanged = true
        return cancels
    }

    /// Resumes the post to `destination` in `book` if it is paused.
    private static func resume(_ destination: URL, in book: inout OutboxBook) {
        guard case .paused = book.posts[destination]?.phase else { return }
        book.posts[destination]?.phase = .ready
        book.posts[destination]?.waits = 0
        book.posts[destination]?.waitsForHost = nil
        book.posts[destination]?.record.status = .pending
        book.toWrite[destination] = book.posts[destination]?.record
        book.isChanged = true
    }

    // MARK: - Uploads

    /// Starts the uploads the budget allows, from the queue: so the posts
    /// added in one go start in priority order, whatever order they were
    /// added in.
    private func schedulePump() {
        let schedules = book.update { book in
            defer { book.isPumpScheduled = true }
            return (!book.isPumpScheduled, actOn: false)
        }
        guard schedules else { return }
        // Weak: an outbox the app let go of, with nothing in flight, goes
        // (and releases its folder) without waiting for this.
        queue.enqueue { [weak self] in
            guard let self else { return }
            book.update { book in
                book.isPumpScheduled = false
                return false
            }
            pump()
        }
    }

    /// Starts the uploads the budget allows.
    private func pump() {
        let starts = book.update { [pacer] book in
            let starts = book.starts(limit: options.maxConcurrentUploads, budget: options.maxBytesInFlight) {
                host, running in pacer.admitsUpload(toward: host, running: running)
            }
            return (starts, actOn: false)
        }
        for start in starts { launch(start) }
    }

    /// Performs one upload decided by ``pump()``.
    private func launch(_ start: OutboxBook.Start) {
        let media: Media
        do {
            media = try upload(for: start)
        } catch {
            finish(start, .failure(error))
            return
        }
        var attempts = UploadAttempts(retry: options.retry, timeout: options.uploadTimeout)
        // Pausing and closing keep what is stored of a multipart upload.
        attempts.keepsStoredPartsWhenCancelled = true
        // A run before this one may have stored it and been killed before
        // recording it: the storages that can tell are asked first.
        attempts.checksStorageFirst = start.mayBeStored
        attempts.gate = pacer
        let uploader = start.isDocument ? options.documentUploader ?? uploader : uploader
        let handle = uploader.upload(media, attempts: attempts) { [book] progress in
            book.update { book in book.progressed(start, bytesSent: progress.bytesSent) }
        }
        .perform(on: queue) { [self] outcome in finish(start, outcome) }
        if !book.update({ book in (book.attach(handle, to: start), actOn: false) }) {
            handle.cancel()
        }
    }

    /// What `start` sends: a medium from its file, or the post's document
    /// built from the receipts of its media.
    private func upload(for start: OutboxBook.Start) throws -> Media {
        let record = start.record
        guard start.isDocument else { return record.upload(start.index) }
        let receipts = record.media.compactMap { $0.receipt?.receipt }
        var document: Media
        if let build = options.document {
            document = Media(
                bytes: try build(record.post, receipts), destination: record.destination,
                contentType: "application/json")
        } else {
            document = try record.post.document(receipts: receipts)
        }
        document.idempotencyKey = record.idempotencyKey
        let size = (try? document.byteCount()) ?? 0
        book.update { book in
            book.built(start, size: size)
            return false
        }
        return document
    }

    private func finish(_ start: OutboxBook.Start, _ outcome: Result<UploadReceipt, any Error>) {
        let finish = book.update { [pacer] book in
            let finish = book.finish(start, with: outcome, isHeld: pacer.isHeld)
            return (finish, actOn: finish.isTaken)
        }
        if let waits = finish.waits { scheduleWake(start.destination, after: waits) }
        book.afterActions { [self] in pump() }
    }

    /// Tries the post to `destination` again after its `waits`-th wait in
    /// a row for the network, unless something else did meanwhile.
    private func scheduleWake(_ destination: URL, after waits: Int) {
        let wake = queue.enqueue(after: options.delayBeforeTry(afterWaits: waits)) { [weak self] in
            guard let self else { return }
            // This is the try: nothing of it is left to cancel.
            let woke = book.update { book in
                let woke = book.wake(destination) != nil
                return (woke, actOn: woke)
            }
            if woke { book.afterActions { [self] in pump() } }
        }
        let kept = book.update { book -> (Bool, actOn: Bool) in
            guard !book.isClosed, case .waitingForNetwork = book.posts[destination]?.phase,
                book.posts[destination]?.waits == waits
            else { return (false, false) }
            book.posts[destination]?.wake = wake
            return (true, false)
        }
        if !kept { wake.cancel() }
    }

    /// Writes the records, removes the copies of published posts, then
    /// tells the observers: on one thread at a time, outside the lock.
    static func carryOut(
        _ effects: OutboxBook.Effects,
        journal: OutboxJournal,
        book: Handoff<OutboxBook, OutboxBook.Effects>
    ) {
        var failed: [(URL, OutboxError)] = []
        var written: [OutboxRecord] = []
        for record in effects.writes {
            do {
                try journal.save(record)
                written.append(record)
            } catch {
                failed.append((record.destination, error))
            }
        }
        for record in effects.removedCopies where !failed.contains(where: { $0.0 == record.destination }) {
            journal.removeCopies(of: record)
        }
        for record in effects.removals { journal.remove(record) }
        // A list is told once the writes it rests on are made. When one
        // failed, the book's next list, which shows that post failed, is
        // told instead: an app may delete its files on `.published`.
        if failed.isEmpty, let posts = effects.snapshot {
            let snapshot = OutboxBook.entries(posts)
            for observer in effects.observers { observer.yield(snapshot) }
        }
        guard !written.isEmpty || !failed.isEmpty else { return }
        book.update { book in
            for record in written { book.wrote(record) }
            for (destination, error) in failed { book.failWriting(destination, error) }
            return !failed.isEmpty
        }
    }
}

extension Outbox.Options {
    /// Checks the options before the outbox opens.
    func validate() throws(OutboxError) {
        guard maxConcurrentUploads >= 1 else {
            throw .invalidOptions("maxConcurrentUploads must be at least 1, got \(maxConcurrentUploads)")
        }
        guard retry.attempts >= 1 else {
            throw .invalidOptions("retry.attempts must be at least 1, got \(retry.attempts)")
        }
        if let limit = uploadTimeout, limit <= .zero {
            throw .invalidOptions("uploadTimeout must be above zero, got \(limit)")
        }
        guard maxBytesInFlight >= 1 else {
            throw .invalidOptions("maxBytesInFlight must be at least 1, got \(maxBytesInFlight)")
        }
        guard networkRetryDelay > .zero, maxNetworkRetryDelay >= networkRetryDelay else {
            throw .invalidOptions(
                "networkRetryDelay must be above zero and at most maxNetworkRetryDelay, got \(networkRetryDelay) and \(maxNetworkRetryDelay)"
            )
        }
        guard networkWakeWindow >= .zero else {
            throw .invalidOptions("networkWakeWindow must not be negative, got \(networkWakeWindow)")
        }
        guard pushbackDelay >= .zero else {
            throw .invalidOptions("pushbackDelay must not be negative, got \(pushbackDelay)")
        }
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
        return min(ceiling, maxNetworkRetryDelay) * retry.jitter()
    }
}

extension Outbox {
    /// Each medium's weight against the budget of bytes in flight, asked of
    /// `uploader` before any lock is taken.
    static func weights(of record: OutboxRecord, _ uploader: any Uploader) -> [Int64] {
        record.media.indices.map { uploader.bytesInFlight(uploading: record.upload($0), size: record.media[$0].size) }
    }
}
