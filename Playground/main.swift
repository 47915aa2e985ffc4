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

// Ctrl-C, SIGTERM and SIGHUP stop the run from here on, cleaning up.
let stop = Stop()

/// Ends a run that a signal stopped, before or while publishing.
@MainActor func failStopped(publishing: Bool) -> Never {
    if let tree = stop.treeWhenStopped {
        print("Stopped while these were running:")
        print(ProgressPrinter.indented(tree).joined(separator: "\n"))
    }
    cleanUp(published: false)
    fail(
        publishing
            ? "publishing cancelled (\(stop.name)); uploads in flight were stopped and the post was not published"
            : "stopped (\(stop.name)) while writing the sample media; nothing was uploaded",
        code: stop.exitStatus)
}

// MARK: - The post and the uploader

// With --s3 the folder has a fixed name and outlives a run that did not
// publish, so that the next run finds the media and the multipart uploads'
// manifests, and resumes.
let workFolder = (arguments.workFolder ?? FileManager.default.temporaryDirectory)
    .appendingPathComponent(
        arguments.s3 == nil ? "JobKitPlayground-\(UUID().uuidString.prefix(8))" : "JobKitPlayground-s3",
        isDirectory: true)

/// Removes what the run made in its folder (under `--work-folder`, or the
/// system's temporary folder): the generated media always, and the uploads
/// too unless the post was published and `--keep` asks to keep it. Files
/// uploaded into a folder given with `--output` are the user's, and stay.
func cleanUp(published: Bool) {
    let fileManager = FileManager.default
    if arguments.s3 != nil {
        // Unpublished, with multipart uploads left to resume: kept for the
        // next run. (A cancelled upload is aborted, and leaves none.)
        let manifests = try? fileManager.contentsOfDirectory(
            atPath: workFolder.appendingPathComponent("multipart").path)
        if !published, manifests?.isEmpty == false {
            print("  the media and \(manifests?.count ?? 0) unfinished multipart uploads stay in \(workFolder.path):")
            print("  run again to resume them")
        } else if !(published && arguments.keeps) {
            try? fileManager.removeItem(at: workFolder)
        }
        return
    }
    let keeps = published && arguments.keeps && arguments.output == nil && arguments.server == nil
    try? fileManager.removeItem(at: keeps ? workFolder.appendingPathComponent("media") : workFolder)
    if (try? fileManager.contentsOfDirectory(atPath: workFolder.path))?.isEmpty == true {
        try? fileManager.removeItem(at: workFolder)
    }
}
let base = arguments.server ?? URL(string: "https://uploads.example.com")!
let post: Post
do {
    post = try SamplePost.make(
        in: workFolder.appendingPathComponent("media"), destinationBase: base, scale: arguments.scale,
        reusingFiles: arguments.s3 != nil, isCancelled: { stop.isRequested })
} catch is CancellationError {
    failStopped(publishing: false)
} catch {
    cleanUp(published: false)
    fail("cannot write the sample media into \(workFolder.path): \(error.localizedDescription)", code: 1)
}

