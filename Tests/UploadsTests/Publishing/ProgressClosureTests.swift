import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing
import Uploads
import UploadsTesting

/// What a progress closure does with the publishing it watches, besides
/// recording the report: what a user's closure does, run from the threads
/// the uploads report on.
enum ProgressClosureBehaviour: String, CaseIterable, Sendable {
    /// Cancels the publishing once a fifth of it is done.
    case cancelsThePublishing
    /// Takes a snapshot of the publishing at each report.
    case takesASnapshot
    /// Is slow: 50 ms for each of the first five reports.
    case isSlow
}

/// A publishing watched by a progress closure that behaves as it is told:
/// what it reported, and whether two calls of it ever overlapped.
final class ProgressProbe: Sendable {
    let behaviour: ProgressClosureBehaviour
    let recorder = ProgressRecorder()
    private let handle = LockedValue<JobHandle?>(nil)
    private let calls = LockedValue((now: 0, most: 0, slow: 0))
    private let snapshotsTaken = LockedValue<[String]>([])

    init(_ behaviour: ProgressClosureBehaviour) {
        self.behaviour = behaviour
    }

    /// The most calls of the closure that ever overlapped.
    var mostOverlappingCalls: Int { calls.value.most }

    /// The snapshots the closure took.
    var snapshots: [String] { snapshotsTaken.value }

    /// The progress closure.
    var closure: @Sendable (PublishProgress) -> Void {
        { [self] report in
            calls.withValue {
                $0.now += 1
                $0.most = max($0.most, $0.now)
            }
            recorder.handler(report)
            switch behaviour {
            case .cancelsThePublishing:
                if report.fractionCompleted > 0.2 { handle.value?.cancel() }
            case .takesASnapshot:
                if let snapshot = handle.value?.snapshot() {
                    snapshotsTaken.withValue { $0.append(snapshot.description) }
                }
            case .isSlow:
                let slow = calls.withValue { calls in
                    defer { calls.slow += 1 }
                    return calls.slow < 5
                }
                // The issue asks for a closure that takes 50 ms, as slow
                // user code does; nothing waits for it to pass.
                if slow { usleep(50_000) }  // allowed: slow user code, by design
            }
            calls.withValue { $0.now -= 1 }
        }
    }

    /// Performs `job`, whose progress goes to ``closure``, and waits for
    /// it at most a minute.
    func perform(_ job: Job<PublishReceipt>) async -> Result<PublishReceipt, any Error> {
        await withCheckedContinuation { continuation in
            start(job.timeout(after: .seconds(60))) { continuation.resume(returning: $0) }
        }
    }

    /// Starts `job`, whose progress goes to ``closure``, once its handle is
    /// known to the closure, on a queue of its own whose work the global
    /// queue runs.
    @discardableResult
    func start(
        _ job: Job<PublishReceipt>, then handler: @escaping @Sendable (Result<PublishReceipt, any Error>) -> Void
    ) -> JobHandle {
        let queue = DispatchQueue(label: "progress probe", target: .global())
        queue.suspend()
        defer { queue.resume() }
        let started = job.perform(on: queue, then: handler)
        handle.setValue(started)
        return started
    }

    /// Checks what every behaviour must leave: one call at a time, never
    /// backwards, and the outcome the behaviour calls for.
    func expectOutcome(_ outcome: Result<PublishReceipt, any Error>) {
        #expect(mostOverlappingCalls == 1)
        #expect(recorder.neverGoesBackwards)
        #expect(!recorder.reports.isEmpty)
        switch behaviour {
        case .cancelsThePublishing:
            #expect(throws: CancellationError.self) { try outcome.get() }
        case .takesASnapshot:
            #expect(throws: Never.self) { try outcome.get() }
            #expect(!snapshots.isEmpty)
            #expect(snapshots.allSatisfy { $0.contains("publish") }, "\(snapshots.first ?? "")")
        case .isSlow:
            #expect(throws: Never.self) { try outcome.get() }
            #expect(recorder.reports.last?.fractionCompleted == 1)
        }
    }
}

