import Foundation
import TestSupport
import Testing

/// A test that can only fail by hanging must fail instead, so every test of
/// the package runs under a time limit: each one is in a suite declared
/// with `.timeLimit`, or in an extension of one.
@Suite("Every test has a time limit", .timeLimit(.minutes(1)))
struct TimeLimitCoverageTests {
    @Test func everyTestIsInASuiteWithATimeLimit() throws {
        let tests = PackageFolder.file("Tests")
        let files = try #require(FileManager.default.enumerator(at: tests, includingPropertiesForKeys: nil))
            .compactMap { $0 as? URL }
            .filter { $0.pathExtension == "swift" }
        #expect(files.count > 10)
        let sources = try files.map { ($0.lastPathComponent, try String(contentsOf: $0, encoding: .utf8)) }
        let limited = Set(sources.flatMap { Self.suitesWithATimeLimit(in: $0.1) })
        for (file, source) in sources {
            for problem in Self.testsWithoutATimeLimit(in: source, limitedSuites: limited) {
                Issue.record("\(file): \(problem)")
            }
        }
    }

    /// The names of the types declared at the top level of `source` under
    /// an `@Suite(...)` attribute that has a `.timeLimit`.
    private static func suitesWithATimeLimit(in source: String) -> [String] {
        var names: [String] = []
        var limitedAttribute = false
        for line in source.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix("@Suite(") {
                limitedAttribute = line.contains(".timeLimit(")
            } else if let name = declaredType(line) {
                if limitedAttribute && !line.hasPrefix("extension ") { names.append(name) }
                limitedAttribute = false
            }
        }
        return names
    }

    /// Each `@Test` of `source` at the top level, or in a top-level type or
    /// extension that is not one of `limitedSuites`.
    private static func testsWithoutATimeLimit(in source: String, limitedSuites: Set<String>) -> [String] {
        var problems: [String] = []
        var enclosing: String?
        for (index, line) in source.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if let name = declaredType(line) {
                enclosing = name
            } else if line.hasPrefix("}") || line.hasPrefix("func ") || line.hasPrefix("private func ") {
                enclosing = nil
            }
            guard line.trimmingCharacters(in: .whitespaces).hasPrefix("@Test") else { continue }
            if !line.hasPrefix(" ") {
                problems.append("line \(index + 1): a @Test outside any suite has no time limit")
            } else if let enclosing, !limitedSuites.contains(enclosing) {
                problems.append("line \(index + 1): suite \(enclosing) has no .timeLimit")
            }
        }
        return problems
    }

    /// The name of the type a top-level `struct`, `class`, `enum`, `actor`
    /// or `extension` line declares or extends, or `nil`.
    private static func declaredType(_ line: Substring) -> String? {
        guard !line.hasPrefix(" ") else { return nil }
        let words = line.split(separator: " ")
        let keywords: Set<Substring> = ["struct", "class", "enum", "actor", "extension"]
        let modifiers: Set<Substring> = ["final", "private", "fileprivate", "public", "package"]
        guard let keyword = words.firstIndex(where: keywords.contains),
            words[..<keyword].allSatisfy(modifiers.contains),
            keyword + 1 < words.count
        else { return nil }
        return String(words[keyword + 1].prefix { $0.isLetter || $0.isNumber || $0 == "_" })
    }
}
