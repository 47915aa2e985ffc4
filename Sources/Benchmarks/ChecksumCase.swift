import Foundation
import JobKit
import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Case 12: what verified bytes cost an upload. An `S3Uploader` sends a
/// file as a multipart upload (8 MiB parts, four at a time) to Node's test
/// server on 127.0.0.1, with `Content-MD5` and `ETag` checks and without,
/// interleaved; the figures are MB/s. Twice: as fast as the loopback goes,
/// where the uploader, curl and the server share the machine's cores and
/// the checks' cost is all CPU, and through a link of 100 MB/s (the server
/// reads each of the four parts at a quarter of it), a fast real network,
/// where reading and hashing a part overlaps with sending the others.
///
/// Node's server answers each part with its MD5 as `ETag`, as S3 does, so
/// the checks run and pass; it hashes every body itself as it arrives, in
/// both variants alike.
enum ChecksumCase {
    /// Throughput with checks may be at most 10% lower: its time at most
    /// 1 / 0.9 of the time without.
    static let goal = 1.11
    /// The link the goal is held on, in MB/s.
    static let link = 100.0

    static func run(megabytes: Int, schedule: Schedule) throws -> CaseReport {
        let (folder, file) = try writeVideo(megabytes: megabytes, in: "JobKitChecksums")
        defer { try? FileManager.default.removeItem(at: folder) }
        let size = megabytes * 1024 * 1024

        let loopback = try NodeServer.start()
        defer { loopback.stop() }
        let linked = try NodeServer.start()
        defer { linked.stop() }
        // Each part's connection gets a quarter of the link: 64 KiB, then a
        // pause.
        let pause = 65_536 / (link * 1_000_000 / 4)
        let parts = (size + 8 * 1024 * 1024 - 1) / (8 * 1024 * 1024)
        for server in [loopback, linked] {
            try server.rule(
                "s3/create",
                ["answer": "<InitiateMultipartUploadResult><UploadId>u-1</UploadId></InitiateMultipartUploadResult>"])
            try server.rule(
                "s3/complete",
                ["answer": "<CompleteMultipartUploadResult><ETag>\"joined\"</ETag></CompleteMultipartUploadResult>"])
        }
        for part in 1...parts {
            try linked.rule("s3/part-\(part)", ["read_delay": pause])
        }

        func variant(_ name: String, verifiesBytes: Bool, server: NodeServer) throws -> Variant {
            let uploader = try S3Uploader(
                presigner: PathPresigner(server: server.url),
                manifestFolder: folder.appendingPathComponent("manifests"),
                partSize: 8 * 1024 * 1024, maxConcurrentParts: 4, verifiesBytes: verifiesBytes)
            let video = Video(file: file, destination: URL(string: "https://media.example.com/video.mp4")!)
            return Variant(name: name) { _ in
                let done = Completion<Job<UploadReceipt>.Outcome>()
                Job.uploading(video, using: uploader).perform(on: DispatchQueue.global()) { done.complete($0) }
                _ = try done.wait(seconds: 120).get()
            }
        }
        // The ratio is the time with checks ÷ the time without, pair by
        // pair; the figures, nanoseconds per MiB, become MB/s.
        let linkName = "\(Int(link)) MB/s link"
        let pairs = [
            try measureInterleaved(
                [
                    variant("loopback, with checksums", verifiesBytes: true, server: loopback),
                    variant("loopback, without", verifiesBytes: false, server: loopback),
                ],
                n: megabytes, schedule: schedule),
            try measureInterleaved(
                [
                    variant("\(linkName), with checksums", verifiesBytes: true, server: linked),
                    variant("\(linkName), without", verifiesBytes: false, server: linked),
                ],
                n: megabytes, schedule: schedule, goals: ["\(linkName), without": goal]),
        ]
        let rows = pairs.joined().map { row in
            var row = row
            row.samples = row.samples.map { 1_048_576 / $0 * 1_000 }
            return row
        }
        var report = CaseReport(
            title: "12. Verified bytes: a \(megabytes) MiB multipart upload to a test server on 127.0.0.1",
            unit: "MB/s", rows: rows)
        report.notes = [
            "Ratio: the time with checksums ÷ the time without, pair by pair (1.11× is 10% less throughput).",
            "With checksums, each 8 MiB part is read and hashed before it is sent (Content-MD5), then its ETag checked.",
            "On the loopback the cost is CPU: the uploader's hashing competes with curl and the server for the cores.",
        ]
        return report
    }

