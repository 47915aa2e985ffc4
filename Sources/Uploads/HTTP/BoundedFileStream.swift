import Foundation

/// A body's segments one after another: bytes in memory, and ranges of
/// files (the whole file, one part of a multipart upload, or each file of
/// a form between the bytes around it), as an upload body framed by a
/// `Content-Length` of their sum: never more, whatever a file has grown
/// to meanwhile, and an error, not a short end, if a file ends sooner.
///
/// FoundationNetworking hands a streamed body to libcurl with no length of
/// its own, so libcurl sends whatever the stream yields. Bytes past the
/// declared length would reach the server as the start of the next request
/// on the connection; a body that ends early leaves the server waiting for
/// the rest until the request times out. This stream ends after exactly
/// `length` bytes, and fails its read (returns -1, `streamStatus` `.error`)
/// when the file runs out sooner, which makes libcurl abort the transfer at
/// once; the task then fails with `URLError(.unknown)` (FoundationNetworking
/// maps libcurl's "aborted by callback" to it, and drops `streamError`).
///
/// The same stream serves both ways a session reads a body:
///
/// - FoundationNetworking opens it and polls it (`hasBytesAvailable`,
///   `read`) on the session's queue.
/// - Apple's URLSession schedules it on a run loop and reads when its
///   delegate is told of an event. A scheduled stream tells its delegate,
///   on the run loop it is scheduled in, `openCompleted` once opened, then
///   `hasBytesAvailable` after each read that leaves bytes to read, and
///   `endEncountered` or `errorOccurred` once, as `Stream`'s subclassing
///   notes ask. (The tests drive this way too, on a Linux run loop.)
///
/// One stream per transfer, used from one thread at a time: the session's
/// own queue, or the thread of the run loop it is scheduled in. It is not
/// `Sendable`, and need not be.
final class BoundedFileStream: InputStream {
    /// Why the stream failed, when the file did not say.
    enum Failure: Error, Hashable {
        /// The stream was made to fail: see ``refusal()``.
        case refused
        /// The file ended after `found` of the `expected` bytes.
        case fileEnded(found: Int64, expected: Int64)
    }

    /// Why a stream of `file` up to `end` failed, said of the file: missing,
    /// unreadable, or shrunk below `end` since the upload began; `nil`
    /// when the file is readable that far (the failure was not its).
    static func failure(of file: URL, upTo end: Int64) -> UploadError? {
        do {
            let found = try Media.sizeOfReadableFile(at: file)
            guard found < end else { return nil }
            return .unreadableFile(file, reason: "it shrank from \(end) to \(found) bytes during the upload")
        } catch {
            return error
        }
    }

    /// Why a stream of `segments` failed, said of the first of their files
    /// that is missing, unreadable or shorter than its segment needs; `nil`
    /// when none is.
    static func failure(of segments: [BodySegment]) -> UploadError? {
        for case .file(let file, let offset, let length) in segments {
            if let failure = failure(of: file, upTo: offset + length) { return failure }
        }
        return nil
    }

    /// The body's pieces, in order.
    private let segments: [BodySegment]
    /// The open file of the segment being delivered, when it is a file's.
    private var source: FileHandle?
    /// The segment being delivered; `segments.count` once all are.
    private var index = 0
    /// The bytes of that segment delivered so far.
    private var delivered: Int64 = 0
    private var status: Stream.Status = .notOpen
    private var failure: (any Error)?
    /// The file that failed the stream, when one did.
    private(set) var failedFile: URL?
    /// Fails on opening: see ``refusal()``.
    private var refuses = false

    /// The run loops the stream is scheduled in, with their modes.
    private var runLoops: [(runLoop: RunLoop, mode: RunLoop.Mode)] = []
    private weak var client: (any StreamDelegate)?
    /// An event is on its way to the run loops, not yet delivered.
    private var eventPending = false
    private var openCompletedSent = false
    private var lastEventSent = false

    /// A stream of `segments`, one after another; unopened.
    init(segments: [BodySegment]) {
        self.segments = segments.map { segment in
            guard case .file(let file, let offset, let length) = segment else { return segment }
            return .file(file, offset: max(offset, 0), length: max(length, 0))
        }
        // InputStream's only designated initializers make a backing
        // CFReadStream; this empty one is never used: every member that
        // would touch it is overridden below.
        super.init(data: Data())
    }

    /// A stream of `head`, `length` bytes of `file` from `offset`, then
    /// `tail`; unopened.
    convenience init(file: URL, offset: Int64 = 0, length: Int64, head: Data = Data(), tail: Data = Data()) {
        self.init(segments: [.bytes(head), .file(file, offset: offset, length: length), .bytes(tail)])
    }

    /// A stream that fails its first read, which aborts the transfer: the
    /// body handed to a session that would send again, by itself, a
    /// request that must not go out twice (libcurl resends a request whose
    /// reused connection died before an answer).
    static func refusal() -> BoundedFileStream {
        let stream = BoundedFileStream(segments: [])
        stream.refuses = true
        return stream
    }

    override func open() {
        guard status == .notOpen else { return }
        if refuses { return fail(Failure.refused) }
        status = .open
        skipDeliveredSegments()
        announce()
    }

    override func close() {
        releaseFile()
        if status != .error { status = .closed }
        runLoops = []
    }

    override var streamStatus: Stream.Status { status }
    override var streamError: (any Error)? { failure }

    /// `true` until the last byte is delivered, and after a failure: the
    /// session ends the body as soon as this is `false` (the server would
    /// then wait for the rest); only a failed `read` makes it abort.
    override var hasBytesAvailable: Bool { status == .open || status == .error }

