import Foundation
import JobKit

extension HTTPBody {
    /// The body's `Digest` (MD5, SHA-1), found on the calling thread
    /// (which waits for the disk).
    func digest<Digest: StreamingDigest>(_: Digest.Type) throws(UploadError) -> Data {
        switch self {
        case .empty: Digest.digest(of: Data())
        case .data(let data): Digest.digest(of: data)
        case .file(let file, let offset, let length, let head, let tail):
            try Self.digest(Digest.self, of: file, offset: offset, length: length, head: head, tail: tail)
        }
    }

    /// The `Digest` of `head`, `length` bytes of `file` from `offset`, then
    /// `tail`; an error when the file cannot be read or ends sooner.
    ///
    /// Read 64 KiB at a time into one buffer: below the size from which
    /// the C library maps each allocation afresh (and the kernel zeroes its
    /// pages), which would cost more than hashing them.
    private static func digest<Digest: StreamingDigest>(
        _: Digest.Type, of file: URL, offset: Int64, length: Int64, head: Data, tail: Data
    ) throws(UploadError) -> Data {
        let handle: FileHandle
        do {
            handle = try FileHandle(forReadingFrom: file)
            try handle.seek(toOffset: UInt64(offset))
        } catch {
            throw .unreadableFile(file, reason: error.localizedDescription)
        }
        defer { try? handle.close() }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 << 10, alignment: 16)
        defer { buffer.deallocate() }
        var digest = Digest()
        digest.update(head)
        var read: Int64 = 0
        while read < length {
            var count: Int
            repeat {
                count = readFile(handle.fileDescriptor, buffer.baseAddress!, Int(min(length - read, 64 << 10)))
            } while count < 0 && errno == EINTR
            guard count > 0 else {
                let reason =
                    count == 0
                    ? "it shrank from \(offset + length) to \(offset + read) bytes during the upload"
                    : String(cString: strerror(errno))
                throw .unreadableFile(file, reason: reason)
            }
            digest.update(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
            read += Int64(count)
        }
        digest.update(tail)
        return digest.finalize()
    }
}
