import Dispatch
import Foundation
import JobKit
import JobKitTesting

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Case 6: the peak resident memory of a group of a million pending jobs,
/// each variant measured in a fresh child process (this executable, re-run
/// with the hidden `--memory-child` flag).
///
/// Two kinds of "pending" are measured:
/// - *queued*: the group is performed on a suspended concurrent queue, so
///   every child is enqueued and none has run yet. The hand-written floor is
///   one `async` per child with a `DispatchGroup`; the difference is what
///   JobKit's bookkeeping costs per child. The goal applies here.
/// - *running*: every child's body has run and parked what completes it
///   later (a controller, a `leave` closure, a continuation), as a job
///   waiting for the network would. The floor is then one parked closure per
///   child, and the rest is JobKit's per-performance state.
///
/// When all are pending the children are completed and the group is awaited.
/// The figure is the process's peak resident set (VmHWM) minus its resident
/// set before the jobs were built.
enum MemoryCase {
    enum Kind: String, CaseIterable, Sendable {
        case jobKitQueued = "jobkit-queued"
        case dispatchGroupQueued = "dispatch-group-queued"
        case jobKitRunning = "jobkit-running"
        case dispatchGroupRunning = "dispatch-group-running"
        case taskGroupRunning = "task-group-running"
        case timeoutCompleted = "timeout-completed"
        case plainCompleted = "plain-completed"
        case dispatchTimerCompleted = "dispatch-timer-completed"
        case thenLoop = "then-loop"
        case thenLoopOfAThousand = "then-loop-of-a-thousand"
        case dispatchLoop = "dispatch-loop"

        /// The variants of case 6.
        static let pendingGroup: [Kind] = [
            .jobKitQueued, .dispatchGroupQueued, .jobKitRunning, .dispatchGroupRunning, .taskGroupRunning,
        ]
        /// The variants of case 7.
        static let timers: [Kind] = [.timeoutCompleted, .plainCompleted, .dispatchTimerCompleted]
        /// The variants of case 20's memory.
        static let loops: [Kind] = [.thenLoop, .thenLoopOfAThousand, .dispatchLoop]

        var title: String {
            switch self {
            case .jobKitQueued: "queued: JobKit `Job.group`"
            case .dispatchGroupQueued: "queued: DispatchGroup enter + async (hand-written floor)"
            case .jobKitRunning: "running: JobKit `Job.group`, each body keeping its controller"
            case .dispatchGroupRunning: "running: DispatchGroup, each block keeping a `leave` closure (floor)"
            case .taskGroupRunning: "running: withTaskGroup, each child awaiting a continuation"
            case .timeoutCompleted: "each job with `timeout(after: .seconds(3600))`"
            case .plainCompleted: "the same jobs without a timeout"
            case .dispatchTimerCompleted: "without a timeout, each with a dispatch timer cancelled when it completes"
            case .thenLoop: "JobKit: `then` recursion"
            case .thenLoopOfAThousand: "JobKit: `then` recursion, 1,000 steps"
            case .dispatchLoop: "a `DispatchQueue.async` per step (hand-written)"
            }
        }

        /// The JobKit variant this one is compared with.
        var jobKit: Kind {
            switch self {
            case .jobKitQueued, .dispatchGroupQueued: .jobKitQueued
            case .jobKitRunning, .dispatchGroupRunning, .taskGroupRunning: .jobKitRunning
            case .timeoutCompleted, .plainCompleted, .dispatchTimerCompleted: .timeoutCompleted
            case .thenLoop, .thenLoopOfAThousand, .dispatchLoop: .thenLoop
            }
        }

        var goal: Double? {
            switch self {
            case .dispatchGroupQueued: 1.2
            case .dispatchGroupRunning: 1.5
            case .plainCompleted: 1.1
            case .thenLoopOfAThousand: 1.2
            case .dispatchLoop: 1.5
            default: nil
            }
        }
    }

    /// What one child process measured, in KiB.
    struct Sample: Sendable, Equatable {
        var baseline: Int
        var peak: Int

        var growth: Int { peak - baseline }

        var line: String { "memory-child baseline_kib=\(baseline) peak_kib=\(peak)" }

