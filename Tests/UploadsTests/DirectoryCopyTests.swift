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
    /// A file of 3 chunks takes 4 steps: 3 chunks, then the read of 0 bytes
    /// that ends it. Cancelling inside each of them, the last included,
    /// leaves no file under either name.
    @Test(arguments: 1...4)
    func aCancelInsideAStepNeverRenamesAndLeavesNothing(cancellingInStep step: Int) throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let source = try folder.file("source.mov", bytes: patternedBytes(12))
        let target = folder.url.appendingPathComponent("out/video.mov")
        try FileManager.default.createDirectory(
            at: target.deletingLastPathComponent(), withIntermediateDirectories: true)

        let handle = LockedValue<JobHandle?>(nil)
        let steps = LockedValue(0)
        let copy = try DirectoryCopy(
            media: Media(file: source, destination: destination("video.mov"), contentType: "video/quicktime"),
            size: 12,
            target: target,
            chunkSize: 4,
            afterChunk: {
                let current = steps.withValue { count -> Int in
                    count += 1
                    return count
                }
                if current == step { handle.value?.cancel() }
            }
        )
        let queue = TestQueue()
        let recorder = OutcomeRecorder()
        handle.setValue(
            Job<Void> { controller in
                controller.onCancel { copy.cancel() }
                copy.step(controller: controller, pace: nil, progress: { _ in })
            }
            .perform(on: queue, then: recorder.handler)
        )
        try queue.run()

        #expect(steps.value == step)
        #expect(recorder.outcomes.count == 1)
        #expect(recorder.error is CancellationError)
        #expect(folder.files() == ["source.mov"])
    }

    @Test func withoutACancelTheFourthStepRenamesTheWholeFile() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let source = try folder.file("source.mov", bytes: patternedBytes(12))
        let target = folder.url.appendingPathComponent("video.mov")
        let steps = LockedValue(0)
        let copy = try DirectoryCopy(
            media: Media(file: source, destination: destination("video.mov"), contentType: "video/quicktime"),
            size: 12,
            target: target,
            chunkSize: 4,
            afterChunk: { steps.withValue { $0 += 1 } }
        )
        let queue = TestQueue()
        let recorder = OutcomeRecorder()
        Job<Void> { controller in copy.step(controller: controller, pace: nil, progress: { _ in }) }
            .perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(steps.value == 4)
        #expect(recorder.isSucceeded)
        #expect(try Data(contentsOf: target) == patternedBytes(12))
    }
}
