import Foundation
import Testing

/// The helpers the other tests rest on: a helper that is wrong makes every
/// test that uses it agree with its mistake.
@Suite("Test support", .timeLimit(.minutes(1)))
struct TestSupportTests {
    /// Made in doubling runs of the 256-byte pattern: the same bytes as
    /// computing each one, at the edges of a run too.
    @Test(arguments: [0, 1, 255, 256, 257, 511, 512, 1_000, 70_001])
    func patternedBytesAreEachIndexPlusTheSeed(count: Int) {
        for seed: UInt8 in [0, 1, 200] {
            let expected = Data((0..<count).map { UInt8(truncatingIfNeeded: $0 &+ Int(seed)) })
            #expect(patternedBytes(count, seed: seed) == expected, "\(count) bytes from seed \(seed)")
        }
    }

    /// Each mebibyte starts at its own place in the pattern, so a part sent to
    /// the wrong place shows.
    @Test func aPatternedFileHoldsEachMebibyteFromItsOwnSeed() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("file")
        let mebibyte = 1024 * 1024
        try writePatternedFile(file, size: 2 * mebibyte + 3)
        let bytes = try Data(contentsOf: file)
        #expect(bytes.count == 2 * mebibyte + 3)
        #expect(bytes.prefix(mebibyte) == patternedBytes(mebibyte, seed: 1))
        #expect(Data(bytes[mebibyte..<2 * mebibyte]) == patternedBytes(mebibyte, seed: 8))
        #expect(Data(bytes.suffix(3)) == patternedBytes(3))
    }
}
