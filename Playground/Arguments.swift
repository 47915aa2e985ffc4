import Foundation

/// The Playground's command line.
struct Arguments {
    var server: URL?
    /// The presigning backend of S3-compatible storage.
    var s3: URL?
    /// A Mastodon-compatible server, and the access token to post with.
    var mastodon: URL?
    /// The creation endpoint of a tus server.
    var tus: URL?
    var token: String?
    var concurrency = 3
    var retries = 2
    var failRate = 0.0
    var seed: UInt64 = 1
    var output: URL?
    /// Where the run makes its own folder; `nil` for the system's temporary
    /// folder.
    var workFolder: URL?
    /// The folder of a durable outbox, which keeps the media and the post's
    /// record across runs; `nil` to publish without one.
    var outbox: URL?
    /// Whether the outbox's transfers go by the double of a background
    /// session, the app suspended, killed and relaunched midway.
    var background = false
    var megabytesPerSecond = 10.0
    var scale = 1.0
    /// The time limit of one upload attempt, in seconds.
    var timeout: Double?
    /// Keep the run's folder after a successful run.
    var keeps = false
    /// Show the tree of jobs as they run.
    var isVerbose = false
    var showsHelp = false

    static let usage = """
        Usage: swift run Playground [options]

        Publishes a sample post (6 photos, 3 videos, about 74 MB) with JobKit's
        Uploads: the media a few at a time, then the post, with live progress.
        By default it "uploads" into a fresh temporary folder, removed at exit.

        Options:
          --server URL       upload over HTTP (PUT) to this server instead of a folder
          --s3 URL           upload to S3-compatible storage through presigned URLs from the backend
                             at URL (POST {"operation", "key", ...} answered {"url": ...}); videos
                             go up as multipart uploads that a new run resumes if one is killed
          --mastodon URL     post to a Mastodon-compatible server instead (3 photos and a clip, each
                             with a description, at most 4 media), waiting for its clip to be
                             processed; prints the status's URL. Needs --token
          --token TOKEN      the access token to post with (scopes write:media and write:statuses)
          --tus URL          upload through a tus server's creation endpoint at URL (the media and the
                             post, in resumable uploads that a new run resumes if one is killed)
          --concurrency N    media uploads at once (default 3)
          --retries N        retries per upload (with --s3 or --tus, per request) whose failure can pass (timed
                             out, connection lost, HTTP 408, 429, 500, 502, 503, 504), with jittered
                             backoff (default 2)
          --timeout SECONDS  time limit of one attempt of an upload (with --s3 or --tus, of a request)
                             (default: none)
          --fail-rate P      fail this share of attempts on purpose, 0 to 1 (default 0)
          --seed N           seed for --fail-rate and the retries' jitter (default 1)
          --output DIR       upload into DIR instead of a temporary folder, and keep it
          --keep             keep the temporary folder of a successful run (removed by default)
          --outbox DIR       publish through a durable outbox kept in DIR, with the media: a run
                             killed at any moment is resumed by the next one with the same DIR,
                             which sends only what is not stored yet, and nothing once published
          --background       with --outbox and a server (--server, --s3, --tus or --mastodon): the
                             transfers go by a background session (the double of the system's), and the
                             app is suspended, killed and relaunched midway, rejoining them
          --work-folder DIR  make the run's folder (generated media, and uploads without --output)
                             in DIR (default: the system's temporary folder)
          --speed MBPS       simulated speed of each folder upload in MB/s, 0 for the disk's (default 10)
          --scale S          multiply every media size by S (default 1)
          -v, --verbose      show the tree of jobs as they run: each upload, its retries and bytes sent
          -h, --help         show this help
        """

    struct UsageError: Error, CustomStringConvertible {
        let description: String
    }