let destinationName: String
let directoryUploader: DirectoryUploader?
var uploader: any Uploader
if let backend = arguments.s3 {
    // Its requests are retried, each on its own, by publishing's policy
    // (`options` below), which it is handed in place of its own.
    uploader = S3Uploader(
        presigner: PresigningBackend(endpoint: backend),
        manifestFolder: workFolder.appendingPathComponent("multipart", isDirectory: true)
    )
    destinationName = "S3 storage, URLs presigned by \(backend.absoluteString)"
    directoryUploader = nil
} else if let server = arguments.server {
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
/// The publishing, once performed; the failure's handler reads it.
let publishingHandle = LockedValue<JobHandle?>(nil)
/// The publishing's tree when an upload failed for good, before that
/// failure cancelled the others, and the destination of that upload.
let treeWhenFailed = LockedValue<(tree: JobSnapshot, failed: URL)?>(nil)

let options = PublishOptions(
    maxConcurrentUploads: arguments.concurrency,
    retry: RetryPolicy(
        attempts: arguments.retries + 1,
        initialDelay: .milliseconds(200),
        maximumDelay: .seconds(2),
        random: SeededRandomNumberGenerator(seed: arguments.seed)
    ),
    uploadTimeout: arguments.timeout.map { .seconds($0) },
    onFailedAttempt: { destination, attempt in
        printer.showFailure(of: destination, attempt, attempts: arguments.retries + 1)
        if attempt.nextRetryIn == nil, let tree = publishingHandle.value?.snapshot() {
            treeWhenFailed.withValue { $0 = $0 ?? (tree, destination) }
        }
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
let (outcomes, delivery) = AsyncStream.makeStream(of: Job<PublishReceipt>.Outcome.self)
let handle = Job.publishing(post, using: uploader, options: options, progress: printer.show)
    .perform(on: DispatchQueue.global()) { outcome in
        delivery.yield(outcome)
        delivery.finish()
    }
publishingHandle.setValue(handle)
stop.cancels(handle)

// --verbose: the tree of jobs, redrawn four times a second on a terminal,
// printed every two seconds otherwise.
var treeTimer: (any DispatchSourceTimer)?
if arguments.isVerbose {
    let timer = DispatchSource.makeTimerSource(queue: .global())
    timer.schedule(deadline: .now(), repeating: printer.isTerminal ? .milliseconds(250) : .seconds(2))
    timer.setEventHandler { printer.showTree(handle.snapshot()) }
    timer.resume()
    treeTimer = timer
}

let outcome = await outcomes.first { _ in true } ?? .failure(CancellationError())
let elapsed = clock.now - started
treeTimer?.cancel()
printer.finish()

// MARK: - Summary

switch outcome {
case .success(let published):
    let document = (try? post.document(receipts: published.media).byteCount()) ?? 0
    let bytes = total + document
    print(
        "Published in \(Format.seconds(elapsed)): \(post.photos.count) photos, \(post.videos.count) videos and the post, "
            + "\(Format.bytes(bytes)) at "
            + String(format: "%.1f MB/s", Double(bytes) / 1_000_000 / max(Format.seconds(in: elapsed), 0.001)))
    if let directoryUploader, let destination = post.destination {
        print("  into \(directoryUploader.root.path)")
        print("  the post: \((try? directoryUploader.fileURL(for: destination).path) ?? destination.path)")
        if arguments.output != nil {
            print("  kept: the folder given with --output")
        } else if arguments.keeps {
            print("  kept (--keep); remove it with: rm -r \(workFolder.path)")
        } else {
            print("  removed at exit; pass --keep or --output DIR to keep the files")
        }
    } else {
        print("  to \(destinationName)")
        print("  the post: \(published.post.finalURL.absoluteString) (\(published.post.status))")
    }
    cleanUp(published: true)
    exit(0)
case .failure(is CancellationError):
    failStopped(publishing: true)
case .failure(let error):
    if let (shown, failed) = treeWhenFailed.value {
        var tree = shown
        // The error line names the upload that failed. It shows as an
        // anonymous job that is completing, or when its uploader retries
        // its requests itself, under its own name.
        tree.removeJobs(named: "upload \(failed.lastPathComponent)")
        tree.removeAnonymousLeaves()
        print("When it failed, these were running, and were cancelled:")
        print(ProgressPrinter.indented(tree).joined(separator: "\n"))
    }
    cleanUp(published: false)
    fail("publishing failed, the post was not published: \(error.localizedDescription)", code: 1)
}

extension JobSnapshot {
    /// Drops the jobs below this one that have no name, kind or detail,
    /// and no children left.
    mutating func removeAnonymousLeaves() {
        for index in children.indices { children[index].removeAnonymousLeaves() }
        children.removeAll { $0.name == nil && $0.kind == nil && $0.detail == nil && $0.children.isEmpty }
    }

    /// Drops the jobs below this one named `name`, and their children.
    mutating func removeJobs(named name: String) {
        children.removeAll { $0.name == name }
        for index in children.indices { children[index].removeJobs(named: name) }
    }
}
