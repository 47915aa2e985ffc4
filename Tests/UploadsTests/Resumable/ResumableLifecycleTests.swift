import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing

@testable import Uploads

/// What S3 multipart and tus uploads share, alone on a `TestQueue`: the
/// manifest on disk, keeping or discarding an upload on a cancel or a
/// failure, settling; and every request it makes on the job's queue.
@Suite("Resumable lifecycle", .timeLimit(.minutes(1)))
struct ResumableLifecycleTests {
    static let destination = URL(string: "https://media.example.com/videos/surf.mp4")!
    static let identity = FileIdentity(size: 12, modified: 1_700_000_000.25)
    static let permanent = UploadError.httpStatus(UploadReceipt(destination: destination, status: 400))
    static let transient = UploadError.httpStatus(UploadReceipt(destination: destination, status: 503))
    static let multipart = MultipartManifest(uploadID: "upload-1", partSize: 5 << 20)
    static let uploadURL = URL(string: "https://tus.example.com/files/1")!
    static let tus = TusManifest(uploadURL: uploadURL)

    /// A lifecycle of `Manifest` on `queue`, its manifests in a folder of
    /// its own, the discards it asks for, and the queue each ran on.
    final class Harness<Manifest: ResumableManifest>: Sendable {
        let queue = TestQueue()
        let folder: TemporaryFolder
        let lifecycle: ResumableLifecycle<Manifest>
        /// Each discard's upload, whether it ran on ``queue``, and whether
        /// the manifest was removed when it started.
        let discards = LockedValue<[(handle: Manifest.Handle, onTheJobsQueue: Bool, manifestGone: Bool)]>([])
        /// How long a discard takes to answer; `nil`: it never does.
        let discardTakes: Duration?
        /// The controllers of the jobs and discards that have not answered
        /// yet, kept so that they are not abandoned.
        let unanswered = LockedValue<[any Sendable]>([])

        init(attempts: UploadAttempts = UploadAttempts(), discardTakes: Duration? = .zero) throws {
            folder = try TemporaryFolder()
            self.discardTakes = discardTakes
            lifecycle = ResumableLifecycle(
                folder: folder.url, file: folder.url.appendingPathComponent("surf.mp4"),
                destination: ResumableLifecycleTests.destination, retries: RequestRetries(attempts))
        }

        /// The request that discards `handle`, recording it.
        @Sendable func discard(_ handle: Manifest.Handle) -> Job<Void>? {
            Job { [self] controller in
                let record = (handle, (controller.queue as? TestQueue) === queue, onDisk == nil)
                discards.withValue { $0.append(record) }
                guard let discardTakes else {
                    unanswered.withValue { $0.append(controller) }
                    return
                }
                // allowed: Job.sleep on the harness's TestQueue, whose clock is virtual
                controller.perform(.sleep(for: discardTakes)) { controller.complete(with: $0) }
            }
        }

        /// The manifest of `manifest`'s upload.
        func file(_ manifest: Manifest) -> ManifestFile<Manifest> {
            lifecycle.newManifest(manifest, identity: ResumableLifecycleTests.identity)!
        }

        /// Takes on the upload `manifest` names, as if just created.
        func adopt(_ manifest: Manifest) throws {
            try lifecycle.adopt(manifest.handle, manifest: file(manifest), discarding: discard)
        }

        /// Performs a job that takes on the upload `manifest` names, then
        /// ends with `error`; its outcome once it has one.
        func fail(_ manifest: Manifest, with error: UploadError) -> LockedValue<Job<String>.Outcome?> {
            let outcome = LockedValue<Job<String>.Outcome?>(nil)
            let job = job { controller in
                try self.adopt(manifest)
                self.lifecycle.end(controller, failingWith: error, discarding: self.discard)
            }
            job.perform(on: queue) { outcome.setValue($0) }
            return outcome
        }

        /// Performs a job that takes on the upload `manifest` names, then
        /// cancels it, running the queue after each.
        func cancelAfterAdopting(_ manifest: Manifest) throws {
            let handle = job { _ in try self.adopt(manifest) }.perform(on: queue) { _ in }
            try queue.run()
            handle.cancel()
            try queue.run()
        }

        /// The manifest on disk, if there is one.
        var onDisk: ManifestFile<Manifest>? {
            lifecycle.location.flatMap { ManifestFile<Manifest>.read(from: $0) }
        }

