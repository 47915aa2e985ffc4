import Foundation
import JobKit
import JobKitTesting
import Uploads

/// A run without `--outbox`: `Job.publishing` uploads the media a few at a
/// time, then the post, and the run prints how it went. Nothing is kept for
/// a next run, but the multipart uploads' manifests with `--s3`.
struct PublishRun {
    let arguments: Arguments
    let workspace: Workspace
    let stop: Stop

    func run() async -> Never {
        let post = workspace.post
        let printer = ProgressPrinter(
            isTerminal: isatty(STDOUT_FILENO) == 1, base: workspace.base, names: workspace.uploadNames)
        /// The publishing, once performed; the failure's handler reads it.
        let publishingHandle = LockedValue<JobHandle?>(nil)
        /// The publishing's tree when an upload failed for good, before that
        /// failure cancelled the others, and the destination of that upload.
        let treeWhenFailed = LockedValue<(tree: JobSnapshot, failed: URL)?>(nil)
        let retries = arguments.retries
        let options = workspace.publishOptions(
            PublishOptions(
                maxConcurrentUploads: arguments.concurrency,
                retry: workspace.retry,
                uploadTimeout: arguments.timeout.map { .seconds($0) },
                onFailedAttempt: { destination, attempt in
                    printer.showFailure(of: destination, attempt, attempts: retries + 1)
                    if attempt.nextRetryIn == nil, let tree = publishingHandle.value?.snapshot() {
                        treeWhenFailed.withValue { $0 = $0 ?? (tree, destination) }
                    }
                }
            ))

        workspace.printHeading("Publishing")
        let clock = ContinuousClock()
        let started = clock.now
        let (outcomes, delivery) = AsyncStream.makeStream(of: Job<PublishReceipt>.Outcome.self)
        let handle = Job.publishing(post, using: workspace.uploader, options: options, progress: printer.show)
            .perform(on: DispatchQueue.global()) { outcome in
                delivery.yield(outcome)
                delivery.finish()
            }
        publishingHandle.setValue(handle)
        stop.cancels(handle)

        // --verbose: the tree of jobs, redrawn four times a second on a
        // terminal, printed every two seconds otherwise.
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

        switch outcome {
        case .success(let published):
            let document =
                workspace.mastodon != nil
                ? Int64((try? MastodonServer.status(of: post, receipts: published.media).count) ?? 0)
                : (try? post.document(receipts: published.media).byteCount()) ?? 0
            printPublished(published, bytes: workspace.mediaBytes + document, in: elapsed)
            workspace.cleanUp(published: true)
            exit(0)
        case .failure(is CancellationError):
            if let tree = stop.treeWhenStopped {
                print("Stopped while these were running:")
                print(ProgressPrinter.indented(tree).joined(separator: "\n"))
            }
            workspace.cleanUp(published: false)
            fail(
                "publishing cancelled (\(stop.name)); uploads in flight were stopped and the post was not published",
                code: stop.exitStatus)
        case .failure(let error):
            if let (shown, failed) = treeWhenFailed.value {
                var tree = shown
                // The error line names the upload that failed. It shows as
                // an anonymous job that is completing, or when its uploader
                // retries its requests itself, under its own name.
                tree.removeJobs(named: "upload \(failed.lastPathComponent)")
                tree.removeAnonymousLeaves()
                print("When it failed, these were running, and were cancelled:")
                print(ProgressPrinter.indented(tree).joined(separator: "\n"))
            }
            workspace.cleanUp(published: false)
            fail("publishing failed, the post was not published: \(error.localizedDescription)", code: 1)
        }
    }

    /// Prints the summary of a published post: how long, how fast, where.
    private func printPublished(_ published: PublishReceipt, bytes: Int64, in elapsed: Duration) {
        let post = workspace.post
        print(
            "Published in \(Format.seconds(elapsed)): \(Format.count(post.photos.count, "photo")), \(Format.count(post.videos.count, "video")) "
                + "and the post, \(Format.bytes(bytes)) at "
                + String(format: "%.1f MB/s", Double(bytes) / 1_000_000 / max(Format.seconds(in: elapsed), 0.001)))
        if let directoryUploader = workspace.directoryUploader, let destination = post.destination {
            print("  into \(directoryUploader.root.path)")
            print("  the post: \((try? directoryUploader.fileURL(for: destination).path) ?? destination.path)")
            if arguments.output != nil {
                print("  kept: the folder given with --output")
            } else if arguments.keeps {
                print("  kept (--keep); remove it with: rm -r \(workspace.folder.path)")
            } else {
                print("  removed at exit; pass --keep or --output DIR to keep the files")
            }
        } else {
            print("  to \(workspace.destinationName)")
            print("  the post: \(workspace.place(of: published.post))")
        }
    }
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
