import Foundation
import JobKit

extension HTTPBody {
    /// The body's `Digest` (MD5, SHA-1), found on the calling thread
    /// (which waits for the disk).
    func digest<Digest: StreamingDigest>(_: Digest.Type) throws(UploadError) -> Data {
        var digest = Digest()
        for segment in segments {
            switch segment {
            case .bytes(let bytes): digest.update(bytes)
            case .file(let file, let offset, let length):
                try Self.update(&digest, with: file, offset: offset, length: length)
            }
        }
        return digest.finalize()
    }

    /// Adds `length` bytes of `file` from `offset` to `digest`; an error
    /// when the file cannot be read or ends sooner.
    ///
    /// Read 64 KiB at a time into one buffer: below the size from which
    /// the C library maps each allocation afresh (and the kernel zeroes its
    /// pages), which would cost more than hashing them.
    private static func update<Digest: StreamingDigest>(
        _ digest: inout Digest, with file: URL, offset: Int64, length: Int64
    ) throws(UploadError) {
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
    }
}