    /// Each operation to its own path of the server: it signs nothing.
    struct PathPresigner: S3Presigner {
        let server: URL

        func presignedURL(for operation: S3Operation, object: URL) async throws -> URL {
            switch operation {
            case .createMultipartUpload: server.appendingPathComponent("s3/create")
            case .uploadPart(_, let number, _): server.appendingPathComponent("s3/part-\(number)")
            case .completeMultipartUpload: server.appendingPathComponent("s3/complete")
            default: server.appendingPathComponent("s3/other")
            }
        }
    }
}

/// Writes `video.mp4`, `megabytes` MiB of bytes that differ from mebibyte
/// to mebibyte (an MD5 costs the same whatever they are), in a new folder
/// named after `prefix` under the temporary folder; returns both.
func writeVideo(megabytes: Int, in prefix: String) throws -> (folder: URL, file: URL) {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID())")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let file = folder.appendingPathComponent("video.mp4")
    let size = megabytes * 1024 * 1024
    var bytes = Data(count: size)
    bytes.withUnsafeMutableBytes { (buffer: UnsafeMutableRawBufferPointer) in
        for index in stride(from: 0, to: size, by: 4096) { buffer[index] = UInt8(truncatingIfNeeded: index >> 12) }
    }
    try bytes.write(to: file)
    return (folder, file)
}

/// Node's test server (`Tests/UploadsTests/Fixtures/upload_server.js`), run
/// for the length of a case: it stops when its standard input closes.
struct NodeServer {
    let process: Process
    let input: Pipe
    let url: URL

    static func start() throws -> NodeServer {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Tests/UploadsTests/Fixtures/upload_server.js")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["node", script.path]
        let input = Pipe.closedOnExec()
        let output = Pipe.closedOnExec()
        process.standardInput = input
        process.standardOutput = output
        do {
            try process.run()
        } catch {
            throw BenchmarkFailure("case 12 needs node to run \(script.path): \(error)")
        }
        // The port, alone on the first line.
        var line = Data()
        while let byte = try output.fileHandleForReading.read(upToCount: 1), let first = byte.first, first != 10 {
            line.append(first)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self)) else {
            process.terminate()
            throw BenchmarkFailure("node's test server did not say its port")
        }
        return NodeServer(process: process, input: input, url: URL(string: "http://127.0.0.1:\(port)")!)
    }

    /// Sets the server's rule for uploads to `path` (see the script).
    func rule(_ path: String, _ rule: [String: any Sendable]) throws {
        var request = URLRequest(url: url.appendingPathComponent("_control"))
        request.httpMethod = "POST"
        var body = rule
        body["path"] = "/" + path
        request.httpBody = try JSONSerialization.data(withJSONObject: body)
        let done = Completion<Int>()
        URLSession.shared.dataTask(with: request) { _, response, _ in
            done.complete((response as? HTTPURLResponse)?.statusCode ?? 0)
        }.resume()
        guard try done.wait(seconds: 10) == 204 else { throw BenchmarkFailure("node's test server refused a rule") }
    }

    /// One request the server received (see the script's `GET /_received`).
    struct Received: Decodable {
        let method: String
        let path: String
        let rawHeaders: [[String]]
        /// The body's bytes.
        let length: Int

        /// The bytes of the request line and headers, as sent: HTTP/1.1,
        /// each header `name: value` on a line, then an empty line.
        var headerBytes: Int {
            "\(method) \(path) HTTP/1.1\r\n".utf8.count
                + rawHeaders.reduce(0) { $0 + $1.joined(separator: ": ").utf8.count + 2 } + 2
        }
    }

    /// Every request the server received so far.
    func received() throws -> [Received] {
        let done = Completion<Data?>()
        URLSession.shared.dataTask(with: url.appendingPathComponent("_received")) { data, _, _ in
            done.complete(data)
        }.resume()
        guard let data = try done.wait(seconds: 30) else { throw BenchmarkFailure("node's test server did not answer") }
        return try JSONDecoder().decode([Received].self, from: data)
    }

    func stop() {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }
}
