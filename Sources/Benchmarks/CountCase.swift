import Foundation

/// Cases 10 and 11: the instructions and heap allocations each job costs,
/// counted by valgrind (callgrind and memcheck) in child processes of this
/// executable. Unlike times, these counts do not move with the machine's
/// load, so a regression of a few percent shows.
///
/// Each variant runs alone (`--variant`) in one round at two sizes, N and 2N;
/// the count per job is the difference divided by N, so that what the
/// process does once (start-up, the first allocation of each cache) drops
/// out.
enum CountCase {
    /// One variant counted: a timing case and its variant's name.
    struct Target: Sendable {
        var chosen: BenchmarkSuite.Case
        var variant: String
        /// Shown in the table.
        var title: String
        /// Whether this is JobKit's row, the one the following rows are
        /// compared with.
        var isJobKit: Bool
    }

    static let targets: [Target] = [
        Target(chosen: .group, variant: "JobKit `Job.group`", title: "1. group: JobKit", isJobKit: true),
        Target(
            chosen: .group, variant: "DispatchGroup enter/leave + async (hand-written)",
            title: "1. group: hand-written", isJobKit: false),
        Target(chosen: .sequence, variant: "JobKit `Job.sequence`", title: "2. sequence: JobKit", isJobKit: true),
        Target(
            chosen: .sequence, variant: "chain: each step `async`s the next (hand-written)",
            title: "2. sequence: hand-written", isJobKit: false),
        Target(
            chosen: .value, variant: "JobKit: `try await job.value(on: queue)`", title: "3. await: JobKit",
            isJobKit: true),
        Target(
            chosen: .value, variant: "withCheckedContinuation { queue.async { resume } } (hand-written)",
            title: "3. await: hand-written", isJobKit: false),
        Target(
            chosen: .value, variant: "the same inside withTaskCancellationHandler (hand-written, cancellable)",
            title: "3. await: hand-written, cancellable", isJobKit: false),
        Target(
            chosen: .value, variant: "withUnsafeThrowingContinuation inside withTaskCancellationHandler (hand-written)",
            title: "3. await: hand-written, unsafe continuation, cancellable", isJobKit: false),
        Target(
            chosen: .value, variant: "the same, keeping what job.value keeps (hand-written model)",
            title: "3. await: hand-written model of what job.value keeps", isJobKit: false),
        Target(
            chosen: .asyncGroup, variant: "JobKit `Job.group`, children finishing on a serial queue",
            title: "8. group, async children (serial queue): JobKit", isJobKit: true),
        Target(
            chosen: .asyncGroup, variant: "DispatchGroup: async, then async to a serial queue, leave (hand-written)",
            title: "8. group, async children (serial queue): hand-written", isJobKit: false),
        Target(
            chosen: .asyncSequence, variant: "JobKit `Job.sequence`, steps finishing on a serial queue",
            title: "9. sequence, async children (serial queue): JobKit", isJobKit: true),
        Target(
            chosen: .asyncSequence, variant: "chain: async, then async to a serial queue, next step (hand-written)",
            title: "9. sequence, async children (serial queue): hand-written", isJobKit: false),
    ]

    /// What valgrind counts.
    enum Tool: String, Sendable {
        /// Instructions executed, all threads together (callgrind).
        case instructions
        /// Heap blocks allocated (memcheck's heap summary).
        case allocations
    }

    /// Counts every target with both tools and returns the two tables; a
    /// note instead of rows when valgrind is not installed.
    ///
    /// Instructions are counted `rounds` times: the threads that wait for
    /// work (dispatch's workers, the cooperative pool) execute more or fewer
    /// instructions depending on how the scheduler interleaves them, a few
    /// hundred per job either way in the async cases. Allocations do not
    /// move, and are counted once.
    static func run(n: Int, rounds: Int, executable: String) throws -> [CaseReport] {
        guard let valgrind = findValgrind() else {
            return [
                CaseReport(
                    title: "10. Instructions and allocations per job", unit: "per job", rows: [],
                    notes: ["valgrind was not found on PATH: install it to count instructions and allocations."])
            ]
        }
        var reports: [CaseReport] = []
        for tool in [Tool.instructions, .allocations] {
            var rows: [Row] = []
            var jobKit: [Double] = []
            for target in targets {
                var samples: [Double] = []
                for _ in 0..<(tool == .instructions ? rounds : 1) {
                    let small = try count(tool, target, n: n, valgrind: valgrind, executable: executable)
                    let large = try count(tool, target, n: 2 * n, valgrind: valgrind, executable: executable)
                    samples.append(Double(large - small) / Double(n))
                }
                if target.isJobKit { jobKit = samples }
                // The counts come from separate processes, one after
                // another: nothing pairs JobKit's i-th with this one's.
                let ratio = target.isJobKit ? nil : jobKit.median / samples.median
                rows.append(Row(name: target.title, samples: samples, ratio: ratio))
            }
            reports.append(
                CaseReport(
                    title: tool == .instructions
                        ? "10. Instructions per job (callgrind, all threads)"
                        : "11. Heap allocations per job (memcheck)",
                    unit: tool == .instructions ? "instructions" : "allocations",
                    rows: rows,
                    notes: [
                        "Counted by valgrind in one round of each variant alone, at N = \(n) and \(2 * n)"
                            + (tool == .instructions ? ", \(rounds) times" : "")
                            + "; per job = (count at \(2 * n) − count at \(n)) ÷ \(n). "
                            + "JobKit ÷ this compares with the JobKit row above it"
                            + (tool == .instructions ? " (the ratio of the medians)." : ".")
                    ]
                ))
        }
        return reports
    }

    /// Runs one target under valgrind and returns the total it counted.
    static func count(
        _ tool: Tool,
        _ target: Target,
        n: Int,
        valgrind: String,
        executable: String
    ) throws -> Int {
        let toolArguments =
            tool == .instructions
            ? ["--tool=callgrind", "--callgrind-out-file=/dev/null"]
            : ["--tool=memcheck", "--leak-check=no"]
        let process = Process()
        process.executableURL = URL(fileURLWithPath: valgrind)
        process.arguments =
            toolArguments + [
                executable, "--case", target.chosen.rawValue, "--variant", target.variant,
                "--rounds", "1", "--warmups", "0", "--n", String(n),
            ]
        let errors = Pipe.closedOnExec()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let data = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0, let total = parse(tool, text) else {
            throw BenchmarkFailure(
                "valgrind (\(tool.rawValue)) on \(target.title) exited with \(process.terminationStatus): "
                    + String(text.suffix(2000)))
        }
        return total
    }

    /// The total in valgrind's report: callgrind's "Collected : 123" or
    /// memcheck's "total heap usage: 1,234 allocs".
    static func parse(_ tool: Tool, _ report: String) -> Int? {
        for line in report.split(separator: "\n") {
            switch tool {
            case .instructions:
                guard let range = line.range(of: "Collected :") else { continue }
                return Int(line[range.upperBound...].trimmingCharacters(in: .whitespaces))
            case .allocations:
                guard let range = line.range(of: "total heap usage:") else { continue }
                let figure = line[range.upperBound...].split(separator: " ").first ?? ""
                return Int(figure.replacingOccurrences(of: ",", with: ""))
            }
        }
        return nil
    }

    /// valgrind's path, from PATH.
    static func findValgrind() -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"
        return path.split(separator: ":").map { "\($0)/valgrind" }.first(where: FileManager.default.isExecutableFile)
    }
}
