import Foundation
import JobKit
import JobKitTesting
import Testing

@testable import Uploads

/// The parts' MD5s, found ahead of the sends that ask for them.
@Suite("Digests ahead of the sends", .timeLimit(.minutes(1)))
struct AheadDigestsTests {
    /// Asks for each digest in `order` and waits for it.
    static func digests(_ digests: AheadDigests, in order: [Int]) async throws -> [Int: Result<Data, any Error>] {
        var found: [Int: Result<Data, any Error>] = [:]
        for index in order {
            // A bound, not a speed: 10 s was passed twice in CI's sanitized
            // pass, its two cores busy with the other suites.
            let outcome = try await withTimeLimit(.seconds(30)) {
                await withCheckedContinuation { continuation in
                    digests.digest(index).perform(on: DispatchQueue.global()) { continuation.resume(returning: $0) }
                }
            }
            found[index] = outcome
        }
        return found
    }

    @Test(arguments: [[0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [2, 0, 5, 1, 4, 3]])
    func eachPartsDigestIsTheMD5OfItsBytesWhateverOrderTheyAreAskedIn(order: [Int]) async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("video.mp4")
        let partSize = 100_003
        try writePatternedFile(file, size: 5 * partSize + 77)
        let data = try Data(contentsOf: file)
        let bodies = (0..<6).map {
            HTTPBody.file(file, offset: Int64($0 * partSize), length: Int64(min(partSize, data.count - $0 * partSize)))
        }

        let found = try await Self.digests(AheadDigests(bodies, window: 2), in: order)

        for index in 0..<6 {
            let expected = MD5.digest(of: data[(index * partSize)..<min((index + 1) * partSize, data.count)])
            #expect(try found[index]?.get() == expected, "part \(index + 1)")
        }
    }

    @Test func aPartTheFileNoLongerHoldsFailsAloneWithTheFilesReason() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("video.mp4")
        try writePatternedFile(file, size: 150_000)
        let bodies = [
            HTTPBody.file(file, offset: 0, length: 100_000), .file(file, offset: 100_000, length: 100_000),
            .data(Data("abc".utf8)),
        ]

        let found = try await Self.digests(AheadDigests(bodies, window: 1), in: [0, 1, 2])

        #expect(try found[0]?.get() == MD5.digest(of: try Data(contentsOf: file).prefix(100_000)))
        #expect(
            throws: UploadError.unreadableFile(file, reason: "it shrank from 200000 to 150000 bytes during the upload")
        ) {
            try found[1]?.get()
        }
        #expect(try found[2]?.get() == MD5.digest(of: Data("abc".utf8)))
    }
}
