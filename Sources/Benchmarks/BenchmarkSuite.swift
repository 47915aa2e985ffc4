import Foundation
import UploadsTesting

/// The benchmark executable's entry point: parses the arguments, runs the
/// chosen cases and prints their tables.
enum BenchmarkSuite {
    /// The cases, by the name `--case` takes.
    enum Case: String, CaseIterable, Sendable {
        case group, sequence, value, bounded, immediate, memory, timers
        case asyncGroup = "async-group"
        case asyncSequence = "async-sequence"
        case counts
        case checksums
        /// Not run unless named: two minutes of real-time waits.
        case debounce
        case outbox
        case race
        case outcomes
        case zip
        case form
        case herd
        case loop
        case source
        case shared
    }

    struct Options: Sendable {
        /// Jobs per batch in cases 1 to 4.
        var n = 100_000
        /// Jobs in cases 5 and 6.
        var million = 1_000_000
        var schedule = Schedule(warmups: 2, rounds: 9)
        /// Jobs per run under valgrind in case 10 (and twice as many).
        var countN = 10_000
        /// Times each variant's instructions are counted in case 10.
        var countRounds = 3
        /// Rounds of child processes in cases 6 and 7.
        var memoryRounds = 3
        /// The file's size in case 12, in MiB.
        var checksumMegabytes = 64
        /// Runs of each variant in case 13.
        var debounceRuns = 100
        /// Posts in the outbox of case 14.
        var outboxRecords = 1_000
        /// The file's size in case 18, in MiB.
        var formMegabytes = 32
        /// The herds of case 19, in outboxes.
        var herdCounts = [1_000, 10_000]
        /// The minutes the herd's backlog takes at the server's capacity,
        /// one herd each.
        var herdMinutes = [5, 25, 60]
        /// What the herd's server answers past its capacity, one herd each.
        var herdServers: [Herd.Server] = [.retryAfter(.seconds(5)), .slots]
        /// The herd's outboxes' pushback delay, in seconds; the default
        /// when `nil`.
        var herdPushback: Int?
        /// How many times the time held the ceiling of the herd's outboxes'
        /// drawn holds is; the default `Outbox.Options.holdGrowth` when
        /// `nil`.
        var herdGrowth: Double?
        /// Where case 19 writes each herd's requests, one CSV file a herd.
        var herdRequests: URL?
        /// How many herds of case 19 run for each figure, differing only in
        /// their seeds: more than one gives each figure's median and range.
        var herdSeeds = 1
        var cases = Case.allCases.filter { $0 != .debounce }
        /// Set by the hidden `--memory-child KIND` flag.
        var memoryChild: MemoryCase.Kind?
        var showsHelp = false

        static let quick = Options(
            n: 20_000, million: 100_000, schedule: Schedule(warmups: 1, rounds: 5), memoryRounds: 1
        )

        init(
            n: Int = 100_000,
            million: Int = 1_000_000,
            schedule: Schedule = Schedule(warmups: 2, rounds: 9),
            memoryRounds: Int = 3
        ) {
            self.n = n
            self.million = million
            self.schedule = schedule
            self.memoryRounds = memoryRounds
        }

