import Dispatch
import Foundation
import JobKit
import JobKitTesting

/// Cases 1 to 4: JobKit against hand-written GCD (and the usual
/// alternatives) on the global concurrent queue, in ns per job.
enum TimingCases {
    static let queue = DispatchQueue.global()

    /// A job whose body finishes at once: all the cost is JobKit's and the
    /// queue hop's.
    static let noOp = Job<Void> { $0.finish() }

    // MARK: - 1. Group

    static func group(n: Int, schedule: Schedule) throws -> CaseReport {
        let jobs = Array(repeating: noOp, count: n)
        let namedJobs = Array(repeating: noOp.named("child"), count: n)
        let variants = [
            Variant(name: "JobKit `Job.group`") { _ in
                try performAndWait(Job.group(jobs))
            },
            Variant(name: "JobKit `Job.group`, each child `named(_:)`") { _ in
                try performAndWait(Job.group(namedJobs))
            },
            Variant(name: "DispatchGroup enter/leave + async (hand-written)") { n in
                let group = DispatchGroup()
                for _ in 0..<n {
                    group.enter()
                    queue.async { group.leave() }
                }
                group.wait()
            },
            Variant(name: "OperationQueue") { n in
                let operations = OperationQueue()
                for _ in 0..<n { operations.addOperation {} }
                operations.waitUntilAllOperationsAreFinished()
            },
            Variant(name: "withThrowingTaskGroup") { n in
                try blockingAwait {
                    try await withThrowingTaskGroup(of: Void.self) { group in
                        for _ in 0..<n { group.addTask {} }
                        try await group.waitForAll()
                    }
                }
            },
        ]
        return CaseReport(
            title: "1. Group of \(n) no-op jobs on DispatchQueue.global()",
            unit: "ns/job",
            rows: try measureInterleaved(
                variants,
                n: n,
                schedule: schedule,
                goals: ["DispatchGroup enter/leave + async (hand-written)": 1.0]
            )
        )
    }

    // MARK: - 2. Sequence

    static func sequence(n: Int, schedule: Schedule) throws -> CaseReport {
        let jobs = Array(repeating: noOp, count: n)
        let namedJobs = Array(repeating: noOp.named("step"), count: n)
        let variants = [
            Variant(name: "JobKit `Job.sequence`") { _ in
                try performAndWait(Job.sequence(jobs))
            },
            Variant(name: "JobKit `Job.sequence`, each step `named(_:)`") { _ in
                try performAndWait(Job.sequence(namedJobs))
            },
            Variant(name: "chain: each step `async`s the next (hand-written)") { n in
                let done = DispatchSemaphore(value: 0)
                @Sendable func step(_ remaining: Int) {
                    guard remaining > 0 else {
                        done.signal()
                        return
                    }
                    queue.async { step(remaining - 1) }
                }
                step(n)
                done.wait()
            },
        ]
        return CaseReport(
            title: "2. Sequence of \(n) no-op jobs on DispatchQueue.global()",
            unit: "ns/job",
            rows: try measureInterleaved(
                variants,
                n: n,
                schedule: schedule,
                goals: ["chain: each step `async`s the next (hand-written)": 1.0]
            )
        )
    }

    // MARK: - 3. await job.value

