import Dispatch
import Foundation
import JobKit
import JobKitTesting
import Testing

// The README's examples, verbatim, between the BEGIN/END markers. A test
// below checks that every Swift block of README.md appears in this file,
// so the README cannot drift from code that compiles and runs.

/// Stands in for a real server in the README's example: each upload
/// succeeds at once, from a background queue, and is recorded.
final class FakeServer: Sendable {
    let uploaded = LockIsolated<[String]>([])

    func upload(_ name: String, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        DispatchQueue.global().async {
            self.uploaded.withValue { $0.append(name) }
            completion(.success(()))
        }
    }
}

/// The README example prints its result; here `print` records it instead.
private let printed = LockIsolated<[String]>([])
private let printedSignal = DispatchSemaphore(value: 0)
private func print(_ line: String) {
    printed.withValue { $0.append(line) }
    printedSignal.signal()
}

private func runReadmeExample() -> FakeServer {
    // BEGIN README: complete example
    /// Wraps any completion-handler API: here, one upload.
    func uploading(_ name: String, to server: FakeServer) -> Job<Void> {
        Job { controller in
            server.upload(name) { result in controller.complete(with: result) }
        }
    }

    let server = FakeServer()
    let media = ["beach.jpg", "sunset.jpg", "surf.mov"].map { uploading($0, to: server) }

    let publish = Job.sequence([
        .group(media, maxConcurrent: 2),
        uploading("post.json", to: server),
    ])

    publish
        .timeout(after: .seconds(60))
        .retry(attempts: 3, delay: .exponential(initial: .seconds(1), maximum: .seconds(8)))
        .perform(on: DispatchQueue.global()) { outcome in
            switch outcome {
            case .success: print("published")
            case .failure(let error): print("failed: \(error)")
            }
        }
    // END README
    return server
}

@Suite("README")
struct ReadmeTests {
    @Test func completeExamplePublishesMediaThenThePost() throws {
        let server = runReadmeExample()
        #expect(printedSignal.wait(timeout: .now() + 10) == .success)
        #expect(printed.value == ["published"])
        let uploaded = server.uploaded.value
        #expect(Set(uploaded.prefix(3)) == ["beach.jpg", "sunset.jpg", "surf.mov"])
        #expect(uploaded.last == "post.json")
    }

    // BEGIN README: testing example
    @Test func timesOutAfterThirtySeconds() throws {
        let queue = TestQueue()
        let outcome = LockIsolated<Job<Int>.Outcome?>(nil)
        Job<Int>.never.timeout(after: .seconds(30)).perform(on: queue) { outcome.setValue($0) }

        try queue.advance(by: .seconds(29))
        #expect(outcome.value == nil)  // not yet

        try queue.advance(by: .seconds(1))
        #expect(throws: JobError.timedOut) { try outcome.value?.get() }
    }
    // END README

    @Test func everySwiftBlockOfTheReadmeIsInThisFile() throws {
        let here = URL(fileURLWithPath: #filePath)
        let root = here.deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let source = try String(contentsOf: here, encoding: .utf8)
        let normalizedSource = normalize(source)
        let blocks = readme.components(separatedBy: "```swift\n").dropFirst().map {
            $0.components(separatedBy: "\n```")[0]
        }
        #expect(!blocks.isEmpty)
        for block in blocks where !block.hasPrefix("// Package.swift") && !block.hasPrefix("// not compiled") {
            #expect(
                normalizedSource.contains(normalize(block)), "README block not found in ReadmeTests.swift:\n\(block)")
        }
    }

    /// Lines trimmed of indentation; blank lines and imports (which this
    /// file has once, at the top) dropped.
    private func normalize(_ text: String) -> String {
        text.split(separator: "\n")
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("import ") }
            .joined(separator: "\n")
    }
}
