import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Uploads
import UploadsTesting

/// A folder of its own under the system's temporary folder, removed by
/// `remove()`.
struct TemporaryFolder {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("UploadsTests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// Writes `bytes` to `name` inside the folder and returns its URL.
    func file(_ name: String, bytes: Data) throws -> URL {
        let file = url.appendingPathComponent(name)
        try FileManager.default.createDirectory(
            at: file.deletingLastPathComponent(),
            withIntermediateDirectories: true
        )
        try bytes.write(to: file)
        return file
    }

    /// Every file below the folder, as paths relative to it, sorted.
    func files() -> [String] {
        Self.files(in: url)
    }

    /// The paths of the regular files below `folder`, relative to it, sorted.
    static func files(in folder: URL) -> [String] {
        let base = folder.resolvingSymlinksInPath().path + "/"
        let enumerator = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: [.isRegularFileKey])
        var found: [String] = []
        while let next = enumerator?.nextObject() as? URL {
            let isFile = (try? next.resourceValues(forKeys: [.isRegularFileKey]))?.isRegularFile ?? false
            if isFile { found.append(next.resolvingSymlinksInPath().path.replacingOccurrences(of: base, with: "")) }
        }
        return found.sorted()
    }

    func remove() {
        try? FileManager.default.removeItem(at: url)
    }
}

/// Bytes with a recognizable pattern: byte `i` is `i + seed`, modulo 256.
///
/// The pattern repeats every 256 bytes, so it is made by copying runs that
/// double, not byte by byte: a `map` over a mebibyte took most of a second
/// in the Thread Sanitizer's debug build, a fifth of the CPU time of its
/// Uploads pass.
func patternedBytes(_ count: Int, seed: UInt8 = 0) -> Data {
    var bytes = Data((0..<256).map { UInt8(truncatingIfNeeded: $0 &+ Int(seed)) })
    while bytes.count < count {
        bytes.append(bytes.prefix(min(bytes.count, count - bytes.count)))
    }
    bytes.count = count
    return bytes
}

/// A destination on the example server.
func destination(_ path: String) -> URL {
    URL(string: "https://uploads.example.com/\(path)")!
}

/// A post of photos and videos in memory, of the given sizes.
func samplePost(
    photoSizes: [Int], videoSizes: [Int] = [], destination postDestination: URL? = destination("posts/1.json")
)
    -> Post
{
    Post(
        text: "Surf's up",
        photos: photoSizes.enumerated().map { index, size in
            Photo(bytes: patternedBytes(size, seed: UInt8(index)), destination: destination("photos/\(index).jpg"))
        },
        videos: videoSizes.enumerated().map { index, size in
            Video(bytes: patternedBytes(size, seed: UInt8(index)), destination: destination("videos/\(index).mp4"))
        },
        destination: postDestination
    )
}

/// Records the outcomes a handler receives, whatever the job's value.
final class OutcomeRecorder: Sendable {
    private let box = LockedValue<[Result<any Sendable, any Error>]>([])

    /// Pass as a job's handler: `.perform(on: queue, then: recorder.handler)`.
    func handler<Value: Sendable>(_ outcome: Result<Value, any Error>) {
        box.withValue { $0.append(outcome.map { $0 as any Sendable }) }
    }

    var outcomes: [Result<any Sendable, any Error>] { box.value }

    var isSucceeded: Bool {
        if case .success = outcomes.last, outcomes.count == 1 { return true }
        return false
    }

    var error: (any Error)? {
        if case .failure(let error) = outcomes.last { return error }
        return nil
    }

    /// The value of the last outcome, if it was a success of that type.
    func value<Value>(as type: Value.Type = Value.self) -> Value? {
        if case .success(let value) = outcomes.last { return value as? Value }
        return nil
    }
}

/// Records the progress reports of a publishing job.
final class ProgressRecorder: Sendable {
    private let box = LockedValue<[PublishProgress]>([])

    var handler: @Sendable (PublishProgress) -> Void {
        { progress in self.box.withValue { $0.append(progress) } }
    }

    var reports: [PublishProgress] { box.value }

