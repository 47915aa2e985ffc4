import Dispatch
import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing

/// A combinator, wrapped around a job as an app would: the job's outcome
/// passes through it unchanged.
enum Wrapper: String, CaseIterable, Sendable {
    case then, map, recover, mapError, always, timeout, retry, group, collect, zip, race, firstSuccess, sequence, named
    case repeated, collectPages, shared, zipOfOne

    /// `job` inside this combinator.
    func around(_ job: Job<Void>) -> Job<Void> {
        switch self {
        case .then: job.then { .succeeded }
        case .map: job.map { $0 }
        case .recover: job.recover { error in throw error }
        case .mapError: job.mapError { $0 }
        case .always: job.always { _ in }
        // An hour: longer than any test runs, on any clock.
        case .timeout: job.timeout(after: .seconds(3_600))
        case .retry: job.retry(attempts: 2)
        case .group: Job.group([job])
        case .collect: Job.collect([job]).discardingValue()
        case .zip: Job.zip(job, Job.succeeded(1)).discardingValue()
        case .race: Job.race([job])
        case .firstSuccess: Job.firstSuccess([job])
        case .sequence: Job.sequence([job])
        case .named: job.named("nested")
        case .repeated: job.repeated(while: { _ in false })
        case .collectPages: Job.collectPages(from: 0) { _ in job.map { JobPage<Int, Int>.last([]) } }.discardingValue()
        case .shared: job.shared()
        // A zip's run right inside a zip's: nothing between them keeps
        // the queue, the leaf asks for it.
        case .zipOfOne: Job.zip(job)
        }
    }

    /// Every combinator but `timeout`, whose timer an `ImmediateQueue` fires
    /// at once.
    static let withoutTimers = allCases.filter { $0 != .timeout }
}

/// `leaf` inside `depth` combinators, taken from `wrappers` in turn, so
/// that every one of them holds every other.
func nested(_ leaf: Job<Void>, depth: Int, in wrappers: [Wrapper]) -> Job<Void> {
    var job = leaf
    for level in 0..<depth { job = wrappers[level % wrappers.count].around(job) }
    return job
}

/// A leaf that finishes after a second, and counts its cancels in `cancels`.
private func sleeping(cancels: LockedValue<Int>) -> Job<Void> {
    Job { controller in
        controller.onCancel { cancels.withValue { $0 += 1 } }
        // allowed: performed on a TestQueue only, so the sleep is virtual time.
        controller.perform(Job.sleep(for: .seconds(1))) { outcome in controller.complete(with: outcome) }
    }
}

/// Each test is seconds of work for one thread (some 40 in all, in a debug
/// build), on threads of its own: one at a time, so that the suite does not
/// take two dozen threads' share of the machine from the tests beside it,
/// with a limit that allows a busy machine (the work is bounded: a
/// `TestQueue` throws past its steps).
@Suite("Jobs nested deep", .serialized, .timeLimit(.minutes(3)))
struct NestingTests {
    /// How deep the jobs nest: ten times as deep as crashed a thread of
    /// 512 KiB, as a dispatch worker's is, before outcomes, cancels and
    /// releases went through a trampoline (a `map` of a `map` crashed it
    /// before 1,000 levels completed, and 10,000 levels released). A
    /// hundredth of that under Thread Sanitizer, where a level takes 50
    /// times as long: still past the few levels a thread nests before the
    /// trampoline takes over. `JOBKIT_NESTING_DEPTH` sets it (1,000,000, in
    /// a release build, for the figure).
    static let depth: Int =
        ProcessInfo.processInfo.environment["JOBKIT_NESTING_DEPTH"].flatMap { Int($0) }
        ?? (isThreadSanitized ? 2_000 : 200_000)
    /// For each combinator on its own: a tenth as deep.
    static let depthOfOne = depth / 10

    @Test func aJobNestedThroughEveryCombinatorCompletesWithAFlatStackOnAnImmediateQueue() async throws {
        let result = await onThread(ofStackSize: 512 * 1024) { () -> (Job<Void>.Outcome?, UInt) in
            let top = currentStackAddress()
            let deepest = LockedValue(top)
            // A cleanup that notes the stack's depth runs as each round of
            // the combinators completes, on the thread that completes it.
            var job = Job<Void>.succeeded
            for level in 0..<Self.depth {
                let wrappers = Wrapper.withoutTimers
                job = wrappers[level % wrappers.count].around(job)
                if level % wrappers.count == 0 {
                    job = job.always { _ in deepest.withValue { $0 = min($0, currentStackAddress()) } }
                }
            }
            return (outcome(of: job), top - deepest.value)
        }
        #expect(result.0?.isSuccess == true)
        #expect(result.1 < 64 * 1024)
    }

    /// The job is released on the thread that built it: a release nested
    /// as deep as the job, before.
    @Test func aJobNestedThroughEveryCombinatorIsReleasedWithAFlatStack() async {
        let live = LockedValue(0)
        let built = await onThread(ofStackSize: 512 * 1024) { () -> Int in
            let canary = Canary(live)
            let job = nested(Job { _ in withExtendedLifetime(canary) {} }, depth: Self.depth, in: Wrapper.allCases)
            return withExtendedLifetime(job) { live.value }
        }
        #expect(built == 1)
        #expect(live.value == 0)
    }

