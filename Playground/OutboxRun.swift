import Foundation
import JobKit
import Uploads

/// A run with `--outbox DIR`: the post goes through a durable `Outbox` kept
/// in `DIR/outbox`, beside the media in `DIR/media`. A run stopped or killed
/// at any moment leaves the outbox's record of what is stored; the next run
/// with the same folder resumes the post and sends only the rest, and once
/// the post is published it says so and sends nothing.
struct OutboxRun {
    let arguments: Arguments
    let workspace: Workspace
    let stop: Stop

    /// The outbox's own folder, inside the run's.
    var folder: URL { workspace.folder.appendingPathComponent("outbox", isDirectory: true) }

    func run() async -> Never {
        var options = Outbox.Options(
            publishing: workspace.publishOptions(
                PublishOptions(
                    maxConcurrentUploads: arguments.concurrency, retry: workspace.retry,
                    uploadTimeout: arguments.timeout.map { .seconds($0) })))
        // The 503s of --fail-rate are this run's own, not a crowded
        // server's: a second of pushback delay, not minutes.
        if arguments.failRate > 0 { options.pushbackDelay = .seconds(1) }
        // The outbox resumes its posts as soon as it opens: on a queue held
        // until the run has read what earlier runs stored, so that no
        // upload of this run counts among them.
        let queue = DispatchQueue(label: "Playground.outbox", attributes: [.concurrent, .initiallyInactive])
        let outbox: Outbox
        do {
            outbox = try Outbox(folder: folder, uploader: workspace.uploader, options: options, queue: queue)
        } catch {
            fail("cannot open the outbox: \(error.localizedDescription)", code: 1)
        }
        for record in outbox.corruptRecords {
            print("  set aside, unreadable: \(record)")
        }
        let post = workspace.post
        let id = Outbox.PostID(post.destination!)  // The sample post has one.
        let count = post.media.count
        let earlier = outbox.entry(id)
        queue.activate()
        if let earlier, earlier.state == .published {
            printAlreadyPublished(earlier)
            outbox.close()
            exit(0)
        }

        workspace.printHeading("Publishing")
        print("  through the outbox in \(folder.path)")
        do {
            switch earlier?.state {
            case nil:
                _ = try outbox.add(post)
            case .failed?:
                print("  retrying: the last run failed: \(earlier?.error?.localizedDescription ?? "")")
                try outbox.retry(id)
            case .paused?:
                try outbox.resume(id)
            default:
                break
            }
        } catch {
            outbox.close()
            fail("cannot add the post to the outbox: \(error.localizedDescription)", code: 1)
        }
        if let earlier, earlier.state != .failed {
            print("  resuming: \(earlier.storedMediaCount) of \(count) media already stored")
        }

        let printer = ProgressPrinter(
            isTerminal: isatty(STDOUT_FILENO) == 1, base: workspace.base, names: workspace.uploadNames)
        let clock = ContinuousClock()
        let started = clock.now
        let changes = outbox.changes
        // A signal closes the outbox: its uploads stop, what is stored stays
        // recorded, and `changes` ends.
        stop.calls { outbox.close() }
        var last = outbox.entry(id)
        for await posts in changes {
            guard let entry = posts.first(where: { $0.id == id }) else { continue }
            last = entry
            printer.show(entry)
            if [.published, .failed, .waitingForNetwork].contains(entry.state) { break }
        }
        let elapsed = clock.now - started
        printer.finish()
        outbox.close()

        // As recorded once every write is made: a signal may have closed
        // the outbox between an upload's end and the list that tells it.
        guard let last = outbox.entry(id) ?? last else { fail("the outbox lost the post", code: 70) }
        let kept = "it stays in \(workspace.folder.path): run again with the same --outbox to resume"
        switch last.state {
        case .published:
            printPublished(last, sentMedia: count - (earlier?.storedMediaCount ?? 0), in: elapsed)
            exit(0)
        case _ where stop.isRequested:
            fail(
                "stopped (\(stop.name)) with \(last.storedMediaCount) of \(count) media stored; \(kept)",
                code: stop.exitStatus)
        case .waitingForNetwork:
            fail("the post waits for the network: \(reason(last)); \(kept)", code: 75)
        default:
            fail("publishing failed, the post was not published: \(reason(last)); \(kept)", code: 1)
        }
    }

    private func reason(_ entry: Outbox.Entry) -> String {
        entry.error?.localizedDescription ?? "no reason given"
    }

    /// Says that an earlier run published the post, and where it is.
    private func printAlreadyPublished(_ entry: Outbox.Entry) {
        print("Already published: \"\(entry.post.text)\"")
        if let place = place(of: entry) { print("  the post: \(place)") }
        print("  nothing was sent; its record stays in \(folder.path)")
    }

    /// Prints the summary of the published post: how long this run took,
    /// what it sent, where the post is.
    private func printPublished(_ entry: Outbox.Entry, sentMedia: Int, in elapsed: Duration) {
        let post = workspace.post
        print(
            "Published in \(Format.seconds(elapsed)): \(Format.count(post.photos.count, "photo")), \(Format.count(post.videos.count, "video")) "
                + "and the post")
        if sentMedia < post.media.count {
            print("  this run sent \(sentMedia) of \(post.media.count) media; an earlier run stored the others")
        }
        print("  to \(workspace.destinationName)")
        if let place = place(of: entry) { print("  the post: \(place)") }
        print("  its record stays in \(folder.path): a run with the same --outbox sends nothing")
    }

    /// Where the published post is: its file with the folder uploader, its
    /// URL and the server's status otherwise.
    private func place(of entry: Outbox.Entry) -> String? {
        if let directoryUploader = workspace.directoryUploader, let destination = workspace.post.destination {
            return (try? directoryUploader.fileURL(for: destination).path) ?? destination.path
        }
        return entry.receipt.map { workspace.place(of: $0.post) }
    }
}