    /// Whether each report is at least as far as the one before, upload by
    /// upload.
    var neverGoesBackwards: Bool {
        zip(reports, reports.dropFirst()).allSatisfy { before, after in
            zip(before.uploads, after.uploads).allSatisfy {
                $1.bytesSent >= $0.bytesSent && (!$0.isFinished || $1.isFinished)
            } && after.fractionCompleted >= before.fractionCompleted
        }
    }
}

struct TestFailure: Error, Equatable {
    let id: Int
}

/// What a server that is briefly unavailable answers: a failure the
/// default retry policy retries.
func unavailable(_ destination: URL) -> UploadError {
    .httpStatus(UploadReceipt(destination: destination, status: 503))
}

/// A generator whose every draw is one half, so jittered waits are exact.
struct Halfway: RandomNumberGenerator, Sendable {
    mutating func next() -> UInt64 { 1 << 63 }
}

/// A generator whose every draw is the largest: a jittered wait is its
/// ceiling, less a hundred attoseconds.
struct AtTheCeiling: RandomNumberGenerator, Sendable {
    mutating func next() -> UInt64 { .max }
}

/// A generator whose every draw is zero: a jittered wait is its floor.
struct AtTheFloor: RandomNumberGenerator, Sendable {
    mutating func next() -> UInt64 { 0 }
}

/// A retry policy whose waits are exact: `initial` before the first retry,
/// doubling up to `maximum` (full jitter drawing one half of twice each).
func exactRetries(_ attempts: Int, initial: Duration, maximum: Duration? = nil) -> RetryPolicy {
    RetryPolicy(
        attempts: attempts,
        initialDelay: initial * 2,
        maximumDelay: (maximum ?? initial) * 2,
        random: Halfway()
    )
}

/// The SHA-256 of a file, or of its `length` bytes from `offset`,
/// hex-encoded: python3 reads it, off Swift's cooperative threads.
func sha256(of file: URL, offset: Int = 0, length: Int? = nil) async throws -> String {
    try await pythonDigest("sha256", of: file, offset: offset, length: length)
}

/// The bytes that `hex` spells, base64-encoded: what a Content-MD5 header
/// holds for the hex digest Python gives.
func base64(hex: String) -> String {
    var bytes: [UInt8] = []
    var index = hex.startIndex
    while let next = hex.index(index, offsetBy: 2, limitedBy: hex.endIndex), index < hex.endIndex {
        bytes.append(UInt8(hex[index..<next], radix: 16) ?? 0)
        index = next
    }
    return Data(bytes).base64EncodedString()
}

/// The digest by `algorithm` (a name `hashlib` knows: "sha256", "md5") of
/// a file, or of its `length` bytes from `offset`, hex-encoded: python3
/// reads it, off Swift's cooperative threads.
func pythonDigest(_ algorithm: String, of file: URL, offset: Int = 0, length: Int? = nil) async throws -> String {
    let script =
        "import hashlib,sys\nh=hashlib.new(sys.argv[4])\nf=open(sys.argv[1],'rb')\nf.seek(int(sys.argv[2]))\n"
        + "n=int(sys.argv[3])\nwhile n!=0:\n b=f.read(1<<20 if n<0 else min(n,1<<20))\n"
        + " if not b: break\n h.update(b)\n n-=len(b)\nprint(h.hexdigest())"
    let python = try ChildProcess(
        URL(fileURLWithPath: "/usr/bin/env"),
        ["python3", "-c", script, file.path, String(offset), String(length ?? -1), algorithm])
    // A minute for a file of a few hundred megabytes; its output ends
    // with python3, unless another process holds it open.
    guard let output = python.output, let data = await Reading(output).data(within: 60) else {
        python.kill()
        throw FixtureServer.ServerError(message: "python3's digest of \(file.lastPathComponent) did not end")
    }
    _ = await python.exited()
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Writes `size` patterned bytes to `file`, a megabyte at a time.
func writePatternedFile(_ file: URL, size: Int) throws {
    _ = FileManager.default.createFile(atPath: file.path, contents: nil)
    let handle = try FileHandle(forWritingTo: file)
    defer { try? handle.close() }
    let megabyte = 1024 * 1024
    // `patternedBytes(megabyte, seed: s)` is this block from offset s.
    let block = patternedBytes(megabyte + 256)
    for index in 0..<(size / megabyte) {
        // Each megabyte differs, so parts sent in the wrong place show.
        let seed = (index * 7 + 1) % 256
        try handle.write(contentsOf: block[seed..<seed + megabyte])
    }
    if size % megabyte > 0 {
        try handle.write(contentsOf: block[0..<size % megabyte])
    }
}

/// The process's resident anonymous memory (`RssAnon`): heap and buffers,
/// not the file-backed pages of a file being read, which the kernel can drop
/// and which are not the cost of reading a file whole into memory.
func residentMemory() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8) else { return 0 }
    for line in status.split(separator: "\n") where line.hasPrefix("RssAnon:") {
        let kilobytes = line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        return kilobytes * 1024
    }
    return 0
}