        init(baseline: Int, peak: Int) {
            self.baseline = baseline
            self.peak = peak
        }

        init?(line: String) {
            var values: [String: Int] = [:]
            for field in line.split(separator: " ") {
                let parts = field.split(separator: "=")
                if parts.count == 2, let value = Int(parts[1]) { values[String(parts[0])] = value }
            }
            guard let baseline = values["baseline_kib"], let peak = values["peak_kib"] else { return nil }
            self.init(baseline: baseline, peak: peak)
        }
    }

    // MARK: - Parent

    static func run(n: Int, rounds: Int, executable: String) throws -> CaseReport {
        let report = try measureRounds(n: n, rounds: rounds, executable: executable, kinds: Kind.pendingGroup)
        return CaseReport(
            title: "6. Peak memory of a pending group of \(n) jobs (one child process per measurement)",
            unit: "MiB",
            rows: report.rows,
            notes: [
                "Peak resident set (VmHWM) above the child process's resident set before it built "
                    + "anything (about \(report.baseline / 1024) MiB). *queued*: performed on a suspended queue, no "
                    + "child has run; *running*: every child's body ran and keeps what completes it. "
                    + "JobKit ÷ this compares with the JobKit row of the same kind."
            ]
        )
    }

    /// Case 7: what a completed job's timeout leaves behind.
    static func runTimers(n: Int, rounds: Int, executable: String) throws -> CaseReport {
        let report = try measureRounds(n: n, rounds: rounds, executable: executable, kinds: Kind.timers)
        return CaseReport(
            title: "7. Resident memory after \(n) jobs with a one-hour timeout completed (one child process each)",
            unit: "MiB",
            rows: report.rows,
            notes: [
                "The process's whole resident set (VmRSS) once every job completed and the allocator returned "
                    + "what it keeps for reuse (`malloc_trim`, so that the figure is memory still in use, not the "
                    + "pages of the run's peak); the jobs are all performed at once on `DispatchQueue.global()`. "
                    + "A timer that outlived its job would keep the job's state until the deadline. "
                    + "JobKit ÷ this is with a timeout ÷ without."
            ]
        )
    }

    static func measureRounds(
        n: Int,
        rounds: Int,
        executable: String,
        kinds: [Kind]
    ) throws -> (rows: [Row], baseline: Int) {
        var samples: [Kind: [Sample]] = [:]
        for round in 0..<max(rounds, 1) {
            for kind in round % 2 == 0 ? kinds : kinds.reversed() {
                samples[kind, default: []].append(try spawn(kind, n: n, executable: executable))
            }
        }
        func mebibytes(_ kind: Kind) -> [Double] {
            samples[kind, default: []].map { Double($0.growth) / 1024 }
        }
        let rows = kinds.map { kind in
            let own = mebibytes(kind)
            return Row(
                name: kind.title,
                samples: own,
                ratio: kind == kind.jobKit ? nil : zip(mebibytes(kind.jobKit), own).map { $0 / $1 }.median,
                goal: kind.goal
            )
        }
        return (rows, samples.values.first?.first?.baseline ?? 0)
    }

    /// Runs this executable with `--memory-child` and reads its line.
    static func spawn(_ kind: Kind, n: Int, executable: String) throws -> Sample {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["--memory-child", kind.rawValue, "--n", String(n)]
        let output = Pipe.closedOnExec()
        process.standardOutput = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0,
            let line = text.split(separator: "\n").last(where: { $0.hasPrefix("memory-child") }),
            let sample = Sample(line: String(line))
        else {
            throw BenchmarkFailure(
                "memory child \(kind.rawValue) exited with \(process.terminationStatus): \(text)"
            )
        }
        return sample
    }

