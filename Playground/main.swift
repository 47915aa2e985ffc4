// `swift run Playground`: publishes a sample post with JobKit's Uploads and
// shows how it goes. Argument handling and printing only; the work is in
// the Uploads library.
import Foundation
import JobKit
import JobKitTesting
import Uploads
import UploadsTesting

func fail(_ message: String, code: Int32) -> Never {
    fflush(nil)  // all streams: `stdout` itself is not concurrency-safe to name
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
    exit(code)
}

let arguments: Arguments
do {
    arguments = try Arguments.parse(CommandLine.arguments.dropFirst())
} catch {
    fail("\(error)\nRun with --help to see the options.", code: 64)
}
if arguments.showsHelp {
    print(Arguments.usage)
    exit(0)
}

// MARK: - The post and the uploader

let workFolder = (arguments.workFolder ?? FileManager.default.temporaryDirectory)
    .appendingPathComponent("JobKitPlayground-\(UUID().uuidString.prefix(8))", isDirectory: true)

/// Removes what the run made in its folder (under `--work-folder`, or the
/// system's temporary folder): the generated media always, and the uploads
/// too when the post was not published. What stays is a published post (or
/// whatever is in a folder given with `--output`).
func cleanUp(published: Bool) {
    let fileManager = FileManager.default
    try? fileManager.removeItem(at: published ? workFolder.appendingPathComponent("media") : workFolder)
    if (try? fileManager.contentsOfDirectory(atPath: workFolder.path))?.isEmpty == true {
        try? fileManager.removeItem(at: workFolder)
    }
}
let base = arguments.server ?? URL(string: "https://uploads.example.com")!
let post: Post
do {
    post = try SamplePost.make(
        in: workFolder.appendingPathComponent("media"), destinationBase: base, scale: arguments.scale)
} catch {
    cleanUp(published: false)
    fail("cannot write the sample media into \(workFolder.path): \(error.localizedDescription)", code: 1)
}

let destinationName: String
let directoryUploader: DirectoryUploader?
var uploader: any Uploader
if let server = arguments.server {
    uploader = URLSessionUploader(method: .put)
    destinationName = server.absoluteString
    directoryUploader = nil
} else {
    let root = arguments.output ?? workFolder.appendingPathComponent("uploaded", isDirectory: true)
    let speed = arguments.megabytesPerSecond > 0 ? Int(arguments.megabytesPerSecond * 1_000_000) : nil
    let directory = DirectoryUploader(root: root, bytesPerSecond: speed)
    uploader = directory
    directoryUploader = directory
    destinationName = root.path
}
if arguments.failRate > 0 {
    uploader = FaultInjectingUploader(wrapping: uploader, failureRate: arguments.failRate, seed: arguments.seed)
}
let printer = ProgressPrinter(isTerminal: isatty(STDOUT_FILENO) == 1, base: base)

let options = PublishOptions(
    maxConcurrentUploads: arguments.concurrency,
    retry: RetryPolicy(
        attempts: arguments.retries + 1,
        initialDelay: .milliseconds(200),
        maximumDelay: .seconds(2),
        random: SeededRandomNumberGenerator(seed: arguments.seed)
    ),
    uploadTimeout: arguments.timeout.map { .milliseconds(Int64($0 * 1000)) },
    onFailedAttempt: { destination, attempt in
        printer.showFailure(of: destination, attempt, attempts: arguments.retries + 1)
    }
)

// MARK: - Publishing

let media = post.media
let total = media.reduce(Int64(0)) { $0 + ((try? $1.byteCount()) ?? 0) }
print("Publishing \"\(post.text)\"")
print("  \(post.photos.count) photos and \(post.videos.count) videos, \(Format.bytes(total)), to \(destinationName)")
print(
    "  \(arguments.concurrency) at a time, "
        + (arguments.retries == 0
            ? "no retries"
            : "up to \(arguments.retries) \(arguments.retries == 1 ? "retry" : "retries") each when a failure can pass")
        + (arguments.timeout.map { ", \(Format.number($0)) s per attempt" } ?? "")
        + (arguments.failRate > 0 ? ", \(Int(arguments.failRate * 100))% of attempts failing on purpose" : ""))

let clock = ContinuousClock()
let started = clock.now
let publishing = Task {
    try await Job.publishing(post, using: uploader, options: options, progress: printer.show).value
}

// Ctrl-C cancels the publishing: every upload in flight stops.
signal(SIGINT, SIG_IGN)
let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
interrupt.setEventHandler { publishing.cancel() }
interrupt.resume()

let outcome = await publishing.result
let elapsed = clock.now - started
printer.finish()

// MARK: - Summary

switch outcome {
case .success:
    let bytes = total + ((try? post.document().byteCount()) ?? 0)
    print(
        "Published in \(Format.seconds(elapsed)): \(post.photos.count) photos, \(post.videos.count) videos and the post, "
            + "\(Format.bytes(bytes)) at "
            + String(format: "%.1f MB/s", Double(bytes) / 1_000_000 / max(Format.seconds(in: elapsed), 0.001)))
    if let directoryUploader, let destination = post.destination {
        print("  into \(directoryUploader.root.path)")
        print("  the post: \((try? directoryUploader.fileURL(for: destination).path) ?? destination.path)")
    } else {
        print("  to \(destinationName)")
        print("  the post: \(post.destination?.absoluteString ?? "")")
    }
    cleanUp(published: true)
    exit(0)
case .failure(is CancellationError):
    cleanUp(published: false)
    fail("publishing cancelled; uploads in flight were stopped and the post was not published", code: 130)
case .failure(let error):
    cleanUp(published: false)
    fail("publishing failed, the post was not published: \(error.localizedDescription)", code: 1)
}
