import Foundation
import JobKit
import JobKitTesting
import Testing

@testable import Uploads

/// `DirectoryCopy` and cancellation, with the cancel forced between a
/// step's copy and the moment it hands the files back: the interleaving
/// that real threads hit only by chance.
@Suite("DirectoryCopy", .timeLimit(.minutes(1)))
struct DirectoryCopyTests {
    /// Copies a 12-byte file to `target` in chunks of 4 on a `TestQueue`
    /// (3 chunks, then the read of 0 bytes that ends it: 4 steps), calling
    /// `afterChunk` with the step's number and the job's handle after each
    /// step's copy; returns the steps taken and the outcomes.
    private func copyTwelveBytes(
        from source: URL,
        to target: URL,
        afterChunk: @escaping @Sendable (_ step: Int, _ handle: JobHandle?) -> Void = { _, _ in }
    ) throws -> (steps: Int, recorder: OutcomeRecorder) {
        let handle = LockedValue<JobHandle?>(nil)
        let steps = LockedValue(0)
        let copy = try DirectoryCopy(
            media: Media(file: source, destination: destination("video.mov"), contentType: "video/quicktime"),
            size: 12,
            target: target,
            chunkSize: 4,
            afterChunk: {
                let step = steps.withValue { count -> Int in
                    count += 1
                    return count
                }
                afterChunk(step, handle.value)
            }
        )
        let queue = TestQueue()
        let recorder = OutcomeRecorder()
        handle.setValue(
            Job<UploadReceipt> { controller in
                controller.onCancel { copy.cancel() }
                copy.step(controller: controller, pace: nil, progress: { _ in })
            }
            .perform(on: queue, then: recorder.handler)
        )
        try queue.run()
        return (steps.value, recorder)
    }

    /// Cancelling inside each of the 4 steps, the last included (its read
    /// returned 0 bytes), leaves no file under either name.
    @Test(arguments: 1...4)
    func aCancelInsideAStepNeverRenamesAndLeavesNothing(cancellingInStep step: Int) throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let source = try folder.file("source.mov", bytes: patternedBytes(12))
        let target = folder.url.appendingPathComponent("out/video.mov")
        try FileManager.default.createDirectory(
            at: target.deletingLastPathComponent(), withIntermediateDirectories: true)

        let (steps, recorder) = try copyTwelveBytes(from: source, to: target) { current, handle in
            if current == step { handle?.cancel() }
        }

        #expect(steps == step)
        #expect(recorder.outcomes.count == 1)
        #expect(recorder.error is CancellationError)
        #expect(folder.files() == ["source.mov"])
    }

    @Test func withoutACancelTheFourthStepRenamesTheWholeFile() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let source = try folder.file("source.mov", bytes: patternedBytes(12))
        let target = folder.url.appendingPathComponent("video.mov")
        let (steps, recorder) = try copyTwelveBytes(from: source, to: target)
        #expect(steps == 4)
        #expect(recorder.isSucceeded)
        #expect(try Data(contentsOf: target) == patternedBytes(12))
    }
}