    /// The path of the running executable.
    static var currentExecutable: String {
        #if os(Linux)
        if let path = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe") {
            return path
        }
        #endif
        return Bundle.main.executablePath ?? CommandLine.arguments[0]
    }

    // MARK: - Child

    /// Builds and runs one pending group of `n` jobs in this process and
    /// returns its memory figures (for case 7, `n` jobs with or without a
    /// timeout, and the resident set once they completed as the "peak").
    /// Throws if the jobs did not complete.
    static func measure(_ kind: Kind, n: Int) throws -> Sample {
        let baseline = residentKiB().current
        switch kind {
        case .timeoutCompleted, .plainCompleted, .dispatchTimerCompleted:
            let job =
                kind == .dispatchTimerCompleted
                ? Job<Void> { controller in
                    // A timeout written by hand on dispatch: a timer source
                    // per job, cancelled when the job completes.
                    let timer = DispatchSource.makeTimerSource(queue: DispatchQueue.global())
                    timer.schedule(deadline: .now() + 3600)
                    timer.setEventHandler {}
                    timer.activate()
                    timer.cancel()
                    controller.finish()
                }
                : Job<Void> { $0.finish() }
            let timed = kind == .timeoutCompleted ? job.timeout(after: .seconds(3600)) : job
            func performAll(_ count: Int) throws {
                let group = DispatchGroup()
                for _ in 0..<count {
                    group.enter()
                    timed.perform(on: DispatchQueue.global()) { _ in group.leave() }
                }
                guard group.wait(timeout: .now() + 600) == .success else { throw BenchmarkFailure("jobs timed out") }
                // Cancelled dispatch timers release their handlers on their
                // queue, shortly after: let that happen before measuring.
                Thread.sleep(forTimeInterval: 0.2)
                returnFreeMemoryToTheSystem()
            }
            try performAll(n)
            // The whole resident set, as the figures were.
            return Sample(baseline: 0, peak: residentKiB().current)
        case .thenLoop, .thenLoopOfAThousand, .dispatchLoop:
            let steps = kind == .thenLoopOfAThousand ? 1_000 : n
            if kind == .dispatchLoop {
                try LoopCase.runHandWritten(steps: steps)
            } else {
                try LoopCase.runJobKit(steps: steps)
            }
            // The whole peak, as the figures were.
            return Sample(baseline: 0, peak: residentKiB().peak)
        case .jobKitQueued:
            let queue = DispatchQueue(label: "jobkit.benchmarks.suspended", attributes: .concurrent)
            queue.suspend()
            let jobs = Array(repeating: Job<Void> { $0.finish() }, count: n)
            let completion = Completion<Result<Void, any Error>>()
            // The group's own body runs inline, so every child is on the
            // suspended queue when `perform` returns.
            Job.group(jobs).perform(on: FirstInlineQueue(target: queue)) { completion.complete($0) }
            queue.resume()
            try completion.wait().get()
        case .dispatchGroupQueued:
            let queue = DispatchQueue(label: "jobkit.benchmarks.suspended", attributes: .concurrent)
            queue.suspend()
            let group = DispatchGroup()
            for _ in 0..<n {
                group.enter()
                queue.async { group.leave() }
            }
            queue.resume()
            guard group.wait(timeout: .now() + 600) == .success else { throw BenchmarkFailure("group timed out") }
        case .jobKitRunning:
            let parking = Parking<Job<Void>.Controller>(capacity: n)
            let jobs = Array(repeating: Job<Void> { parking.park($0) }, count: n)
            let completion = Completion<Result<Void, any Error>>()
            Job.group(jobs).perform(on: DispatchQueue.global()) { completion.complete($0) }
            for controller in try parking.waitUntilFull() {
                guard controller.finish() else { throw BenchmarkFailure("a parked job had already completed") }
            }
            try completion.wait().get()
        case .dispatchGroupRunning:
            let parking = Parking<@Sendable () -> Void>(capacity: n)
            let group = DispatchGroup()
            let queue = DispatchQueue.global()
            for _ in 0..<n {
                group.enter()
                queue.async { parking.park { group.leave() } }
            }
            for leave in try parking.waitUntilFull() { leave() }
            guard group.wait(timeout: .now() + 600) == .success else { throw BenchmarkFailure("group timed out") }
        case .taskGroupRunning:
            let parking = Parking<CheckedContinuation<Void, Never>>(capacity: n)
            let resumer = Completion<Result<Void, any Error>>()
            DispatchQueue.global().async {
                resumer.complete(
                    Result {
                        for continuation in try parking.waitUntilFull() { continuation.resume() }
                    })
            }
            try blockingAwait {
                await withTaskGroup(of: Void.self) { group in
                    for _ in 0..<n {
                        group.addTask { await withCheckedContinuation { parking.park($0) } }
                    }
                    await group.waitForAll()
                }
            }
            try resumer.wait().get()
        }
        return Sample(baseline: baseline, peak: residentKiB().peak)
    }

    /// The resident set now and at its peak, in KiB.
    ///
    /// On Linux from VmRSS and VmHWM in /proc/self/status, read line by line
    /// (procfs files report a size of zero, so whole-file readers see them
    /// empty). `getrusage` is no substitute there: its `ru_maxrss` survives
    /// `execve`, so a child spawned by a large parent would report the
    /// parent's peak.
    static func residentKiB() -> (current: Int, peak: Int) {
        #if os(Linux)
        var current = 0
        var peak = 0
        if let file = fopen("/proc/self/status", "r") {
            defer { fclose(file) }
            var line: UnsafeMutablePointer<CChar>?
            var capacity = 0
            defer { free(line) }
            while getline(&line, &capacity, file) > 0, let line {
                let fields = String(cString: line).split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" })
                guard fields.count >= 2, let value = Int(fields[1]) else { continue }
                if fields[0] == "VmRSS:" { current = value }
                if fields[0] == "VmHWM:" { peak = value }
            }
        }
        return (current, peak)
        #else
        var usage = rusage()
        getrusage(RUSAGE_SELF, &usage)
        let peak = Int(usage.ru_maxrss) / 1024  // bytes on Apple platforms
        return (peak, peak)
        #endif
    }
}

