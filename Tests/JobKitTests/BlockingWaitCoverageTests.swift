import Foundation
import TestSupport
import Testing

/// No test blocks one of Swift's cooperative threads (one per core), which
/// every other test needs to resume: a blocking wait, and the start of a
/// child process, happen in `Tests/TestSupport` only, off those threads and
/// under its lock. A line elsewhere that blocks on a thread the test made
/// for it says so with `// allowed:` and why, on the line or just above.
@Suite("No test blocks a cooperative thread", .timeLimit(.minutes(1)))
struct BlockingWaitCoverageTests {
    /// What `code` (a line without its comment) does that blocks a thread,
    /// or starts a child outside ``ChildProcess``'s lock; `nil` if nothing.
    static func blockingCall(in code: Substring) -> String? {
        if code.contains(".wait(timeout:") || waitsWithoutAwait(code) {
            return "a semaphore's or group's wait"
        }
        if code.contains(".sync {") || code.contains(".sync(") || code.contains(".asyncAndWait") {
            return "a queue's sync"
        }
        if code.contains("waitUntilExit(") { return "a wait for a process" }
        if code.contains(".performAndWait(") { return "a blocking wait for a job" }
        // allowed: the names of the reads and sleeps this check looks for
        let reads = ["readDataToEndOfFile(", "readToEnd(", ".availableData", ".readData(ofLength", "read(upToCount:"]
        if reads.contains(where: code.contains) { return "a blocking read" }
        // allowed: the names of the reads and sleeps this check looks for
        if ["usleep(", "Thread.sleep(", "sleep("].contains(where: { calls($0, in: code) }) { return "a sleep" }
        if calls("Process()", in: code) || calls("Pipe()", in: code) || calls("posix_spawn", in: code) {
            return "a child or a pipe made outside ChildProcess"
        }
        return nil
    }

    /// Whether `code` calls a `wait()` that is not awaited: one whose
    /// receiver is not just after `await `.
    static func waitsWithoutAwait(_ code: Substring) -> Bool {
        var rest = code[...]
        while let found = rest.range(of: ".wait()") {
            var start = found.lowerBound
            while start > code.startIndex {
                let before = code[code.index(before: start)]
                guard before.isLetter || before.isNumber || before == "_" || before == "." else { break }
                start = code.index(before: start)
            }
            if !code[..<start].hasSuffix("await ") { return true }
            rest = rest[found.upperBound...]
        }
        return false
    }

    /// Whether `code` calls `name` itself: not a method of that name
    /// (`clock.sleep(`), nor a longer name ending with it (`ChildProcess()`).
    static func calls(_ name: String, in code: Substring) -> Bool {
        var rest = code[...]
        while let found = rest.range(of: name) {
            let before = found.lowerBound > code.startIndex ? code[code.index(before: found.lowerBound)] : " "
            if !(before.isLetter || before.isNumber || before == "_" || before == ".") { return true }
            rest = rest[found.upperBound...]
        }
        return false
    }

    @Test func noTestFileBlocksOutsideTestSupport() throws {
        let tests = PackageFolder.file("Tests")
        let files = try #require(FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil))
            .compactMap { $0 as? URL }
            .filter { $0.pathExtension == "swift" && !$0.path.contains("/TestSupport/") }
            // This file spells what it looks for.
            .filter { $0.lastPathComponent != URL(fileURLWithPath: #filePath).lastPathComponent }
        #expect(files.count > 10)
        for file in files {
            let source = try String(contentsOf: file, encoding: .utf8)
            for problem in Self.blockingWaits(in: source) {
                Issue.record("\(file.lastPathComponent): \(problem)")
            }
        }
    }

    @Test func theCheckFindsEachKindOfWaitAndHonoursAllowed() {
        let source = [
            "done.wait(timeout: .now() + 10)",
            "let ok = await outside.wait()",
            "process.waitUntilExit()",
            "let data = pipe.fileHandleForReading.readDataToEndOfFile()",
            "usleep(50)",  // allowed: a sample line the check must find, not a call
            "let child = Process()",
            "// allowed: on a thread of its own",
            "group.wait()",
            "try await queue.clock.sleep(for: .seconds(1))",
            "let flushed = await first.wait()",
            "await done.wait(); done.wait()",
            "queue.sync {}",
            "let run = try ChildProcess(executable, [])",
            "let value = try job.performAndWait()",
        ].joined(separator: "\n")
        let found = Self.blockingWaits(in: source)
        #expect(
            found.map { $0.prefix(8) } == [
                "line 1: ", "line 3: ", "line 4: ", "line 5: ", "line 6: ", "line 11:", "line 12:", "line 14:",
            ])
    }

    /// Each line of `source` that blocks, unless it or the line above
    /// carries `// allowed:`.
    static func blockingWaits(in source: String) -> [String] {
        let lines = source.split(separator: "\n", omittingEmptySubsequences: false)
        var problems: [String] = []
        for (index, line) in lines.enumerated() {
            let code = line.split(separator: "//", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            guard let kind = blockingCall(in: code) else { continue }
            let allowed = line.contains("// allowed:") || (index > 0 && lines[index - 1].contains("// allowed:"))
            if !allowed {
                problems.append(
                    "line \(index + 1): \(kind) blocks the thread it runs on; "
                        + "use TestSupport (offThePool, signalled(within:), ChildProcess): \(line)")
            }
        }
        return problems
    }
}
