import Foundation

// Only for FoundationNetworking, which opens the stream and then polls it
// (`hasBytesAvailable`, `read`) on the session's queue. Apple's URLSession
// schedules a body stream on a run loop and waits for its events, which
// this stream never sends.
#if canImport(FoundationNetworking)

/// `length` bytes of a file from `offset` (the whole file, or one part of a
/// multipart upload), as an upload body framed by `Content-Length: length`:
/// never more, whatever the file has grown to meanwhile, and an error, not
/// a short end, if the file ends sooner.
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
/// One stream per transfer, used from one thread at a time: the session's
/// own queue opens and reads it. It is not `Sendable`, and need not be.
final class BoundedFileStream: InputStream {
    /// Why the stream failed, when the file did not say.
    enum Failure: Error, Hashable {
        /// The file ended after `found` of the `expected` bytes.
        case fileEnded(found: Int64, expected: Int64)
    }

    private let file: URL
    private let offset: Int64
    private let length: Int64
    private var source: FileHandle?
    private var delivered: Int64 = 0
    private var status: Stream.Status = .notOpen
    private var failure: (any Error)?

    /// A stream of `length` bytes of `file` from `offset`, unopened.
    init(file: URL, offset: Int64 = 0, length: Int64) {
        self.file = file
        self.offset = max(offset, 0)
        self.length = max(length, 0)
        // InputStream's only designated initializers make a backing
        // CFReadStream; this empty one is never used: every member that
        // would touch it is overridden below.
        super.init(data: Data())
    }

    override func open() {
        guard status == .notOpen else { return }
        let source: FileHandle
        do {
            source = try FileHandle(forReadingFrom: file)
            try source.seek(toOffset: UInt64(offset))
        } catch {
            return fail(error)
        }
        self.source = source
        status = .open
        if length == 0 { finish() }
    }

    override func close() {
        try? source?.close()
        source = nil
        if status != .error { status = .closed }
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
        guard let source, len > 0 else { return 0 }
        let wanted = Int(min(Int64(len), length - delivered))
        // Straight into the session's buffer: nothing allocated per read.
        var count: Int
        repeat {
            count = readFile(source.fileDescriptor, buffer, wanted)
        } while count < 0 && errno == EINTR
        guard count > 0 else {
            // The file ended before `length` bytes (or failed): abort, don't
            // end.
            let ended = Failure.fileEnded(found: offset + delivered, expected: offset + length)
            fail(count == 0 ? ended : POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO))
            return -1
        }
        delivered += Int64(count)
        if delivered == length { finish() }
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
    // Reads never wait (a regular file): no run-loop events to deliver.
    override func schedule(in aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}
    override func remove(from aRunLoop: RunLoop, forMode mode: RunLoop.Mode) {}

    /// All `length` bytes delivered: release the file at once.
    private func finish() {
        status = .atEnd
        try? source?.close()
        source = nil
    }

    private func fail(_ error: any Error) {
        failure = error
        status = .error
        try? source?.close()
        source = nil
    }
}

/// The C library's `read(2)`, which `InputStream.read(_:maxLength:)`
/// hides inside the stream.
private func readFile(_ descriptor: Int32, _ buffer: UnsafeMutablePointer<UInt8>, _ count: Int) -> Int {
    read(descriptor, buffer, count)
}

#endif