    override func read(_ buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int) -> Int {
        switch status {
        case .open: break
        case .atEnd, .closed: return 0
        default: return -1
        }
        guard len > 0 else { return 0 }
        let count: Int
        switch segments[index] {
        case .bytes(let bytes):
            count = copy(bytes, from: Int(delivered), into: buffer, maxLength: len)
        case .file(let file, let offset, let length):
            guard let read = readFromFile(into: buffer, maxLength: len, offset: offset, length: length) else {
                failedFile = file
                return -1
            }
            count = read
        }
        delivered += Int64(count)
        skipDeliveredSegments()
        announce()
        return count
    }

    /// Moves past the segments whose every byte is delivered (empty ones
    /// included), closing their files; then opens the file of the segment
    /// to deliver next, if it is one, or ends the stream after the last.
    ///
    /// One file is open at a time, from its first byte to its last: a form
    /// of hundreds of files holds one descriptor.
    private func skipDeliveredSegments() {
        while index < segments.count, delivered == segments[index].count {
            try? source?.close()
            source = nil
            index += 1
            delivered = 0
        }
        guard index < segments.count else { return finish() }
        guard source == nil, case .file(let file, let offset, _) = segments[index] else { return }
        do {
            let source = try FileHandle(forReadingFrom: file)
            try source.seek(toOffset: UInt64(offset))
            self.source = source
        } catch {
            failedFile = file
            fail(error)
        }
    }

    /// Copies the bytes of `bytes` from `start` into `buffer`, as many as
    /// fit, and says how many.
    private func copy(_ bytes: Data, from start: Int, into buffer: UnsafeMutablePointer<UInt8>, maxLength: Int) -> Int {
        let count = min(maxLength, bytes.count - start)
        bytes.withUnsafeBytes { bytes in
            UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress! + start, byteCount: count)
        }
        return count
    }

    /// Reads the next bytes of the current segment, `length` bytes of its
    /// file from `offset`, into `buffer`; `nil` when the read failed the
    /// stream.
    private func readFromFile(
        into buffer: UnsafeMutablePointer<UInt8>, maxLength len: Int, offset: Int64, length: Int64
    ) -> Int? {
        guard let source else { return nil }
        let wanted = Int(min(Int64(len), length - delivered))
        // Straight into the session's buffer: nothing allocated per read.
        var count: Int
        repeat {
            count = readFile(source.fileDescriptor, UnsafeMutableRawPointer(buffer), wanted)
        } while count < 0 && errno == EINTR
        guard count > 0 else {
            // The file ended before `length` bytes (or failed): abort, don't
            // end.
            let ended = Failure.fileEnded(found: offset + delivered, expected: offset + length)
            fail(count == 0 ? ended : POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO))
            return nil
        }
        return count
    }

    override func getBuffer(
        _ buffer: UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>,
        length len: UnsafeMutablePointer<Int>
    ) -> Bool {
        false
    }

    override func property(forKey key: Stream.PropertyKey) -> AnyObject? { nil }
    override func setProperty(_ property: AnyObject?, forKey key: Stream.PropertyKey) -> Bool { false }

    // MARK: - Run-loop events

    override var delegate: (any StreamDelegate)? {
        get { client }
        set { client = newValue }
    }

    override func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        runLoops.append((aRunLoop, mode))
        announce()
    }

    override func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {
        runLoops.removeAll { $0.runLoop === aRunLoop && $0.mode == mode }
    }

    /// Sends the event the stream's state calls for to the run loops it is
    /// scheduled in, unless one is already on its way (it reads the state
    /// when it arrives).
    private func announce() {
        guard !eventPending, !runLoops.isEmpty, status != .notOpen, status != .closed else { return }
        eventPending = true
        let confined = Confined(stream: self)
        for (runLoop, mode) in runLoops {
            // A timer due now, rather than `perform(inModes:)`: adding one
            // wakes a run loop that sleeps.
            runLoop.add(Timer(timeInterval: 0, repeats: false) { _ in confined.stream?.deliverEvent() }, forMode: mode)
        }
    }

    /// Tells the delegate what the stream can do now; on the first of the
    /// run loops to run the event.
    private func deliverEvent() {
        guard eventPending, status != .closed else { return }
        eventPending = false
        if !openCompletedSent {
            openCompletedSent = true
            tell(.openCompleted)
        }
        switch status {
        case .open:
            tell(.hasBytesAvailable)
        case .atEnd where !lastEventSent:
            lastEventSent = true
            tell(.endEncountered)
        case .error where !lastEventSent:
            lastEventSent = true
            tell(.errorOccurred)
        default:
            break
        }
    }

    private func tell(_ event: Stream.Event) {
        // An Objective-C protocol with an optional method on Apple
        // platforms; a Swift protocol with a default in
        // swift-corelibs-foundation.
        #if canImport(FoundationNetworking)
        delegate?.stream(self, handle: event)
        #else
        delegate?.stream?(self, handle: event)
        #endif
    }

    /// Carries the stream to the run loop it is scheduled in, without
    /// keeping it alive.
    ///
    /// Unchecked, and not because of a lock: a stream scheduled in a run
    /// loop is used on that run loop's thread (`Stream`'s contract), where
    /// the timer that carries it runs. Only that thread touches it.
    private struct Confined: @unchecked Sendable {
        weak var stream: BoundedFileStream?
    }

    /// Every byte delivered: release the file at once.
    private func finish() {
        status = .atEnd
        releaseFile()
    }

    /// Closes the file being read: the stream ended.
    private func releaseFile() {
        try? source?.close()
        source = nil
    }

    private func fail(_ error: any Error) {
        failure = error
        status = .error
        releaseFile()
        announce()
    }
}

/// The C library's `read(2)`, which `InputStream.read(_:maxLength:)`
/// hides inside the stream.
func readFile(_ descriptor: Int32, _ buffer: UnsafeMutableRawPointer, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}
