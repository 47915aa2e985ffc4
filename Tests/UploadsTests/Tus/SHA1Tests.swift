import Foundation
import TestSupport
import Testing

@testable import Uploads

/// Our SHA-1 against RFC 3174's test vectors and Python's `hashlib`.
@Suite("SHA-1", .startsProcesses, .timeLimit(.minutes(1)))
struct SHA1Tests {
    /// RFC 3174, section 7.3: each message repeated `count` times.
    @Test(arguments: [
        ("abc", 1, "a9993e364706816aba3e25717850c26c9cd0d89d"),
        ("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 1, "84983e441c3bd26ebaae4aa1f95129e5e54670f1"),
        ("a", 1_000_000, "34aa973cd4c4daa4f61eeb2bdbad27316534016f"),
        (String(repeating: "01234567", count: 8), 10, "dea356a2cddd90c7a7ecedc5ebb563934f460452"),
    ])
    func rfc3174TestVectors(message: String, count: Int, digest: String) {
        var sha1 = SHA1()
        let piece = Data(message.utf8)
        for _ in 0..<count {
            sha1.update(piece)
        }
        #expect(sha1.finalize().hex == digest)
    }

    @Test func noBytesAndTheFoxAsPythonHashesThem() {
        // hashlib.sha1(b"").hexdigest(), and of the doc comment's sentence.
        #expect(SHA1.digest(of: Data()).hex == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
        #expect(
            SHA1.digest(of: Data("The quick brown fox jumps over the lazy dog".utf8)).base64EncodedString()
                == "L9ThxnotKPzthJ7hu3bnORuT6xI=")
    }

    @Test func theDigestDoesNotDependOnHowTheBytesAreCut() {
        let bytes = Data((0..<1_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        let whole = SHA1.digest(of: bytes)
        for size in [1, 3, 55, 56, 63, 64, 65, 127, 999] {
            var sha1 = SHA1()
            var offset = 0
            while offset < bytes.count {
                sha1.update(bytes[offset..<min(offset + size, bytes.count)])
                offset += size
            }
            #expect(sha1.finalize() == whole, "pieces of \(size) bytes")
        }
    }

    /// Lengths around the padding's edge (55, 56 and 64 bytes each end a
    /// block differently), against Python's `hashlib`.
    @Test func lengthsAroundThePaddingAgreeWithPython() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let bytes = patternedBytes(130, seed: 9)
        let file = try folder.file("bytes", bytes: bytes)
        for length in [0, 1, 54, 55, 56, 57, 63, 64, 65, 119, 120, 128, 130] {
            let python = try await pythonDigest("sha1", of: file, length: length)
            #expect(SHA1.digest(of: bytes.prefix(length)).hex == python, "\(length) bytes")
        }
    }
}
