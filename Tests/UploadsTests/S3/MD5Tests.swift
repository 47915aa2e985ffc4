import Foundation
import TestSupport
import Testing

@testable import Uploads

/// Our MD5 against RFC 1321's test suite and against Python's `hashlib`.
// Two minutes: its comparison with Python starts python3 nine times and
// hashes 5 MiB in a debug build; in CI's Thread Sanitizer pass, beside the
// other Uploads suites (the Outbox's among them) on two cores, it once
// passed 60 s (it takes 20 s in the plain debug pass).
@Suite("MD5", .startsProcesses, .timeLimit(.minutes(2)))
struct MD5Tests {
    static func hex(_ digest: Data) -> String {
        digest.hex
    }

    /// RFC 1321, appendix A.5.
    @Test(arguments: [
        ("", "d41d8cd98f00b204e9800998ecf8427e"),
        ("a", "0cc175b9c0f1b6a831c399e269772661"),
        ("abc", "900150983cd24fb0d6963f7d28e17f72"),
        ("message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
        ("abcdefghijklmnopqrstuvwxyz", "c3fcd3d76192e4007dfb496cca67e13b"),
        ("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789", "d174ab98d277d9f5a5611c2c9f419d9f"),
        (
            "12345678901234567890123456789012345678901234567890123456789012345678901234567890",
            "57edf4a22be3c955ac49da2e2107b67a"
        ),
    ])
    func rfc1321TestSuite(message: String, digest: String) {
        #expect(Self.hex(MD5.digest(of: Data(message.utf8))) == digest)
    }

    @Test func aMillionAsFedInPiecesOfEverySize() {
        var md5 = MD5()
        let piece = Data(repeating: UInt8(ascii: "a"), count: 1_000)
        for _ in 0..<1_000 {
            md5.update(piece)
        }
        #expect(Self.hex(md5.finalize()) == "7707d6ae4e027c70eea2a935c2296f21")
    }

    @Test func theDigestDoesNotDependOnHowTheBytesAreCut() {
        let bytes = Data((0..<1_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) })
        let whole = MD5.digest(of: bytes)
        for size in [1, 3, 55, 56, 63, 64, 65, 127, 999] {
            var md5 = MD5()
            var offset = 0
            while offset < bytes.count {
                md5.update(bytes[offset..<min(offset + size, bytes.count)])
                offset += size
            }
            #expect(md5.finalize() == whole, "pieces of \(size) bytes")
        }
        // Lengths around the padding's edge, each against the whole.
        for length in 54...66 {
            var md5 = MD5()
            md5.update(bytes.prefix(length))
            #expect(md5.finalize() == MD5.digest(of: bytes.prefix(length)))
        }
    }

    @Test func lengthsAroundThePaddingsEdgeAgreeWithPython() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("part.bin")
        try writePatternedFile(file, size: 5 * 1024 * 1024 + 12_345)
        let data = try Data(contentsOf: file)
        for length in [55, 56, 57, 63, 64, 65, 119, 120, 5 * 1024 * 1024 + 12_345] {
            #expect(
                Self.hex(MD5.digest(of: data.prefix(length)))
                    == (try await pythonDigest("md5", of: file, length: length)),
                "\(length) bytes")
        }
    }
}