    @Test func aCancelReachesTheJobInsideEveryCombinatorAtOnce() async throws {
        let result = await onThread(ofStackSize: 512 * 1024) {
            () -> (Int, Int, Job<Void>.Outcome?, Bool, String?, [Substring]) in
            let queue = TestQueue(maxSteps: 100 * Self.depth)
            let cancels = LockedValue(0)
            let recorder = Recorder<Void>()
            let handle = nested(sleeping(cancels: cancels), depth: Self.depth, in: Wrapper.allCases)
                .perform(on: queue, then: recorder.handler)
            var cancelsAtOnce = 0
            var report: [Substring] = []
            let thrown = failure {
                try queue.run()
                report = handle.stallReport()?.split(separator: "\n") ?? []
                handle.cancel()
                cancelsAtOnce = cancels.value
                try queue.run()
            }
            return (cancelsAtOnce, recorder.count, recorder.last, queue.isIdle, thrown, report)
        }
        #expect(result.4 == nil)
        // The stall report, taken on that thread: the job it waits on,
        // below the levels it leaves out, in a few hundred lines.
        #expect(result.5.first == "1 job has not completed:")
        #expect(result.5.last?.hasSuffix("sleep 1 s (running)  ◀") == true)
        #expect(result.5.contains { $0.contains(" levels not shown (running)") })
        #expect(result.5.count < 300)
        #expect(result.0 == 1)
        #expect(result.1 == 1)
        #expect(isCancellation(result.2?.failure))
        #expect(result.3)
    }

    /// Each combinator inside itself, the job inside finishing on a timer
    /// on a `TestQueue`, and the same cancelled.
    ///
    /// The job is built and released on a thread of 64 MiB: a job built of
    /// one-job combinators alone is released one level inside the next.
    @Test(arguments: Wrapper.allCases)
    func aJobNestedInOneCombinatorCompletesAndCancelsOnATestQueue(_ wrapper: Wrapper) async throws {
        let held = LockedValue<Job<Void>?>(nil)
        await onThread(ofStackSize: 64 * 1024 * 1024) {
            held.withValue { $0 = nested(sleeping(cancels: LockedValue(0)), depth: Self.depthOfOne, in: [wrapper]) }
        }
        let result = await onThread(ofStackSize: 512 * 1024) { () -> ([Job<Void>.Outcome?], String?, String?) in
            guard let job = held.value else { return ([], "no job", nil) }
            var outcomes: [Job<Void>.Outcome?] = []
            var leaf: String?
            let thrown = failure {
                for cancels in [false, true] {
                    let queue = TestQueue(maxSteps: 100 * Self.depthOfOne)
                    let recorder = Recorder<Void>()
                    let handle = job.perform(on: queue, then: recorder.handler)
                    try queue.run()
                    // Where it waits, with a flat stack.
                    if !cancels { leaf = handle.stallReport()?.split(separator: "\n").last.map(String.init) }
                    if cancels { handle.cancel() }
                    try queue.advance(by: .seconds(1))
                    outcomes.append(recorder.count == 1 && queue.isIdle ? recorder.last : nil)
                }
            }
            return (outcomes, thrown, leaf)
        }
        await onThread(ofStackSize: 64 * 1024 * 1024) { held.withValue { $0 = nil } }
        #expect(result.1 == nil)
        #expect(result.2?.hasSuffix("sleep 1 s (running)  ◀") == true)
        #expect(result.0.first??.isSuccess == true)
        #expect(isCancellation(result.0.last??.failure))
    }

    /// A failure goes up through every combinator but `retry` (which would
    /// try each level again: two to the depth attempts) and `firstSuccess`
    /// (which wraps each level's error in one more), with its error as it
    /// was; and the job, once performed, is released on the same thread.
    @Test func aFailureGoesUpThroughEveryCombinatorOnATestQueue() async throws {
        let wrappers = Wrapper.allCases.filter { $0 != .retry && $0 != .firstSuccess }
        let result = await onThread(ofStackSize: 512 * 1024) { () -> (Job<Void>.Outcome?, Int, String?) in
            let queue = TestQueue(maxSteps: 100 * Self.depth)
            let recorder = Recorder<Void>()
            // allowed: performed on a TestQueue only, so the sleep is virtual time.
            let leaf = Job.sleep(for: .seconds(1)).then { Job<Void>.failed(TestError(id: 7)) }
            let thrown = failure {
                nested(leaf, depth: Self.depthOfOne, in: wrappers).perform(on: queue, then: recorder.handler)
                try queue.advance(by: .seconds(1))
            }
            return (recorder.last, recorder.count, thrown)
        }
        #expect(result.2 == nil)
        #expect(result.1 == 1)
        #expect(result.0?.failure as? TestError == TestError(id: 7))
    }

    /// On dispatch queues: the job inside finishes on another queue, and
    /// every outcome goes up on a dispatch worker's thread.
    @Test func aJobNestedThroughEveryCombinatorCompletesOnDispatchQueues() async throws {
        let other = DispatchQueue(label: "NestingTests.other")
        let leaf = Job<Void> { controller in other.async { controller.finish() } }
        let job = nested(leaf, depth: Self.depthOfOne, in: Wrapper.allCases)
        try await job.value(on: DispatchQueue.global())
    }
}

/// What `body` threw, described, or `nil`: for a thread of its own, whose
/// closure cannot throw.
private func failure(of body: () throws -> Void) -> String? {
    do {
        try body()
        return nil
    } catch {
        return "\(error)"
    }
}