/// Where pending jobs park what completes them, until all `capacity` have.
final class Parking<Item: Sendable>: Sendable {
    private let items: LockedValue<[Item]>
    private let full = DispatchSemaphore(value: 0)
    private let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
        var items: [Item] = []
        items.reserveCapacity(capacity)
        self.items = LockedValue(items)
    }

    func park(_ item: Item) {
        let isFull = items.withValue { items -> Bool in
            items.append(item)
            return items.count == capacity
        }
        if isFull { full.signal() }
    }

    /// Blocks until `capacity` items are parked, then hands them over.
    func waitUntilFull() throws -> [Item] {
        guard capacity > 0 else { return [] }
        guard full.wait(timeout: .now() + 600) == .success else {
            throw BenchmarkFailure("only \(items.value.count) of \(capacity) jobs became pending")
        }
        return items.withValue { items in
            defer { items = [] }
            return items
        }
    }
}

/// Runs the first work it is given inline, at once, and sends all later
/// work to `target`: a group performed on it has enqueued every child on
/// `target` when `perform` returns.
final class FirstInlineQueue: JobQueue {
    private let target: DispatchQueue
    private let isFirst = LockedValue(true)

    init(target: DispatchQueue) {
        self.target = target
    }

    func enqueue(_ work: @escaping @Sendable () -> Void) {
        let runsInline = isFirst.withValue { isFirst in
            defer { isFirst = false }
            return isFirst
        }
        if runsInline {
            work()
        } else {
            target.async(execute: work)
        }
    }

    func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork {
        target.enqueue(after: delay, work)
    }
}

/// Asks the allocator to return the memory it keeps for reuse, so that the
/// resident set counts what is still in use: glibc's `malloc_trim(0)`, where
/// it exists. Without it, the resident set after many jobs ran at once is
/// their peak, whatever they still hold.
func returnFreeMemoryToTheSystem() {
    typealias Trim = @convention(c) (Int) -> Int32
    guard let trim = dlsym(dlopen(nil, RTLD_NOW), "malloc_trim") else { return }
    _ = unsafeBitCast(trim, to: Trim.self)(0)
}

extension Pipe {
    /// A pipe whose ends are closed on `exec`: a child that another thread
    /// starts while it is open does not inherit it and hold it open (the
    /// smoke tests start servers beside these children). The child given
    /// an end as a standard stream gets a copy, which stays open.
    static func closedOnExec() -> Pipe {
        let pipe = Pipe()
        for handle in [pipe.fileHandleForReading, pipe.fileHandleForWriting] {
            _ = fcntl(handle.fileDescriptor, F_SETFD, FD_CLOEXEC)
        }
        return pipe
    }
}