    /// Parses `--name value` and `--name=value` options.
    static func parse(_ words: some Sequence<String>) throws(UsageError) -> Arguments {
        var arguments = Arguments()
        var words = Array(words)[...]
        while let word = words.popFirst() {
            var name = word
            var inlineValue: String?
            if word.hasPrefix("--"), let equals = word.firstIndex(of: "=") {
                name = String(word[..<equals])
                inlineValue = String(word[word.index(after: equals)...])
            }
            func value() throws(UsageError) -> String {
                if let inlineValue { return inlineValue }
                guard let next = words.popFirst() else { throw UsageError(description: "\(name) needs a value") }
                return next
            }
            switch name {
            case "-h", "--help":
                arguments.showsHelp = true
            case "--server":
                let text = try value()
                guard let url = URL(string: text), let scheme = url.scheme, ["http", "https"].contains(scheme),
                    url.host != nil
                else { throw UsageError(description: "--server needs an http or https URL, got '\(text)'") }
                arguments.server = url
            case "--s3":
                let text = try value()
                guard let url = URL(string: text), let scheme = url.scheme, ["http", "https"].contains(scheme),
                    url.host != nil
                else {
                    throw UsageError(
                        description: "--s3 needs the http or https URL of a presigning backend, got '\(text)'")
                }
                arguments.s3 = url
            case "--mastodon":
                let text = try value()
                guard let url = URL(string: text), let scheme = url.scheme, ["http", "https"].contains(scheme),
                    url.host != nil
                else {
                    throw UsageError(description: "--mastodon needs the http or https URL of a server, got '\(text)'")
                }
                arguments.mastodon = url
            case "--tus":
                let text = try value()
                guard let url = URL(string: text), let scheme = url.scheme, ["http", "https"].contains(scheme),
                    url.host != nil
                else {
                    throw UsageError(
                        description: "--tus needs the http or https URL of a tus creation endpoint, got '\(text)'")
                }
                arguments.tus = url
            case "--token":
                let token = try value()
                guard !token.isEmpty, !token.contains(where: \.isWhitespace) else {
                    throw UsageError(description: "--token needs an access token, without spaces")
                }
                arguments.token = token
            case "--concurrency":
                arguments.concurrency = try number(name, try value(), atLeast: 1)
            case "--retries":
                arguments.retries = try number(name, try value(), atLeast: 0)
            case "--fail-rate":
                let text = try value()
                guard let rate = Double(text), (0...1).contains(rate) else {
                    throw UsageError(description: "--fail-rate needs a number from 0 to 1, got '\(text)'")
                }
                arguments.failRate = rate
            case "--seed":
                let text = try value()
                guard let seed = UInt64(text) else {
                    throw UsageError(description: "--seed needs a whole number, got '\(text)'")
                }
                arguments.seed = seed
            case "--timeout":
                let text = try value()
                guard let seconds = Double(text), (0.001...86_400).contains(seconds) else {
                    throw UsageError(
                        description: "--timeout needs a number of seconds from 0.001 to 86400, got '\(text)'")
                }
                arguments.timeout = seconds
            case "-v", "--verbose":
                arguments.isVerbose = true
            case "--keep":
                arguments.keeps = true
            case "--output":
                arguments.output = URL(fileURLWithPath: try value(), isDirectory: true)
            case "--outbox":
                arguments.outbox = URL(fileURLWithPath: try value(), isDirectory: true)
            case "--background":
                arguments.background = true
            case "--work-folder":
                arguments.workFolder = URL(fileURLWithPath: try value(), isDirectory: true)
            case "--speed":
                let text = try value()
                // Past a terabyte a second, the speed no longer counts bytes
                // as an `Int` does.
                guard let speed = Double(text), (0...1_000_000).contains(speed) else {
                    throw UsageError(description: "--speed needs a number of MB/s from 0 to 1000000, got '\(text)'")
                }
                arguments.megabytesPerSecond = speed
            case "--scale":
                let text = try value()
                guard let scale = Double(text), scale > 0, scale <= 100 else {
                    throw UsageError(description: "--scale needs a number above 0 and at most 100, got '\(text)'")
                }
                arguments.scale = scale
            default:
                throw UsageError(description: "unknown option '\(word)'")
            }
        }
        guard arguments.s3 == nil || (arguments.server == nil && arguments.output == nil) else {
            throw UsageError(description: "--s3 cannot be combined with --server or --output")
        }
        guard (arguments.mastodon == nil) == (arguments.token == nil) else {
            throw UsageError(description: "--mastodon and --token go together: a server and the token to post with")
        }
        guard arguments.mastodon == nil || (arguments.server == nil && arguments.s3 == nil && arguments.output == nil)
        else {
            throw UsageError(description: "--mastodon cannot be combined with --server, --s3 or --output")
        }
        guard
            arguments.tus == nil
                || (arguments.server == nil && arguments.s3 == nil && arguments.mastodon == nil
                    && arguments.output == nil)
        else {
            throw UsageError(description: "--tus cannot be combined with --server, --s3, --mastodon or --output")
        }
        if arguments.background {
            guard arguments.outbox != nil else {
                throw UsageError(description: "--background needs --outbox DIR: it shows the outbox's transfers")
            }
            guard arguments.server != nil || arguments.s3 != nil || arguments.tus != nil || arguments.mastodon != nil
            else {
                throw UsageError(
                    description:
                        "--background needs a server (--server, --s3, --tus or --mastodon): a background session "
                        + "carries HTTP requests, and the folder uploader makes none")
            }
        }
        if arguments.outbox != nil {
            if arguments.workFolder != nil {
                throw UsageError(
                    description: "--outbox cannot be combined with --work-folder: the outbox's folder holds the media")
            }
            if arguments.keeps {
                throw UsageError(description: "--outbox keeps everything in its folder: --keep does not apply")
            }
            if arguments.isVerbose {
                throw UsageError(description: "--verbose shows publishing's jobs, which an --outbox run has not")
            }
        }
        return arguments
    }

    private static func number(_ name: String, _ text: String, atLeast minimum: Int) throws(UsageError) -> Int {
        guard let number = Int(text), number >= minimum else {
            throw UsageError(description: "\(name) needs a whole number, \(minimum) or more, got '\(text)'")
        }
        return number
    }
}
