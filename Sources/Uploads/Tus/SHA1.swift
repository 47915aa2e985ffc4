import Foundation

/// The SHA-1 digest (RFC 3174) of a stream of bytes, fed in pieces of any
/// size: what tus servers check a `PATCH`'s bytes against
/// (`Upload-Checksum: sha1`).
///
/// Not for security: SHA-1 is broken against an attacker who picks the
/// bytes. tus uses it, and so do we, to catch bytes changed by accident on
/// the way.
///
/// ```swift
/// var sha1 = SHA1()
/// sha1.update(Data("The quick brown fox ".utf8))
/// sha1.update(Data("jumps over the lazy dog".utf8))
/// let checksum = sha1.finalize().base64EncodedString()  // "L9ThxnotKPzthJ7hu3bnORuT6xI="
/// ```
package struct SHA1: BlockDigest {
    /// The digest's length in bytes.
    package static let byteCount = 20

    private var h0: UInt32 = 0x6745_2301
    private var h1: UInt32 = 0xefcd_ab89
    private var h2: UInt32 = 0x98ba_dcfe
    private var h3: UInt32 = 0x1032_5476
    private var h4: UInt32 = 0xc3d2_e1f0
    var blocks = DigestBlocks()
    static let isBigEndian = true

    /// A digest of no bytes yet.
    package init() {}

    /// Feeds `bytes` in.
    package mutating func update(_ bytes: UnsafeRawBufferPointer) {
        feed(bytes)
    }

    /// The digest of every byte fed in: 20 bytes.
    package consuming func finalize() -> Data {
        digest()
    }

    var words: [UInt32] { [h0, h1, h2, h3, h4] }

    /// Runs one block of 64 bytes at `block` through the 80 steps
    /// (RFC 3174, section 6.1, method 1): four rounds of twenty, each with
    /// its function and constant.
    mutating func compress(_ block: UnsafeRawPointer) {
        withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 80) { buffer in
            // A pointer, not the buffer: no bounds check on each word in
            // debug builds.
            let w = buffer.baseAddress!
            for t in 0..<16 {
                w[t] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: t &* 4, as: UInt32.self))
            }
            for t in 16..<80 {
                w[t] = rotate(w[t &- 3] ^ w[t &- 8] ^ w[t &- 14] ^ w[t &- 16], 1)
            }
            var (a, b, c, d, e) = (h0, h1, h2, h3, h4)
            for t in 0..<20 {
                (e, d, c, b, a) = (d, c, rotate(b, 30), a, step(a, (b & c) | (~b & d), e, w[t], 0x5a82_7999))
            }
            for t in 20..<40 {
                (e, d, c, b, a) = (d, c, rotate(b, 30), a, step(a, b ^ c ^ d, e, w[t], 0x6ed9_eba1))
            }
            for t in 40..<60 {
                (e, d, c, b, a) = (d, c, rotate(b, 30), a, step(a, (b & c) | (b & d) | (c & d), e, w[t], 0x8f1b_bcdc))
            }
            for t in 60..<80 {
                (e, d, c, b, a) = (d, c, rotate(b, 30), a, step(a, b ^ c ^ d, e, w[t], 0xca62_c1d6))
            }
            h0 &+= a
            h1 &+= b
            h2 &+= c
            h3 &+= d
            h4 &+= e
        }
    }
}

// Transparent, so that they are inlined in debug builds too, as MD5's
// steps are.

/// `(a <<< 5) + f + e + w + k`: the new `a` of each step.
@_transparent
private func step(_ a: UInt32, _ f: UInt32, _ e: UInt32, _ w: UInt32, _ k: UInt32) -> UInt32 {
    rotate(a, 5) &+ f &+ e &+ w &+ k
}

/// `x` rotated left by `n` bits.
@_transparent
private func rotate(_ x: UInt32, _ n: UInt32) -> UInt32 {
    x << n | x >> (32 &- n)
}