        /// Parses `arguments` (without the executable's name).
        init(parsing arguments: [String]) throws {
            self.init()
            if arguments.contains("--quick") { self = .quick }
            var iterator = arguments.makeIterator()
            func value(for flag: String) throws -> String {
                guard let value = iterator.next() else { throw BenchmarkFailure("\(flag) needs a value") }
                return value
            }
            func count(for flag: String, minimum: Int) throws -> Int {
                let text = try value(for: flag)
                guard let count = Int(text), count >= minimum else {
                    throw BenchmarkFailure("\(flag) needs a whole number of at least \(minimum), got \(text)")
                }
                return count
            }
            func counts(for flag: String) throws -> [Int] {
                try value(for: flag).split(separator: ",").map { text in
                    guard let count = Int(text), count >= 1 else {
                        throw BenchmarkFailure("\(flag) needs whole numbers of at least 1, got \(text)")
                    }
                    return count
                }
            }
            while let argument = iterator.next() {
                switch argument {
                case "--quick": break
                case "--n": n = try count(for: argument, minimum: 1)
                case "--million": million = try count(for: argument, minimum: 10)
                case "--rounds": schedule.rounds = try count(for: argument, minimum: 1)
                case "--warmups": schedule.warmups = try count(for: argument, minimum: 0)
                case "--memory-rounds": memoryRounds = try count(for: argument, minimum: 1)
                case "--count-n": countN = try count(for: argument, minimum: 1)
                case "--count-rounds": countRounds = try count(for: argument, minimum: 1)
                case "--checksum-mib": checksumMegabytes = try count(for: argument, minimum: 1)
                case "--debounce-runs": debounceRuns = try count(for: argument, minimum: 1)
                case "--outbox-records": outboxRecords = try count(for: argument, minimum: 1)
                case "--form-mib": formMegabytes = try count(for: argument, minimum: 1)
                case "--herd": herdCounts = try counts(for: argument)
                case "--herd-minutes": herdMinutes = try counts(for: argument)
                case "--herd-server":
                    herdServers = try value(for: argument).split(separator: ",").map { name in
                        switch name {
                        case "retry-after": .retryAfter(.seconds(5))
                        case "slots": .slots
                        default: throw BenchmarkFailure("--herd-server takes retry-after or slots, got \(name)")
                        }
                    }
                case "--herd-pushback": herdPushback = try count(for: argument, minimum: 0)
                case "--herd-growth":
                    let text = try value(for: argument)
                    guard let growth = Double(text), growth.isFinite, growth > 0 else {
                        throw BenchmarkFailure("--herd-growth takes a number above 0, got \(text)")
                    }
                    herdGrowth = growth
                case "--herd-seeds": herdSeeds = try count(for: argument, minimum: 1)
                case "--herd-requests": herdRequests = URL(fileURLWithPath: try value(for: argument), isDirectory: true)
                case "--only": schedule.only = try value(for: argument)
                case "--variant": schedule.onlyNamed = try value(for: argument)
                case "--case":
                    let names = try value(for: argument).split(separator: ",")
                    cases = try names.map { name in
                        guard let chosen = Case(rawValue: String(name)) else {
                            throw BenchmarkFailure("unknown case \(name); the cases are \(Self.caseNames)")
                        }
                        return chosen
                    }
                case "--memory-child":
                    let name = try value(for: argument)
                    guard let kind = MemoryCase.Kind(rawValue: name) else {
                        throw BenchmarkFailure("unknown memory child \(name)")
                    }
                    memoryChild = kind
                case "--help", "-h": showsHelp = true
                default: throw BenchmarkFailure("unknown argument \(argument); see --help")
                }
            }
        }

        static var caseNames: String { Case.allCases.map(\.rawValue).joined(separator: ", ") }
    }