    static func value(n: Int, schedule: Schedule) throws -> CaseReport {
        let variants = [
            Variant(name: "JobKit: `try await job.value(on: queue)`") { n in
                try blockingAwait {
                    for _ in 0..<n { try await noOp.value(on: queue) }
                }
            },
            Variant(name: "withCheckedContinuation { queue.async { resume } } (hand-written)") { n in
                try blockingAwait {
                    for _ in 0..<n {
                        await withCheckedContinuation { continuation in
                            queue.async { continuation.resume() }
                        }
                    }
                }
            },
            // What the cancellation guarantee costs by itself: the same, with
            // the task cancellation handler `job.value` needs.
            Variant(name: "the same inside withTaskCancellationHandler (hand-written, cancellable)") { n in
                try blockingAwait {
                    for _ in 0..<n {
                        await withTaskCancellationHandler {
                            await withCheckedContinuation { continuation in
                                queue.async { continuation.resume() }
                            }
                        } onCancel: {
                        }
                    }
                }
            },
            // The cheaper continuation, which `job.value` uses: the floor of
            // a cancellable await by hand.
            Variant(name: "withUnsafeThrowingContinuation inside withTaskCancellationHandler (hand-written)") { n in
                try blockingAwait {
                    for _ in 0..<n {
                        try await withTaskCancellationHandler {
                            try await withUnsafeThrowingContinuation {
                                (continuation: UnsafeContinuation<Void, any Error>) in
                                queue.async { continuation.resume() }
                            }
                        } onCancel: {
                        }
                    }
                }
            },
            // That floor plus the objects and atomics `job.value`'s
            // guarantees need, and nothing else of JobKit's path.
            Variant(name: "the same, keeping what job.value keeps (hand-written model)") { n in
                try blockingAwait {
                    for _ in 0..<n { try await AwaitModel.value(on: queue) { $0.finish() } }
                }
            },
        ]
        return CaseReport(
            title: "3. `try await` a no-op job \(n) times in a loop",
            unit: "ns/job",
            rows: try measureInterleaved(
                variants,
                n: n,
                schedule: schedule,
                goals: [
                    "withCheckedContinuation { queue.async { resume } } (hand-written)": 1.3,
                    "the same inside withTaskCancellationHandler (hand-written, cancellable)": 1.1,
                ]
            ),
            notes: [
                "`job.value` hops to the queue once (the body) and resumes the awaiting task from "
                    + "the completing thread, like the hand-written continuation. Propagating the awaiting "
                    + "task's cancellation to the job takes `withTaskCancellationHandler`, whose own cost the "
                    + "third row shows. `value` is inlinable, so the caller's module specializes it for the "
                    + "job's value type (no type metadata looked up per call), and the job's state holds the "
                    + "continuation (allocated: that state, the controllers' token and the queue's work item).",
                "The last two rows are floors, not goals: the cancellable await by hand with the unsafe "
                    + "continuation `job.value` uses, then the same keeping what `job.value`'s guarantees need "
                    + "(a state holding the continuation, a latch and the body until it runs, a token that "
                    + "fails the await if the work is dropped, the same atomic hand-over, the body called with "
                    + "the token) and nothing else of JobKit's path. JobKit ÷ the model is what the rest of that "
                    + "path costs: the queue as `any JobQueue` through `Trampoline`, the controller, and the "
                    + "completion path shared with handlers and attachments.",
            ]
        )
    }

    // MARK: - 4. Bounded group

    static func bounded(n: Int, schedule: Schedule) throws -> CaseReport {
        let jobs = Array(repeating: noOp, count: n)
        let variants = [
            Variant(name: "JobKit `Job.group(maxConcurrent: 4)`") { _ in
                try performAndWait(Job.group(jobs, maxConcurrent: 4))
            },
            Variant(name: "DispatchSemaphore(4)-limited loop (hand-written)") { n in
                let slots = DispatchSemaphore(value: 4)
                let group = DispatchGroup()
                for _ in 0..<n {
                    slots.wait()
                    group.enter()
                    queue.async {
                        slots.signal()
                        group.leave()
                    }
                }
                group.wait()
            },
            Variant(name: "4 chains, each completion `async`s the next job (hand-written)") { n in
                let group = DispatchGroup()
                let nextIndex = LockedValue(0)
                @Sendable func startNext() {
                    let index = nextIndex.withValue { next in
                        defer { next += 1 }
                        return next
                    }
                    guard index < n else { return }
                    group.enter()
                    queue.async {
                        startNext()
                        group.leave()
                    }
                }
                for _ in 0..<4 { startNext() }
                group.wait()
            },
        ]
        return CaseReport(
            title: "4. Bounded group (at most 4 running) of \(n) no-op jobs on DispatchQueue.global()",
            unit: "ns/job",
            rows: try measureInterleaved(
                variants,
                n: n,
                schedule: schedule,
                goals: ["DispatchSemaphore(4)-limited loop (hand-written)": 1.3]
            )
        )
    }

    // MARK: - 8, 9. Children that complete from another queue

    /// A serial queue for asynchronous children to finish on, as a
    /// URLSession delegate queue is.
    static let serialQueue = DispatchQueue(label: "jobkit.benchmarks.completions")

    /// A concurrent queue for asynchronous children to finish on, as a
    /// completion handler called on a global queue is.
    static let concurrentQueue = DispatchQueue(
        label: "jobkit.benchmarks.concurrent-completions", attributes: .concurrent)

    /// A job whose body hops to `other` and finishes there: the shape of a
    /// job wrapping I/O.
    static func hopping(to other: DispatchQueue) -> Job<Void> {
        Job { controller in
            other.async { controller.finish() }
        }
    }

