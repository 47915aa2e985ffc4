import Foundation
import JobKit
import JobKitTesting
import Uploads
import UploadsTesting

/// What a run publishes, where, and where it keeps its files: the sample
/// post's media, written into the run's folder, and the uploader the
/// arguments choose.
struct Workspace {
    let arguments: Arguments
    let stop: Stop
    /// The run's folder: the `--outbox` folder, or one made for the run
    /// (under `--work-folder`, or the system's temporary folder).
    let folder: URL
    let post: Post
    let uploader: any Uploader
    /// Where the uploads go, for the user.
    let destinationName: String
    /// The uploader, when it is the folder uploader (no `--server`, no
    /// `--s3`).
    let directoryUploader: DirectoryUploader?
    /// The server the destinations lie below.
    let base: URL
    /// The Mastodon-compatible server of `--mastodon`.
    let mastodon: MastodonServer?
    /// The uploader of the post's document, when it is not ``uploader``:
    /// the statuses' with `--mastodon`.
    let documentUploader: (any Uploader)?

    /// Writes the sample media and makes the uploader; on failure, prints
    /// why and exits.
    static func make(_ arguments: Arguments, stop: Stop) -> Workspace {
        let folder: URL
        if let outbox = arguments.outbox {
            folder = outbox
        } else {
            // With --s3 or --tus the folder has a fixed name and outlives a
            // run that did not publish, so that the next run finds the media
            // and the resumable uploads' manifests, and resumes.
            let name =
                arguments.s3 != nil
                ? "JobKitPlayground-s3"
                : arguments.tus != nil ? "JobKitPlayground-tus" : "JobKitPlayground-\(UUID().uuidString.prefix(8))"
            folder = (arguments.workFolder ?? FileManager.default.temporaryDirectory)
                .appendingPathComponent(name, isDirectory: true)
        }
        let base =
            arguments.server ?? arguments.mastodon ?? arguments.tus ?? URL(string: "https://uploads.example.com")!
        var uploader: any Uploader
        var documentUploader: (any Uploader)?
        let destinationName: String
        var directoryUploader: DirectoryUploader?
        var mastodon: MastodonServer?
        do {
            if let server = arguments.mastodon, let token = arguments.token {
                let created = try MastodonServer(url: server, token: token)
                uploader = created.mediaUploader
                documentUploader = created.statusUploader
                mastodon = created
                destinationName = server.absoluteString
            } else if let backend = arguments.s3 {
                // Its requests are retried, each on its own, by the run's
                // policy, which it is handed.
                uploader = try S3Uploader(
                    presigner: PresigningBackend(endpoint: backend),
                    manifestFolder: folder.appendingPathComponent("multipart", isDirectory: true)
                )
                destinationName = "S3 storage, URLs presigned by \(backend.absoluteString)"
            } else if let endpoint = arguments.tus {
                // Its requests are retried, each on its own, by the run's
                // policy, as S3's are.
                uploader = try TusUploader(manifestFolder: folder.appendingPathComponent("tus", isDirectory: true))
                destinationName = "the tus server at \(endpoint.absoluteString)"
            } else if let server = arguments.server {
                uploader = URLSessionUploader(method: .put)
                destinationName = server.absoluteString
            } else {
                let root = arguments.output ?? folder.appendingPathComponent("uploaded", isDirectory: true)
                let speed =
                    arguments.megabytesPerSecond > 0
                    ? Int((arguments.megabytesPerSecond * 1_000_000).rounded(.up)) : nil
                let directory = try DirectoryUploader(root: root, bytesPerSecond: speed)
                uploader = directory
                directoryUploader = directory
                destinationName = root.path
            }
            if arguments.failRate > 0 {
                uploader = try FaultInjectingUploader(
                    wrapping: uploader, failureRate: arguments.failRate, seed: arguments.seed)
                documentUploader = try documentUploader.map {
                    try FaultInjectingUploader(wrapping: $0, failureRate: arguments.failRate, seed: arguments.seed &+ 1)
                }
            }
        } catch {
            fail("cannot make the uploader: \(error.localizedDescription)", code: 1)
        }
        if arguments.outbox != nil {
            checkOutboxSettings(in: folder, destination: destinationName, scale: arguments.scale)
        }

        let post: Post
        do {
            // Files written by an earlier run are kept as they are, so that
            // their uploads can resume.
            post = try SamplePost.make(
                in: folder.appendingPathComponent("media"), destinationBase: base, scale: arguments.scale,
                reusingFiles: arguments.s3 != nil || arguments.tus != nil || arguments.outbox != nil,
                isCancelled: { stop.isRequested }, mastodon: mastodon, tus: arguments.tus)
        } catch is CancellationError {
            Self.cleanUp(folder, arguments, published: false)
            fail("stopped (\(stop.name)) while writing the sample media; nothing was uploaded", code: stop.exitStatus)
        } catch {
            Self.cleanUp(folder, arguments, published: false)
            fail("cannot write the sample media into \(folder.path): \(error.localizedDescription)", code: 1)
        }
        return Workspace(
            arguments: arguments, stop: stop, folder: folder, post: post, uploader: uploader,
            destinationName: destinationName, directoryUploader: directoryUploader, base: base, mastodon: mastodon,
            documentUploader: documentUploader)
    }

    /// `options` with the post's document and its uploader, for a
    /// Mastodon-compatible server: the status, through its own uploader;
    /// for publishing and the outbox alike.
    func publishOptions(_ options: PublishOptions) -> PublishOptions {
        guard let mastodon else { return options }
        var options = mastodon.publishOptions(options)
        options.documentUploader = documentUploader  // with --fail-rate's faults
        return options
    }

