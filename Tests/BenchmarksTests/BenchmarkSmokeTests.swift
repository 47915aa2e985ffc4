import Foundation
import JobKitTesting
import TestSupport
import Testing

@testable import Benchmarks

/// Runs every benchmark case with a tiny size, so the executable never rots.
/// These tests check that each case runs and reports sane results, never
/// how fast anything is.
///
/// The cases block their calling thread while they wait (as the executable
/// does), and some await Swift tasks meanwhile: run on the test runner's
/// cooperative threads, they could starve the tasks they wait for. So each
/// test runs its case on a thread of its own, and the suite runs serialized.
@Suite("Benchmarks smoke", .serialized, .timeLimit(.minutes(1)))
struct BenchmarkSmokeTests {
    static let tiny = Schedule(warmups: 1, rounds: 2)

    @Test(arguments: [
        BenchmarkSuite.Case.group, .sequence, .value, .bounded, .immediate, .asyncGroup, .asyncSequence, .race,
        .outcomes, .zip, .loop, .source, .shared,
    ])
    func timingCaseRunsAndReportsEveryVariant(chosen: BenchmarkSuite.Case) async throws {
        var options = BenchmarkSuite.Options(n: 64, million: 200, schedule: Self.tiny)
        options.cases = [chosen]
        let report = try await onOwnThread { [options] in
            try BenchmarkSuite.run(chosen, options: options, executable: "")
        }
        #expect(report.rows.count >= 2)
        for row in report.rows {
            #expect(row.samples.count == Self.tiny.rounds)
            #expect(row.samples.allSatisfy { $0 > 0 && $0.isFinite })
        }
        #expect(report.rows.first?.ratio == nil)
        #expect(report.markdown.contains("| variant |"))
    }

    @Test func theOutboxCaseOpensTheOutboxItFilled() async throws {
        let report = try await onOwnThread { try OutboxCase.run(records: 12, schedule: Self.tiny) }
        #expect(report.rows.count == 3)
        #expect(report.rows.allSatisfy { $0.samples.count == Self.tiny.rounds && $0.samples.allSatisfy { $0 > 0 } })
        #expect(report.rows.first?.ratio == nil)
        #expect(report.notes.first?.hasPrefix("Opening and closing the outbox took ") == true)
    }

    @Test func theHerdCaseEndsWithOneLinePerHerd() async throws {
        let report = try await onOwnThread { try HerdCase.run(counts: [20, 30], minutes: [1]) }
        #expect(report.table?.count == 6, "a header, its rule and a row per herd: two counts, two servers")
        let lines = report.notes.filter { $0.hasPrefix("herd ") }
        #expect(lines.count == 4)
        #expect(lines.first?.hasPrefix("herd 20 (Retry-After: 5): peak ") == true)
        #expect(lines.last?.hasPrefix("herd 30 (a slot each): peak ") == true)
        #expect(lines.allSatisfy { $0.hasSuffix(" rejected per useful request") })
        #expect(report.markdown.contains("| outboxes |"))
    }