    /// The queues of cases 8 and 9, each with the word that names it.
    static let otherQueues = [("serial", serialQueue), ("concurrent", concurrentQueue)]

    static func asyncGroup(n: Int, schedule: Schedule) throws -> CaseReport {
        let (variants, goals) = pairsOnOtherQueues(
            n: n,
            schedule: schedule,
            jobKit: { "JobKit `Job.group`, children finishing on a \($0) queue" },
            handWritten: { "DispatchGroup: async, then async to a \($0) queue, leave (hand-written)" },
            combining: { Job.group($0) },
            handWrittenRun: { other, n in
                let group = DispatchGroup()
                for _ in 0..<n {
                    group.enter()
                    queue.async { other.async { group.leave() } }
                }
                group.wait()
            }
        )
        return CaseReport(
            title: "8. Group of \(n) jobs finishing on another queue",
            unit: "ns/job",
            rows: try measureInterleaved(variants, n: n, schedule: schedule, goals: goals),
            notes: [
                "Each child's body runs on DispatchQueue.global() and finishes from another queue: a serial one, "
                    + "as a URLSession delegate queue is, or a concurrent one, as a completion handler called on a "
                    + "global queue is. Each hand-written row is compared with the JobKit row above it."
            ]
        )
    }

    static func asyncSequence(n: Int, schedule: Schedule) throws -> CaseReport {
        let (variants, goals) = pairsOnOtherQueues(
            n: n,
            schedule: schedule,
            jobKit: { "JobKit `Job.sequence`, steps finishing on a \($0) queue" },
            handWritten: { "chain: async, then async to a \($0) queue, next step (hand-written)" },
            combining: { Job.sequence($0) },
            handWrittenRun: { other, n in
                let done = DispatchSemaphore(value: 0)
                @Sendable func step(_ remaining: Int) {
                    guard remaining > 0 else {
                        done.signal()
                        return
                    }
                    queue.async { other.async { step(remaining - 1) } }
                }
                step(n)
                done.wait()
            }
        )
        return CaseReport(
            title: "9. Sequence of \(n) jobs finishing on another queue",
            unit: "ns/job",
            rows: try measureInterleaved(variants, n: n, schedule: schedule, goals: goals),
            notes: ["The other queues are case 8's. Each hand-written row is compared with the JobKit row above it."]
        )
    }

    /// For each of ``otherQueues``, a JobKit variant (`combining` `n` jobs
    /// that finish on that queue) followed by the hand-written variant it is
    /// compared with, held to 1.10×; only those that `schedule` measures.
    /// The names take the queue's word. JobKit's jobs are built only for a
    /// JobKit variant measured, so that valgrind's counts (cases 10 and 11)
    /// of a hand-written variant include none of them.
    static func pairsOnOtherQueues(
        n: Int,
        schedule: Schedule,
        jobKit: (String) -> String,
        handWritten: (String) -> String,
        combining: @escaping @Sendable ([Job<Void>]) -> Job<Void>,
        handWrittenRun: @escaping @Sendable (_ other: DispatchQueue, _ n: Int) -> Void
    ) -> (variants: [Variant], goals: [String: Double]) {
        var variants: [Variant] = []
        var goals: [String: Double] = [:]
        for (kind, other) in otherQueues {
            let jobKitName = jobKit(kind)
            let handWrittenName = handWritten(kind)
            if schedule.measures(jobKitName) {
                let jobs = Array(repeating: hopping(to: other), count: n)
                variants.append(
                    Variant(name: jobKitName, isBaseline: true) { _ in try performAndWait(combining(jobs)) })
            }
            variants.append(Variant(name: handWrittenName) { n in handWrittenRun(other, n) })
            goals[handWrittenName] = 1.10
        }
        return (variants, goals)
    }

    // MARK: - Helpers

    /// Performs `job` on the global queue and blocks until it completed;
    /// throws its error.
    static func performAndWait<T>(_ job: Job<T>, on queue: any JobQueue = queue) throws {
        _ = try valueAndWait(job, on: queue)
    }

    /// Performs `job` on `queue` and blocks until it completes: its value.
    static func valueAndWait<T>(_ job: Job<T>, on queue: any JobQueue = queue) throws -> T {
        let completion = Completion<Result<T, any Error>>()
        job.perform(on: queue) { completion.complete($0) }
        return try completion.wait().get()
    }
}