    /// What the progress lines call each upload, the post's last: the
    /// media's file names, and "the status" for a Mastodon-compatible
    /// server or "the post" for a tus server, whose media all go to one
    /// endpoint; their destinations otherwise (`nil`).
    var uploadNames: [String]? {
        guard mastodon != nil || arguments.tus != nil else { return nil }
        return post.media.map { $0.filename ?? $0.defaultFilename } + [mastodon != nil ? "the status" : "the post"]
    }

    /// Where the published post is, for the user: the status's URL on a
    /// Mastodon-compatible server, the document's URL and status
    /// otherwise.
    func place(of receipt: UploadReceipt) -> String {
        if mastodon != nil, let url = MastodonServer.statusURL(in: receipt) { return url.absoluteString }
        return "\(receipt.finalURL.absoluteString) (\(receipt.status))"
    }

    /// Checks that an `--outbox` folder is used with the settings of its
    /// first run, and records them on that run: its post was made at one
    /// scale and goes to one place, and the record in the outbox is of
    /// that post. Prints why and exits otherwise.
    private static func checkOutboxSettings(in folder: URL, destination: String, scale: Double) {
        let file = folder.appendingPathComponent("playground.json")
        let settings = ["destination": destination, "scale": Format.number(scale)]
        if let data = try? Data(contentsOf: file) {
            guard let earlier = try? JSONDecoder().decode([String: String].self, from: data) else {
                fail("\(file.path) does not say where its post goes: give another --outbox folder", code: 1)
            }
            guard earlier == settings else {
                fail(
                    "\(folder.path) holds a post sent to \(earlier["destination"] ?? "?") at scale "
                        + "\(earlier["scale"] ?? "?"); this run would send it to \(destination) at scale "
                        + "\(settings["scale"] ?? "?"): give another --outbox folder",
                    code: 64)
            }
            return
        }
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            try encoder.encode(settings).write(to: file, options: .atomic)
        } catch {
            fail("cannot keep an outbox in \(folder.path): \(error.localizedDescription)", code: 1)
        }
    }

    /// The retry policy of each upload, from `--retries` and `--seed`.
    var retry: RetryPolicy {
        RetryPolicy(
            attempts: arguments.retries + 1,
            initialDelay: .milliseconds(200),
            maximumDelay: .seconds(2),
            random: SeededRandomNumberGenerator(seed: arguments.seed)
        )
    }

    /// The bytes of the post's media.
    var mediaBytes: Int64 {
        post.media.reduce(Int64(0)) { $0 + ((try? $1.byteCount()) ?? 0) }
    }

    /// Prints what is published, where, and how.
    func printHeading(_ title: String) {
        print("\(title) \"\(post.text)\"")
        print(
            "  \(Format.count(post.photos.count, "photo")) and \(Format.count(post.videos.count, "video")), \(Format.bytes(mediaBytes)), "
                + "to \(destinationName)")
        print(
            "  \(arguments.concurrency) at a time, "
                + (arguments.retries == 0
                    ? "no retries"
                    : "up to \(arguments.retries) \(arguments.retries == 1 ? "retry" : "retries") each "
                        + "when a failure can pass")
                + (arguments.timeout.map { ", \(Format.number($0)) s per attempt" } ?? "")
                + (arguments.failRate > 0
                    ? ", \(Int(arguments.failRate * 100))% of attempts failing on purpose" : ""))
        // Out at once, into a pipe too, rather than with the next progress
        // line. (All streams: `stdout` itself is not concurrency-safe to
        // name.)
        fflush(nil)
    }

    /// Removes what the run made in its folder: the generated media always,
    /// and the uploads too unless the post was published and `--keep` asks
    /// to keep it. Files uploaded into a folder given with `--output` are
    /// the user's, and stay; so does everything in the `--outbox` folder.
    func cleanUp(published: Bool) {
        Self.cleanUp(folder, arguments, published: published)
    }

    private static func cleanUp(_ folder: URL, _ arguments: Arguments, published: Bool) {
        let fileManager = FileManager.default
        if arguments.outbox != nil { return }
        if arguments.s3 != nil || arguments.tus != nil {
            // Unpublished, with resumable uploads left to resume: kept for
            // the next run. (A cancelled upload is aborted, and leaves none.)
            let kind = arguments.s3 != nil ? "multipart" : "tus"
            let manifestFolder = folder.appendingPathComponent(kind)
            // Not a tus upload's that finished: kept, marked so, to be found.
            let manifests = try? fileManager.contentsOfDirectory(atPath: manifestFolder.path).filter { name in
                let data = try? Data(contentsOf: manifestFolder.appendingPathComponent(name))
                let json = data.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
                return json?["finished"] as? Bool != true
            }
            if !published, manifests?.isEmpty == false {
                print("  the media and \(manifests?.count ?? 0) unfinished \(kind) uploads stay in \(folder.path):")
                print("  run again to resume them")
            } else if !(published && arguments.keeps) {
                try? fileManager.removeItem(at: folder)
            }
            return
        }
        let keeps = published && arguments.keeps && arguments.output == nil && arguments.server == nil
        try? fileManager.removeItem(at: keeps ? folder.appendingPathComponent("media") : folder)
        if (try? fileManager.contentsOfDirectory(atPath: folder.path))?.isEmpty == true {
            try? fileManager.removeItem(at: folder)
        }
    }
}
