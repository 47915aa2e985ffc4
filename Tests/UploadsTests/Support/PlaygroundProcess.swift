import Foundation
import JobKitTesting
import TestSupport
import Testing

/// A run of the built Playground, started at once, its output read when
/// it ends; killed if it has not ended after `killedAfter` seconds (a
/// minute by default). Whether it ended in time is known from the process
/// (``ChildProcess``), not from when a busy test got to ask.
final class PlaygroundProcess: Sendable {
    private let child: ChildProcess
    private let texts = LockedValue((output: "", error: ""))

    init(_ arguments: [String], killedAfter seconds: Int = 60) throws {
        child = try ChildProcess(
            try playgroundExecutable(), arguments, output: .pipe, errors: .pipe, killedAfter: Double(seconds))
    }

    /// The process, started.
    var process: Process { child.process }

    /// Kills the run with SIGKILL, unless it ended.
    func kill() {
        child.kill()
    }

    /// Whether ``kill()`` killed it.
    var wasKilled: Bool { child.wasKilled && process.terminationReason == .uncaughtSignal }

    /// Whether the watchdog killed it: it had not exited in its time.
    var timedOut: Bool { child.timedOut }

    var output: String { texts.value.output }
    var error: String { texts.value.error }

    /// Returns once the run printed a line, or ended.
    func firstLine() async {
        await read(until: "\n")
    }

    /// Returns once the run printed `text`, or ended; with `signal`, sends
    /// it that signal as soon as `text` is read, from the thread that read
    /// it (a run may end before a busy test gets to send it).
    func read(until text: String, thenSend signal: Int32? = nil) async {
        let read = await child.output?.read(until: text) { [child] in
            if let signal { child.send(signal) }
        }
        texts.withValue { $0.output += String(decoding: read ?? Data(), as: UTF8.self) }
    }

    /// Waits for the run to end, reading what it printed; its exit
    /// status, or the signal that ended it.
    func exit() async -> Int32 {
        let printing = child.output.map(Reading.init)
        let writing = child.errors.map(Reading.init)
        let status = await child.exited()
        // Once the run exited its pipes end at once, unless another process
        // holds them open: then the test fails, and does not hang.
        let printed = await printing?.data(within: 10)
        let written = await writing?.data(within: 10)
        if printed == nil || written == nil {
            Issue.record("the Playground exited, but its output had not ended 10 seconds later")
        }
        texts.withValue {
            $0.output += String(decoding: printed ?? Data(), as: UTF8.self)
            $0.error += String(decoding: written ?? Data(), as: UTF8.self)
        }
        return status
    }
}

/// The built Playground: next to the test bundle in the build folder.
func playgroundExecutable() throws -> URL {
    var candidates = [URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()]
    #if os(macOS)
    candidates += Bundle.allBundles.filter { $0.bundlePath.hasSuffix(".xctest") }
        .map { $0.bundleURL.deletingLastPathComponent() }
    #endif
    for folder in candidates {
        let executable = folder.appendingPathComponent("Playground")
        if FileManager.default.isExecutableFile(atPath: executable.path) { return executable }
    }
    throw PlaygroundNotFound(searched: candidates.map(\.path))
}

private struct PlaygroundNotFound: Error, CustomStringConvertible {
    let searched: [String]
    var description: String { "the Playground executable is not in \(searched)" }
}