    @Test func theHerdCaseWritesEachHerdsRequestsWhenAsked() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("BenchmarksTests-herd-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        let report = try await onOwnThread {
            try HerdCase.run(counts: [20], minutes: [1], servers: [.slots], requestsFolder: folder)
        }
        let file = folder.appendingPathComponent("herd-20-slots-1min.csv")
        let lines = try String(contentsOf: file, encoding: .utf8).split(separator: "\n")
        #expect(lines.first == "second,phone,taken_before,answer,asked_first")
        #expect(lines.dropFirst().filter { $0.contains(",taken,") }.count == 20 * 5, "every phone's post, taken")
        #expect(report.notes.last == "Every request each server saw: \(file.path)")
        #expect(report.notes.filter { $0.hasPrefix("A lone phone, idle server") }.count == 2, "\(report.notes)")
    }

    @Test func goalsAreCheckedAgainstTheHandWrittenBaselines() async throws {
        let report = try await onOwnThread { try TimingCases.group(n: 32, schedule: Self.tiny) }
        let goals = report.rows.compactMap(\.goal)
        #expect(goals == [1.0])
        #expect(report.rows.dropFirst().allSatisfy { $0.ratio.map { $0 > 0 } == true })
        #expect(BenchmarkSuite.goalSummary([report]).contains("goal ≤ 1.00×"))
    }

    /// Cases 8 and 9 measure two settings, a serial and a concurrent other
    /// queue: each hand-written row is compared with the JobKit row above
    /// it, not with the first row, and held to 1.10×.
    @Test(arguments: [BenchmarkSuite.Case.asyncGroup, .asyncSequence])
    func eachHandWrittenRowIsComparedWithTheJobKitRowAboveIt(chosen: BenchmarkSuite.Case) async throws {
        var options = BenchmarkSuite.Options(n: 64, million: 200, schedule: Self.tiny)
        options.cases = [chosen]
        let report = try await onOwnThread { [options] in
            try BenchmarkSuite.run(chosen, options: options, executable: "")
        }
        try #require(report.rows.count == 4)
        #expect(report.rows.map { $0.name.contains("JobKit") } == [true, false, true, false])
        #expect(report.rows.map { $0.name.contains("serial") } == [true, true, false, false])
        #expect(report.rows.map { $0.ratio == nil } == [true, false, true, false])
        #expect(report.rows.map(\.goal) == [nil, 1.10, nil, 1.10])

        // Profiling one hand-written variant alone builds no JobKit row.
        let only = Schedule(warmups: 0, rounds: 1, only: "concurrent queue, ")
        let alone = try await onOwnThread {
            chosen == .asyncGroup
                ? try TimingCases.asyncGroup(n: 16, schedule: only)
                : try TimingCases.asyncSequence(n: 16, schedule: only)
        }
        #expect(alone.rows.map(\.name).allSatisfy { $0.contains("hand-written") && $0.contains("concurrent") })
        #expect(alone.rows.count == 1)
    }

    /// Case 13 runs only when named; its virtual-time test passes every
    /// run (the real-time one may fail: that is what it measures).
    @Test func debounceCaseRunsBothTestsOnlyWhenNamed() async throws {
        #expect(!BenchmarkSuite.Options().cases.contains(.debounce))
        #expect(try BenchmarkSuite.Options(parsing: ["--case", "debounce"]).cases == [.debounce])
        let report = try await onOwnThread { try DebounceCase.run(runs: 2) }
        #expect(report.rows.count == 2)
        #expect(report.rows.allSatisfy { $0.samples.count == 2 && $0.samples.allSatisfy { $0 > 0 } })
        #expect(report.notes.first?.hasPrefix("Failed runs: 0 of 2 in virtual time") == true)
    }

    @Test func synchronousSequenceKeepsAFlatStack() async throws {
        #expect(try await onOwnThread { try TestQueueCases.sequenceStackDepth(count: 10_000) } < 256 * 1024)
    }

    @Test(arguments: MemoryCase.Kind.allCases)
    func memoryChildCompletesItsGroupInProcess(kind: MemoryCase.Kind) async throws {
        let sample = try await onOwnThread { try MemoryCase.measure(kind, n: 500) }
        #expect(sample.peak > 0)
        #expect(MemoryCase.Sample(line: sample.line) == sample)
    }

    /// Cases 10 and 11 count one variant per valgrind run: each target must
    /// name exactly one row of its case (a name that is part of another,
    /// "JobKit `Job.group`" in "JobKit `Job.group`, each child `named(_:)`",
    /// once counted both).
    @Test(arguments: CountCase.targets.map(\.variant))
    func eachCountTargetRunsExactlyOneVariant(variant: String) async throws {
        let target = try #require(CountCase.targets.first { $0.variant == variant })
        var options = BenchmarkSuite.Options(
            n: 16, million: 200, schedule: Schedule(warmups: 0, rounds: 1, onlyNamed: variant))
        options.cases = [target.chosen]
        let report = try await onOwnThread { [options] in
            try BenchmarkSuite.run(target.chosen, options: options, executable: "")
        }
        #expect(report.rows.map(\.name) == [variant])
    }

    @Test func readsValgrindsTotals() {
        let callgrind = "==12== Events    : Ir\n==12== Collected : 123456789\n==12==\n==12== I   refs:      123,456,789"
        #expect(CountCase.parse(.instructions, callgrind) == 123_456_789)
        let memcheck = "==7== HEAP SUMMARY:\n==7==     total heap usage: 1,234,567 allocs, 1,234,000 frees, 9 bytes"
        #expect(CountCase.parse(.allocations, memcheck) == 1_234_567)
        #expect(CountCase.parse(.allocations, callgrind) == nil)
    }

    @Test func parsesTheCommandLine() throws {
        let quick = try BenchmarkSuite.Options(parsing: ["--quick"])
        #expect(quick.n == 20_000 && quick.schedule.rounds >= 5)
        let custom = try BenchmarkSuite.Options(parsing: ["--n", "500", "--case", "group,memory"])
        #expect(custom.n == 500)
        #expect(custom.cases == [.group, .memory])
        let child = try BenchmarkSuite.Options(parsing: ["--memory-child", "jobkit-queued", "--n", "10"])
        #expect(child.memoryChild == .jobKitQueued)
        #expect(try BenchmarkSuite.Options(parsing: ["--count-rounds", "5"]).countRounds == 5)
        #expect(throws: BenchmarkFailure.self) { try BenchmarkSuite.Options(parsing: ["--count-rounds", "0"]) }
        let named = try BenchmarkSuite.Options(parsing: ["--variant", "JobKit `Job.group`"])
        #expect(named.schedule.measures("JobKit `Job.group`"))
        #expect(!named.schedule.measures("JobKit `Job.group`, each child `named(_:)`"))
        #expect(throws: BenchmarkFailure.self) { try BenchmarkSuite.Options(parsing: ["--n", "zero"]) }
        #expect(throws: BenchmarkFailure.self) { try BenchmarkSuite.Options(parsing: ["--case", "nope"]) }
    }
}

