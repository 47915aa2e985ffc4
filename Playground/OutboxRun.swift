import Foundation
import JobKit
import JobKitTesting
import Uploads
import UploadsTesting

/// A run with `--outbox DIR`: the post goes through a durable `Outbox` kept
/// in `DIR/outbox`, beside the media in `DIR/media`. A run stopped or killed
/// at any moment leaves the outbox's record of what is stored; the next run
/// with the same folder resumes the post and sends only the rest, and once
/// the post is published it says so and sends nothing.
///
/// With `--background`, the outbox's transfers go by the double of a
/// background session (UploadsTesting's `TestBackgroundSystem`), and the
/// app's life is played out midway: suspended, killed by the system, and
/// relaunched, the new outbox rejoining the transfers the system carried
/// on.
struct OutboxRun {
    let arguments: Arguments
    let workspace: Workspace
    let stop: Stop
    /// The system's side of the background session, with `--background`.
    let system: TestBackgroundSystem?

    /// The identifier of the background session.
    static let identifier = "com.example.JobKitPlayground.outbox"

    init(arguments: Arguments, workspace: Workspace, stop: Stop) {
        self.arguments = arguments
        self.workspace = workspace
        self.stop = stop
        system = arguments.background ? TestBackgroundSystem(queue: DispatchQueue.global()) : nil
    }

    /// The outbox's own folder, inside the run's.
    var folder: URL { workspace.folder.appendingPathComponent("outbox", isDirectory: true) }

    /// Opens the outbox on `queue`.
    private func open(_ options: Outbox.Options, on queue: DispatchQueue) throws -> Outbox {
        try Outbox(
            folder: folder, uploader: workspace.uploader, options: options, queue: queue,
            transfers: system?.transfers(identifier: Self.identifier) ?? .inProcess)
    }

    func run() async -> Never {
        var options = Outbox.Options(
            publishing: workspace.publishOptions(
                PublishOptions(
                    maxConcurrentUploads: arguments.concurrency, retry: workspace.retry,
                    uploadTimeout: arguments.timeout.map { .seconds($0) })))
        // The 503s of --fail-rate are this run's own, not a crowded
        // server's: holds of a second or a few, not minutes.
        if arguments.failRate > 0 {
            options.pushbackDelay = .seconds(1)
            options.maxPushbackDelay = .seconds(4)
        }
        // The outbox resumes its posts as soon as it opens: on a queue held
        // until the run has read what earlier runs stored, so that no
        // upload of this run counts among them.
        let queue = DispatchQueue(label: "Playground.outbox", attributes: [.concurrent, .initiallyInactive])
        var outbox: Outbox
        do {
            outbox = try open(options, on: queue)
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
        // A signal closes the outbox: its uploads stop, what is stored stays
        // recorded, and `changes` ends.
        let current = LockedValue(outbox)
        stop.calls { current.value.close() }
        var last = outbox.entry(id)
        var life: BackgroundLife?
        publishing: while true {
            for await posts in outbox.changes {
                guard let entry = posts.first(where: { $0.id == id }) else { continue }
                last = entry
                printer.show(entry)
                if [.published, .failed, .waitingForNetwork].contains(entry.state) { break publishing }
                // With --background, the app leaves the screen once bytes go.
                if system != nil, life == nil, entry.state == .uploading, entry.bytesSent > 0 { break }
            }
            guard let system, life == nil, !stop.isRequested else { break }
            life = BackgroundLife(system: system, suspending: outbox, printer: printer)
            // The user opens the app again (which the system may have
            // launched in the background meanwhile, where new tasks wait).
            system.enterForeground()
            do {
                outbox = try open(options, on: DispatchQueue(label: "Playground.outbox", attributes: .concurrent))
            } catch {
                printer.finish()
                fail("cannot open the outbox again: \(error.localizedDescription)", code: 1)
            }
            current.setValue(outbox)
            if stop.isRequested { outbox.close() }
            printer.say("  relaunched: the new outbox rejoins them")
        }
        let elapsed = clock.now - started
        printer.finish()
        outbox.close()
        if let life {
            print(life.rejoined)
        } else if system != nil, last?.state == .published {
            print("  published before the app could be suspended: nothing to rejoin")
        }

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

/// The app's life midway through a `--background` run: suspended, killed by
/// the system, relaunched.
struct BackgroundLife {
    let system: TestBackgroundSystem
    /// The names of the transfers the system carried on when the app was
    /// killed, and how many tasks it had made until then.
    let carried: Set<String>
    let tasksBefore: Int

    /// Suspends the app, the system kills it, and `outbox` goes with it.
    init(system: TestBackgroundSystem, suspending outbox: Outbox, printer: ProgressPrinter) {
        self.system = system
        system.enterBackground()
        system.suspend()
        let tasks = system.tasks
        carried = Set(tasks.filter { $0.phase != .ended }.map { Self.name(of: $0.description) })
        tasksBefore = tasks.count
        printer.say("  suspended: the system carries \(Format.count(carried.count, "transfer")) on")
        system.terminate()
        outbox.close()
        printer.say("  killed by the system; the transfers go on")
    }

    /// What the relaunch rejoined: the transfers carried on that no task
    /// made after it sent again.
    var rejoined: String {
        let resent = system.tasks.dropFirst(tasksBefore).filter { carried.contains(Self.name(of: $0.description)) }
        let line = "  rejoined \(Format.count(carried.count - resent.count, "transfer"))"
        return line + (resent.isEmpty ? "; none sent twice" : "; sent again: \(resent.count)")
    }

    /// The name of the request a task carries: its description without
    /// its mark (`" @…"`).
    private static func name(of description: String) -> String {
        description.range(of: " @", options: .backwards).map { String(description[..<$0.lowerBound]) }
            ?? description
    }
}