        /// A job of the lifecycle that runs `body` with its controller, which is kept: the job completes only as `body` or
        /// the lifecycle says.
        func job(_ body: @escaping @Sendable (Job<String>.Controller) throws -> Void) -> Job<String> {
            lifecycle.job(identity: { ResumableLifecycleTests.identity }, discarding: discard) {
                [self] controller, _ in
                unanswered.withValue { $0.append(controller) }
                do {
                    try body(controller)
                } catch {
                    controller.fail(with: error)
                }
            }
        }

        deinit {
            folder.remove()
        }
    }

    // MARK: - Cancelling

    @Test func anUploadCreatedAfterItsJobWasCancelledIsDiscardedOnTheJobsQueue() throws {
        let harness = try Harness<TusManifest>()
        let job = harness.job { controller in
            // The creation's answer comes a second later.
            controller.queue.enqueue(after: .seconds(1)) {
                let adopted = Result {
                    try harness.adopt(Self.tus)
                }
                #expect(throws: CancellationError.self) { try adopted.get() }
            }
        }
        let handle = job.perform(on: harness.queue) { _ in }
        try harness.queue.run()
        handle.cancel()

        try harness.queue.advance(by: .seconds(1))
        #expect(harness.discards.value.map(\.handle) == [Self.uploadURL])
        #expect(harness.discards.value.allSatisfy { $0.onTheJobsQueue }, "not on a queue of its own")
        #expect(harness.onDisk == nil, "its manifest, written first, is removed")
    }

    @Test func aCancelRemovesTheManifestThenDiscardsTheUploadOnTheJobsQueue() throws {
        let harness = try Harness<MultipartManifest>()
        let job = harness.job { _ in
            try harness.adopt(Self.multipart)
        }
        let handle = job.perform(on: harness.queue) { _ in }
        try harness.queue.run()
        #expect(harness.onDisk?.manifest.uploadID == "upload-1")

        handle.cancel()
        #expect(harness.discards.value.isEmpty, "sent when the queue runs, not on the cancelling thread")
        try harness.queue.run()
        #expect(harness.discards.value.map(\.handle) == ["upload-1"])
        #expect(harness.discards.value.allSatisfy { $0.onTheJobsQueue })
        #expect(harness.discards.value.allSatisfy { $0.manifestGone }, "removed before the abort is sent")
    }

    @Test func aCancelThatKeepsWhatIsStoredDiscardsNothing() throws {
        var attempts = UploadAttempts()
        attempts.keepsStoredPartsWhenCancelled = true
        let harness = try Harness<MultipartManifest>(attempts: attempts)
        try harness.cancelAfterAdopting(Self.multipart)

        #expect(harness.discards.value.isEmpty)
        #expect(harness.onDisk?.manifest.uploadID == "upload-1", "kept to resume")
    }

    // MARK: - Failing

    @Test func aFailureForGoodFailsTheJobOnceTheUploadIsDiscarded() throws {
        let harness = try Harness<MultipartManifest>(discardTakes: .seconds(2))
        let outcome = harness.fail(Self.multipart, with: Self.permanent)
        try harness.queue.run()
        #expect(harness.discards.value.map(\.handle) == ["upload-1"])
        #expect(harness.onDisk == nil)
        #expect(outcome.value == nil, "not before the abort answered")

        try harness.queue.advance(by: .seconds(2))
        #expect(throws: Self.permanent) { try outcome.value?.get() }
    }

    @Test func aDiscardThatNeverAnswersEndsAtTheAttemptsTimeLimit() throws {
        let harness = try Harness<MultipartManifest>(
            attempts: UploadAttempts(timeout: .seconds(30)), discardTakes: nil)
        let outcome = harness.fail(Self.multipart, with: Self.permanent)
        try harness.queue.advance(by: .seconds(29))
        #expect(outcome.value == nil)
        try harness.queue.advance(by: .seconds(1))
        #expect(throws: Self.permanent) { try outcome.value?.get() }
    }

    @Test func aFailureThePolicyRetriesKeepsTheUploadToResume() throws {
        let harness = try Harness<TusManifest>()
        let outcome = harness.fail(Self.tus, with: Self.transient)
        try harness.queue.run()

        #expect(throws: Self.transient) { try outcome.value?.get() }
        #expect(harness.discards.value.isEmpty)
        #expect(harness.onDisk?.manifest.uploadURL == Self.uploadURL)
    }