    static let usage = """
        USAGE: swift run -c release Benchmarks [--quick] [--n N] [--million M] [--rounds R]
                                               [--warmups W] [--memory-rounds R] [--count-n C] [--count-rounds K]
                                               [--checksum-mib S] [--debounce-runs D] [--outbox-records R]
                                               [--form-mib F]
                                               [--case NAME,...] [--only TEXT] [--variant NAME]

        Runs JobKit and hand-written GCD side by side, interleaved, in one process,
        and prints per-job times (median, min) and the median of pair-by-pair ratios.

          --quick            a short run: N = 20000, M = 100000, 5 rounds, 1 warm-up
          --n N              jobs per batch in cases 1-4, 8, 9, 15-17, 21, 22, jobs in case 7 (default 100000)
          --million M        jobs in cases 5 and 6, steps in case 20 (default 1000000)
          --rounds R         measured rounds, each running every variant once (default 9)
          --warmups W        unmeasured batches per variant first (default 2)
          --memory-rounds R  child processes per variant in cases 6 and 7 (default 3)
          --count-n C        jobs per valgrind run in cases 10-11, and 2C (default 10000)
          --count-rounds K   times case 10 counts each variant's instructions (default 3)
          --checksum-mib S   the file's size in case 12, in MiB (default 64; needs node)
          --debounce-runs D  runs of each test in case 13 (default 100)
          --outbox-records R posts in the outbox case 14 opens (default 1000)
          --form-mib F       the file's size in case 18, in MiB (default 32; needs node)
          --herd N,...       outboxes in each herd of case 19 (default 1000,10000)
          --herd-minutes M,...  minutes each herd's backlog takes at the server's capacity (default 5,25,60)
          --herd-server S,...   what each herd's server answers past its capacity: retry-after (Retry-After: 5)
                                or slots (a slot each) (default retry-after,slots)
          --herd-pushback S  the herd's outboxes' pushbackDelay, in seconds (default: the option's, 240)
          --herd-growth X    the ceiling of the herd's outboxes' drawn holds, in times the time held (default 2)
          --herd-seeds K     runs each herd of case 19 with K seeds: each figure's median, [least–most] (default 1)
          --herd-requests DIR  writes every request each herd's server saw to DIR, a CSV file a herd
          --case NAME,...    only these cases: \(Options.caseNames)
                             (debounce, about two minutes of real time, runs only when named)
          --only TEXT        only the variants whose name contains TEXT (for profiling)
          --variant NAME     only the variant named exactly NAME
        """

    /// Runs the executable with `arguments` and returns its exit status.
    static func main(_ arguments: [String]) -> Int32 {
        do {
            let options = try Options(parsing: arguments)
            if options.showsHelp {
                print(usage)
                return 0
            }
            if let kind = options.memoryChild {
                print(try MemoryCase.measure(kind, n: options.n).line)
                return 0
            }
            print(header(options))
            var reports: [CaseReport] = []
            for chosen in options.cases {
                let executable = MemoryCase.currentExecutable
                let caseReports =
                    switch chosen {
                    case .counts:
                        try CountCase.run(n: options.countN, rounds: options.countRounds, executable: executable)
                    case .loop:
                        [
                            try run(chosen, options: options, executable: executable),
                            try LoopCase.memory(
                                steps: options.million, rounds: options.memoryRounds, executable: executable),
                        ]
                    default: [try run(chosen, options: options, executable: executable)]
                    }
                for report in caseReports { print(report.markdown) }
                reports.append(contentsOf: caseReports)
            }
            // A run of cases without goals (the herd's) ends with its own
            // lines.
            if reports.contains(where: { $0.rows.contains { $0.goal != nil } }) {
                print(goalSummary(reports))
            }
            return 0
        } catch {
            FileHandle.standardError.write(Data("Benchmarks: \(error)\n".utf8))
            return 1
        }
    }

