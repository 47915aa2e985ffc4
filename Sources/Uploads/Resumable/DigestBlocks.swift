import Foundation

/// What the digests here (``MD5``, ``SHA1``) share: bytes fed in pieces of
/// any size, hashed 64 bytes at a time.
package protocol StreamingDigest: Sendable {
    /// A digest of no bytes yet.
    init()
    /// Feeds `bytes` in.
    mutating func update(_ bytes: UnsafeRawBufferPointer)
    /// The digest of every byte fed in.
    consuming func finalize() -> Data
}

extension StreamingDigest {
    /// Feeds `data` in.
    package mutating func update(_ data: Data) {
        data.withUnsafeBytes { update($0) }
    }

    /// The digest of `data`.
    package static func digest(of data: Data) -> Data {
        var digest = Self()
        digest.update(data)
        return digest.finalize()
    }
}

/// A Merkle–Damgård digest (MD5, SHA-1): a state of 32-bit words, which
/// each block of 64 bytes is hashed into, and the bytes not hashed yet.
protocol BlockDigest: StreamingDigest {
    /// The bytes fed in and not hashed yet.
    var blocks: DigestBlocks { get set }
    /// The state, in the order the digest writes it.
    var words: [UInt32] { get }
    /// Whether the message's length in the padding, and the words of the
    /// digest, are big-endian (SHA-1) rather than little-endian (MD5).
    static var isBigEndian: Bool { get }
    /// Hashes the block of 64 bytes at `block` into the state.
    mutating func compress(_ block: UnsafeRawPointer)
}

extension BlockDigest {
    /// Feeds `bytes` in, hashing each whole block.
    mutating func feed(_ bytes: UnsafeRawBufferPointer) {
        // Taken out while it feeds this digest's blocks, so that its bytes
        // are not copied.
        var blocks = DigestBlocks()
        swap(&blocks, &self.blocks)
        blocks.feed(bytes) { compress($0) }
        self.blocks = blocks
    }

    /// The digest of every byte fed in: the padding fed in, then the state.
    consuming func digest() -> Data {
        blocks.padding(bigEndianLength: Self.isBigEndian).withUnsafeBytes { feed($0) }
        var digest = Data(capacity: words.count * 4)
        for word in words {
            withUnsafeBytes(of: Self.isBigEndian ? word.bigEndian : word.littleEndian) { digest.append(contentsOf: $0) }
        }
        return digest
    }
}

/// The bytes of a Merkle–Damgård digest (MD5, SHA-1) not yet hashed:
/// pieces of any size cut into blocks of 64, and the padding that ends the
/// last one.
struct DigestBlocks: Sendable {
    /// How many bytes were fed in.
    private(set) var length: UInt64 = 0
    /// The bytes fed in since the last whole block: fewer than 64.
    private var pending: [UInt8] = []

    /// Feeds `bytes` in, handing each whole block of 64 bytes to
    /// `compress`.
    mutating func feed(_ bytes: UnsafeRawBufferPointer, _ compress: (UnsafeRawPointer) -> Void) {
        guard var next = bytes.baseAddress, !bytes.isEmpty else { return }
        var remaining = bytes.count
        length &+= UInt64(remaining)
        if !pending.isEmpty {
            let taken = min(64 - pending.count, remaining)
            pending.append(contentsOf: UnsafeRawBufferPointer(start: next, count: taken))
            next += taken
            remaining -= taken
            guard pending.count == 64 else { return }
            pending.withUnsafeBytes { compress($0.baseAddress!) }
            pending.removeAll(keepingCapacity: true)
        }
        while remaining >= 64 {
            compress(next)
            next += 64
            remaining -= 64
        }
        if remaining > 0 {
            pending.append(contentsOf: UnsafeRawBufferPointer(start: next, count: remaining))
        }
    }

    /// The padding that ends the message: a 1 bit, zeros up to 56 bytes
    /// into a block, then the length in bits, little-endian (MD5) or
    /// big-endian (SHA-1).
    func padding(bigEndianLength: Bool) -> [UInt8] {
        let bits = length &* 8
        var padding: [UInt8] = [0x80]
        padding.append(contentsOf: repeatElement(0, count: (55 &- Int(length % 64) + 64) % 64))
        withUnsafeBytes(of: bigEndianLength ? bits.bigEndian : bits.littleEndian) { padding.append(contentsOf: $0) }
        return padding
    }
}