/// `true` the first time it is asked about `flag`, `false` after.
func isFirst(_ flag: LockedValue<Bool>) -> Bool {
    flag.withValue { done in
        defer { done = true }
        return !done
    }
}

/// Whether the tests run under CI, where a missing server fails the tests
/// that need it rather than skipping them.
let isRunningInCI = ProcessInfo.processInfo.environment["CI"] != nil

/// Whether `python3 -c statement` succeeds here: whether a Python fixture's
/// modules are installed.
func python3CanRun(_ statement: String) async -> Bool {
    guard
        let python = try? ChildProcess(
            URL(fileURLWithPath: "/usr/bin/env"), ["python3", "-c", statement], output: .null, errors: .null)
    else { return false }
    return await python.exited() == 0 && python.process.terminationReason == .exit
}

/// Starts `python3 Fixtures/<script>` and waits for its first line,
/// `READY <port>` (or `UNAVAILABLE <reason>` before it exits), off Swift's
/// cooperative threads, for at most `seconds`: a fixture that never prints
/// is killed, which ends its output.
func startPythonFixture(
    _ script: String, seconds: Int, installCommand: String
) async throws -> FixtureProcess {
    let path = PackageFolder.file("Tests/UploadsTests/Fixtures/\(script)").path
    let python = try ChildProcess(URL(fileURLWithPath: "/usr/bin/env"), ["python3", path], input: .pipe)
    let line = await FixtureProcess.firstLine(of: python, seconds: seconds)
    let words = line.split(separator: " ", maxSplits: 1).map(String.init)
    guard words.count == 2, words[0] == "READY", let port = Int(words[1]) else {
        python.kill()
        throw FixtureServer.ServerError(
            message: "\(script) did not start (\(words.joined(separator: " "))); \(installCommand)")
    }
    return FixtureProcess(port: port, process: python)
}

/// A test server in a process of its own, on 127.0.0.1: where it listens,
/// and how to stop it.
final class FixtureProcess: Sendable {
    let baseURL: URL
    private let process: ChildProcess

    /// `process`'s standard input is a pipe: the server exits when it
    /// ends, even if the test process crashed.
    init(port: Int, process: ChildProcess) {
        baseURL = URL(string: "http://127.0.0.1:\(port)")!
        self.process = process
    }

    /// Ends the server's input and stops it, without waiting for it to
    /// exit.
    func stop() {
        try? process.input?.close()
        process.terminate()
    }

    /// The first line `process` printed, trimmed, read off Swift's
    /// cooperative threads; if none came within `seconds`, the process is
    /// killed (which ends its output) and what it printed is returned.
    ///
    /// The watchdog is called off by the thread that read the line, as it
    /// reads it: a test that resumes late (a busy machine keeps Swift's
    /// threads) does not have a server that started in time killed under
    /// it.
    static func firstLine(of process: ChildProcess, seconds: Int) async -> String {
        let lineRead = LockedValue(false)
        // A watchdog against a child that never prints; no verdict waits for its time.
        DispatchQueue.global().asyncAfter(deadline: .now() + .seconds(seconds)) {  // allowed: watchdog
            lineRead.withValue { read in if !read { process.kill() } }
        }
        let line = await process.output?.read(until: "\n", then: { lineRead.withValue { $0 = true } }) ?? Data()
        return String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