    /// Runs one case.
    static func run(_ chosen: Case, options: Options, executable: String) throws -> CaseReport {
        switch chosen {
        case .group: try TimingCases.group(n: options.n, schedule: options.schedule)
        case .sequence: try TimingCases.sequence(n: options.n, schedule: options.schedule)
        case .value: try TimingCases.value(n: options.n, schedule: options.schedule)
        case .bounded: try TimingCases.bounded(n: options.n, schedule: options.schedule)
        case .immediate: try TestQueueCases.run(million: options.million, schedule: options.schedule)
        case .memory: try MemoryCase.run(n: options.million, rounds: options.memoryRounds, executable: executable)
        case .timers: try MemoryCase.runTimers(n: options.n, rounds: options.memoryRounds, executable: executable)
        case .asyncGroup: try TimingCases.asyncGroup(n: options.n, schedule: options.schedule)
        case .asyncSequence: try TimingCases.asyncSequence(n: options.n, schedule: options.schedule)
        case .counts: try CountCase.run(n: options.countN, rounds: options.countRounds, executable: executable)[0]
        case .checksums: try ChecksumCase.run(megabytes: options.checksumMegabytes, schedule: options.schedule)
        case .debounce: try DebounceCase.run(runs: options.debounceRuns)
        case .outbox: try OutboxCase.run(records: options.outboxRecords, schedule: options.schedule)
        case .race: try CombinatorCases.race(n: options.n, schedule: options.schedule)
        case .outcomes: try CombinatorCases.outcomes(n: options.n, schedule: options.schedule)
        case .zip: try CombinatorCases.zip(n: options.n, schedule: options.schedule)
        case .form: try FormCase.run(megabytes: options.formMegabytes, schedule: options.schedule)
        case .loop: try LoopCase.time(steps: options.million, schedule: options.schedule)
        case .source: try SharingCases.source(n: options.n, schedule: options.schedule)
        case .shared: try SharingCases.shared(n: options.n, schedule: options.schedule)
        case .herd:
            try HerdCase.run(
                counts: options.herdCounts, minutes: options.herdMinutes, servers: options.herdServers,
                pushbackDelay: options.herdPushback.map { .seconds($0) }, holdGrowth: options.herdGrowth,
                seeds: options.herdSeeds,
                requestsFolder: options.herdRequests)
        }
    }

    static func header(_ options: Options) -> String {
        let info = ProcessInfo.processInfo
        let date = ISO8601DateFormatter().string(from: Date())
        return """
            # JobKit benchmarks
            \(date), \(info.activeProcessorCount) cores, \(info.operatingSystemVersionString)
            N = \(options.n) (cases 1-4, 7-9, 15-17, 21-22), M = \(options.million) (cases 5-6, 20), \
            \(options.schedule.warmups) warm-up batches and \(options.schedule.rounds) interleaved rounds per variant
            """
    }

    /// One line per goal: met or missed.
    static func goalSummary(_ reports: [CaseReport]) -> String {
        var lines = ["## Goals (JobKit ÷ hand-written, median of pairs)", ""]
        for report in reports {
            for row in report.rows {
                guard let goal = row.goal, let ratio = row.ratio else { continue }
                let verdict = ratio <= goal ? "met" : "MISSED"
                lines.append(
                    "- \(report.title.prefix(while: { $0 != "." })). \(format(ratio, digits: 2))× "
                        + "(goal ≤ \(format(goal, digits: 2))×) against \(row.name): \(verdict)"
                )
            }
        }
        return lines.joined(separator: "\n")
    }
}

// MARK: - Printing

extension CaseReport {
    /// The case as a Markdown table.
    var markdown: String {
        if let table {
            return (["### \(title)", ""] + table + (notes.isEmpty ? [] : [""] + notes) + [""]).joined(separator: "\n")
        }
        var lines = [
            "### \(title)",
            "",
            "| variant | median \(unit) | min \(unit) | JobKit ÷ this | goal |",
            "| --- | ---: | ---: | ---: | --- |",
        ]
        for row in rows {
            let ratio = row.ratio.map { format($0, digits: 2) + "×" } ?? ""
            let goal = row.goal.map { "≤ " + format($0, digits: 2) + "×" } ?? ""
            let digits = unit == "MiB" ? 1 : unit == "allocations" ? 2 : 0
            lines.append(
                "| \(row.name) | \(format(row.median, digits: digits)) | \(format(row.minimum, digits: digits)) "
                    + "| \(ratio) | \(goal) |"
            )
        }
        if !notes.isEmpty {
            lines.append("")
            lines.append(contentsOf: notes)
        }
        lines.append("")
        return lines.joined(separator: "\n")
    }
}

/// `value` with `digits` decimals.
func format(_ value: Double, digits: Int) -> String {
    guard value.isFinite else { return "n/a" }
    return String(format: "%.\(digits)f", value)
}