    @Test func aFinishedUploadIsNeverDiscarded() throws {
        let harness = try Harness<TusManifest>()
        let finished = harness.file(TusManifest(uploadURL: Self.uploadURL, finished: true))
        try finished.save(to: #require(harness.lifecycle.location))
        let outcome = LockedValue<Job<String>.Outcome?>(nil)
        let job = harness.job { controller in
            let left = try #require(harness.lifecycle.manifestLeft())
            harness.lifecycle.resume(left.manifest.uploadURL, manifest: left)
            harness.lifecycle.end(controller, failingWith: Self.permanent, discarding: harness.discard)
        }
        job.perform(on: harness.queue) { outcome.setValue($0) }
        try harness.queue.run()

        #expect(throws: Self.permanent) { try outcome.value?.get() }
        #expect(harness.discards.value.isEmpty, "the server's copy of the file")
        #expect(harness.onDisk == finished)
    }

    // MARK: - Settling

    @Test func settlingRemovesAManifestWhoseUploadTheServerJoinedIntoItsObject() throws {
        let harness = try Harness<MultipartManifest>()
        let settled = LockedValue<Bool?>(nil)
        let job = harness.job { _ in
            try harness.adopt(Self.multipart)
            harness.lifecycle.update { $0.parts[1] = "\"etag-1\"" }
            harness.lifecycle.settle { settled.setValue($0) }
        }
        job.perform(on: harness.queue) { _ in }
        try harness.queue.run()

        #expect(settled.value == true)
        #expect(harness.onDisk == nil)
        #expect(harness.discards.value.isEmpty)
    }

    @Test func settlingMarksAManifestTheServerKeepsFinished() throws {
        let harness = try Harness<TusManifest>()
        let settled = LockedValue<Bool?>(nil)
        let job = harness.job { _ in
            try harness.adopt(Self.tus)
            harness.lifecycle.settle { settled.setValue($0) }
        }
        job.perform(on: harness.queue) { _ in }
        try harness.queue.run()

        #expect(settled.value == true)
        #expect(harness.onDisk?.manifest == TusManifest(uploadURL: Self.uploadURL, finished: true))
    }

    /// Takes on the upload `manifest` names, cancels its job with attempts
    /// that keep what is stored, then settles it, as when the cancel comes
    /// with the last answer: whether it settled, and the harness.
    static func settleAfterACancelThatKeeps<Manifest: ResumableManifest>(
        _ manifest: Manifest
    ) throws -> (settled: Bool?, harness: Harness<Manifest>) {
        var attempts = UploadAttempts()
        attempts.keepsStoredPartsWhenCancelled = true
        let harness = try Harness<Manifest>(attempts: attempts)
        try harness.cancelAfterAdopting(manifest)
        let settled = LockedValue<Bool?>(nil)
        harness.lifecycle.settle { settled.setValue($0) }
        return (settled.value, harness)
    }

    @Test func aCancelAsTheLastAnswerCameLeavesAKeptManifestAsItWas() throws {
        let (settled, harness) = try Self.settleAfterACancelThatKeeps(Self.tus)
        #expect(settled == false)
        #expect(harness.onDisk?.manifest == Self.tus, "not marked finished")
    }

    @Test func aCancelAsTheLastAnswerCameStillSettlesAnUploadTheServerMadeIntoItsObject() throws {
        let (settled, harness) = try Self.settleAfterACancelThatKeeps(Self.multipart)
        #expect(settled == true)
        #expect(harness.onDisk == nil, "nothing is left to resume")
    }

    @Test func aCancelAsTheLastAnswerCameStandsForATusUploadThatKeepsNoManifest() throws {
        // With attempts that keep, the cancel is seen and nothing is
        // discarded: the state a cancel that discards is in between its
        // two steps.
        var attempts = UploadAttempts()
        attempts.keepsStoredPartsWhenCancelled = true
        let harness = try Harness<TusManifest>(attempts: attempts)
        let handle = harness.job { _ in harness.lifecycle.resume(Self.uploadURL, manifest: nil) }
            .perform(on: harness.queue) { _ in }
        try harness.queue.run()
        handle.cancel()
        let settled = LockedValue<Bool?>(nil)
        harness.lifecycle.settle { settled.setValue($0) }

        #expect(settled.value == false, "left to the cancel, which discards it unless it keeps")
    }

    @Test func aFileThatCannotBeReadFailsTheJobBeforeTheLifecycleBegins() throws {
        let harness = try Harness<MultipartManifest>()
        let missing = UploadError.fileNotFound(URL(fileURLWithPath: "/nowhere/surf.mp4"))
        let ran = LockedValue(false)
        let job: Job<String> = harness.lifecycle.job(
            identity: { () throws(UploadError) in throw missing }, discarding: harness.discard
        ) { _, _ in ran.setValue(true) }
        let outcome = LockedValue<Job<String>.Outcome?>(nil)
        let handle = job.perform(on: harness.queue) { outcome.setValue($0) }
        try harness.queue.run()
        handle.cancel()
        try harness.queue.run()

        #expect(throws: missing) { try outcome.value?.get() }
        #expect(!ran.value)
        #expect(harness.discards.value.isEmpty)
    }

    // MARK: - The manifest's writes

    @Test func startingOverRemovesTheManifestBeforeTheNextCreation() throws {
        let harness = try Harness<MultipartManifest>()
        let removedFirst = LockedValue<Bool?>(nil)
        let job = harness.job { controller in
            try harness.adopt(Self.multipart)
            controller.perform(harness.lifecycle.startOver()) { outcome in
                removedFirst.setValue(harness.onDisk == nil)
                controller.complete(with: outcome.map { "started over" })
            }
        }
        let outcome = LockedValue<Job<String>.Outcome?>(nil)
        job.perform(on: harness.queue) { outcome.setValue($0) }
        try harness.queue.run()

        #expect(removedFirst.value == true)
        #expect(try outcome.value?.get() == "started over")
        #expect(harness.lifecycle.handle == nil)
    }

    @Test func aManifestAnotherUploadReplacedIsNotWrittenOver() throws {
        let harness = try Harness<MultipartManifest>()
        let location = try #require(harness.lifecycle.location)
        let newer = harness.file(MultipartManifest(uploadID: "upload-2", partSize: 5 << 20))
        let job = harness.job { _ in
            try harness.adopt(Self.multipart)
            try newer.save(to: location)
            harness.lifecycle.update { $0.parts[1] = "\"etag-1\"" }
            harness.lifecycle.settle { _ in }
        }
        job.perform(on: harness.queue) { _ in }
        try harness.queue.run()

        #expect(harness.onDisk == newer, "neither written over nor removed")
    }

    /// A manifest as the version before `ManifestFile` wrote it (each JSON
    /// here is that version's output): read, and written again to the
    /// byte.
    static func expectReadAndWrittenAlike<Manifest: ResumableManifest>(
        _ json: String, as expected: Manifest
    ) throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let location = folder.url.appendingPathComponent("manifest.json")
        try Data(json.utf8).write(to: location)

        let read = try #require(
            ManifestFile<Manifest>.load(
                from: location, file: URL(fileURLWithPath: "/tmp/surf.mp4"), destination: destination))
        #expect(read.manifest == expected)
        #expect(read.identity == identity)
        try read.save(to: location)
        #expect(String(decoding: try Data(contentsOf: location), as: UTF8.self) == json)
    }

    @Test func aMultipartManifestOfTheFormatBeforeIsReadAndWrittenAlike() throws {
        var expected = Self.multipart
        expected.parts = [1: "\"etag-1\""]
        try Self.expectReadAndWrittenAlike(
            #"{"destination":"https:\/\/media.example.com\/videos\/surf.mp4","file":"\/tmp\/surf.mp4","fileModified":1700000000.25,"fileSize":12,"partSize":5242880,"parts":{"1":"\"etag-1\""},"uploadID":"upload-1","version":1}"#,
            as: expected)
    }

    @Test(arguments: [
        (
            #"{"bytesSHA1":"abc","destination":"https:\/\/media.example.com\/videos\/surf.mp4","expires":1700000100,"file":"\/tmp\/surf.mp4","fileModified":1700000000.25,"fileSize":12,"finished":true,"uploadURL":"https:\/\/tus.example.com\/files\/1","version":1}"#,
            TusManifest(uploadURL: uploadURL, expires: 1_700_000_100, bytesSHA1: "abc", finished: true)
        ),
        (
            #"{"destination":"https:\/\/media.example.com\/videos\/surf.mp4","file":"\/tmp\/surf.mp4","fileModified":1700000000.25,"fileSize":12,"uploadURL":"https:\/\/tus.example.com\/files\/1","version":1}"#,
            tus
        ),
    ])
    func aTusManifestOfTheFormatBeforeIsReadAndWrittenAlike(json: String, expected: TusManifest) throws {
        try Self.expectReadAndWrittenAlike(json, as: expected)
    }
}