@Suite("Progress closures", .timeLimit(.minutes(1)))
struct ProgressClosureTests {
    /// Eight photos whose uploads report from many threads at once.
    @Test(arguments: ProgressClosureBehaviour.allCases)
    func aClosureThatActsOnThePublishingRunsOutsideEveryLock(behaviour: ProgressClosureBehaviour) async {
        for _ in 0..<5 {
            let probe = ProgressProbe(behaviour)
            let publishing = Job.publishing(
                samplePost(photoSizes: Array(repeating: 10_000, count: 8)),
                using: ThreadedProgressUploader(steps: 100),
                options: PublishOptions(maxConcurrentUploads: 4),
                progress: probe.closure)
            probe.expectOutcome(await probe.perform(publishing))
        }
    }
}

extension S3Storage {
    /// The same closures on a multipart upload to moto's S3 server: its
    /// parts report from URLSession's threads.
    @Suite(
        "Progress closures on S3", .startsProcesses, .timeLimit(.minutes(2)),
        S3Fixture.requirement, .serialized)
    struct S3ProgressClosureTests {
        @Test(arguments: ProgressClosureBehaviour.allCases)
        func aClosureThatActsOnThePublishingRunsOutsideEveryLock(behaviour: ProgressClosureBehaviour) async throws {
            try await S3UploaderTests.withStorage { s3, folder, file in
                let probe = ProgressProbe(behaviour)
                let post = Post(
                    text: "progress",
                    videos: [S3UploaderTests.video(file, key: "posts/progress/video.mp4")],
                    destination: URL(string: "https://media.example.com/posts/progress.json")!)
                let publishing = Job.publishing(
                    post, using: try S3UploaderTests.uploader(s3, folder: folder, concurrentParts: 3),
                    progress: probe.closure)
                probe.expectOutcome(await probe.perform(publishing))
            }
        }
    }
}

extension ProgressClosureTests {
    /// 120 posts at once, on real threads, each upload's attempts failing
    /// at random and retried, a third of the posts cancelled midway from
    /// their own progress closure and a third from another thread: each
    /// post completes once, with its progress one call at a time, never
    /// backwards, and at 100% exactly when it was published. CI runs it
    /// under Thread Sanitizer too.
    @Test func aChaosOfFaultsAndCancelsAcross120PostsKeepsEachPostsProgressInOrder() async throws {
        let posts = 120
        let probes = (0..<posts).map { index in
            ProgressProbe(index % 3 == 0 ? .cancelsThePublishing : .takesASnapshot)
        }
        let outcomes = LockedValue<[Int: [Result<PublishReceipt, any Error>]]>([:])
        let done = DispatchGroup()
        var handles: [JobHandle] = []
        for (index, probe) in probes.enumerated() {
            let uploader = try FaultInjectingUploader(
                wrapping: ThreadedProgressUploader(steps: 20), failureRate: 0.3, seed: UInt64(index))
            let publishing = Job.publishing(
                samplePost(photoSizes: [3_000, 5_000, 7_000], destination: destination("posts/\(index).json")),
                using: uploader,
                options: PublishOptions(
                    maxConcurrentUploads: 2, retry: RetryPolicy(attempts: 3, initialDelay: .milliseconds(1))),
                progress: probe.closure)
            done.enter()
            handles.append(
                probe.start(publishing) { outcome in
                    outcomes.withValue { $0[index, default: []].append(outcome) }
                    done.leave()
                })
        }
        let started = handles
        DispatchQueue.concurrentPerform(iterations: posts) { index in
            if index % 3 == 1 { started[index].cancel() }
        }
        #expect(await done.completed(within: 60))

        for (index, probe) in probes.enumerated() {
            let completions = outcomes.value[index] ?? []
            #expect(completions.count == 1, "post \(index)")
            #expect(probe.mostOverlappingCalls <= 1, "post \(index)")
            #expect(probe.recorder.neverGoesBackwards, "post \(index)")
            let published = (try? completions.first?.get()) != nil
            #expect(
                (probe.recorder.reports.last?.fractionCompleted == 1) == published,
                "post \(index): 100% exactly when published")
        }
        let published = (0..<posts).filter { (try? outcomes.value[$0]?.first?.get()) != nil }.count
        #expect(published > 0 && published < posts, "faults and cancels left some posts published, not all")
    }
}