/// Where the build put the test bundle, and so the executables: on Linux
/// the bundle is the running executable; on macOS a runner loads it from a
/// `.xctest` bundle.
/// The cases that start a server (Node's, for the checksum and form cases)
/// or a child (the memory case): a suite of their own that holds one of the
/// machine's slots (``StartsProcesses``), which the cases computed in this
/// process do not need.
@Suite("Benchmarks smoke, with servers and children", .startsProcesses, .serialized, .timeLimit(.minutes(1)))
struct BenchmarkProcessSmokeTests {
    @Test func checksumCaseUploadsWithAndWithoutChecks() async throws {
        // Two parts of 8 MiB; one under Thread Sanitizer, where hashing them
        // took this test past its minute beside CI's builds.
        let megabytes = isThreadSanitized ? 2 : 10
        let report = try await onOwnThread {
            try ChecksumCase.run(megabytes: megabytes, schedule: BenchmarkSmokeTests.tiny)
        }
        #expect(
            report.rows.map(\.name) == [
                "loopback, with checksums", "loopback, without", "100 MB/s link, with checksums",
                "100 MB/s link, without",
            ])
        for row in report.rows {
            #expect(row.samples.count == BenchmarkSmokeTests.tiny.rounds)
            #expect(row.samples.allSatisfy { $0 > 0 && $0.isFinite })
        }
        #expect(report.rows.map(\.goal) == [nil, nil, nil, ChecksumCase.goal])
        #expect(report.rows[1].ratio.map { $0 > 0 } == true)
        #expect(report.rows[3].ratio.map { $0 > 0 } == true)
        #expect(report.markdown.contains("MB/s"))
    }

    @Test func formCaseUploadsAsAFormAndAsARawBody() async throws {
        let report = try await onOwnThread { try FormCase.run(megabytes: 2, schedule: BenchmarkSmokeTests.tiny) }
        #expect(report.rows.map(\.name) == ["form: MultipartFormUploader", "raw body: URLSessionUploader, POST"])
        for row in report.rows {
            #expect(row.samples.count == BenchmarkSmokeTests.tiny.rounds)
            #expect(row.samples.allSatisfy { $0 > 0 && $0.isFinite })
        }
        #expect(report.rows[1].ratio.map { $0 > 0 } == true)
        #expect(report.notes.last?.contains("form 1.00") == true, "\(report.notes)")
        #expect(report.notes.last?.contains("raw 1.00") == true, "\(report.notes)")
    }

    @Test func memoryCaseSpawnsTheBuiltExecutable() async throws {
        // `swift test` (and `swift build --build-tests`) builds the
        // executable next to the test bundle; without it this test would
        // check nothing, so it fails.
        let candidates = builtProductFolders().map { $0.appendingPathComponent("Benchmarks").path }
        let executable = try #require(
            candidates.first(where: FileManager.default.isExecutableFile(atPath:)),
            "no Benchmarks executable in \(candidates): build it with `swift build --build-tests`"
        )
        let report = try await onOwnThread {
            try MemoryCase.measureRounds(
                n: 500, rounds: 1, executable: executable, kinds: [.jobKitQueued, .dispatchGroupQueued])
        }
        #expect(report.rows.count == 2)
        #expect(report.rows[1].goal == 1.2)
        #expect(report.rows.allSatisfy { $0.samples.count == 1 })
    }
}

private func builtProductFolders() -> [URL] {
    [URL(fileURLWithPath: MemoryCase.currentExecutable).deletingLastPathComponent()]
        + Bundle.allBundles.filter { $0.bundlePath.hasSuffix(".xctest") }.map {
            $0.bundleURL.deletingLastPathComponent()
        }
}

/// Runs `work` on a new thread, off Swift's cooperative pool, and returns
/// what it returns, or throws `TimeLimitExceeded` after 50 seconds (a
/// blocked thread ignores the suite's time limit; it is left behind).
func onOwnThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    // A bound against a hang, not a speed: under Thread Sanitizer, beside
    // the plain test pass, the checksum case took 7 to 24 s.
    try await withTimeLimit(.seconds(50)) { try await offThePool(throwing: work) }
}
