import Foundation
import JobKit
import JobKitTesting
import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A herd of outboxes back online at once, in virtual time: the herd test
/// and the Benchmarks' `herd` case.
///
/// Each of `outboxes` outboxes holds one post (four photos and its
/// document: five requests) when an outage ends. They share one
/// `TestQueue` and one server double that takes `capacity` requests a
/// virtual second and answers the rest `503` with `Retry-After`. The
/// outage lasts ``Configuration/outage``: every upload fails as a phone
/// without network does, and every post goes to wait for the network.
/// Then the network comes back, and each outbox is told
/// (`networkDidChange()`) within ``Configuration/noticeSpread``. The run
/// ends once every post is published, or after ``Configuration/limit``.
package enum Herd {
    /// What the herd is, and what its server takes.
    package struct Configuration: Sendable {
        /// How many outboxes, one phone each.
        package var outboxes: Int
        /// The requests the server takes per virtual second.
        package var capacity: Int
        /// The server's `Retry-After` on a `503`.
        package var retryAfter: Duration = .seconds(5)
        /// How long the network is down before it comes back.
        package var outage: Duration = .seconds(600)
        /// The span over which the outboxes learn the network is back.
        package var noticeSpread: Duration = .seconds(2)
        /// How long the server takes to store a medium or a document.
        package var serviceTime: Duration = .milliseconds(500)
        /// How long a `503`, or a failure without network, takes to come.
        package var answerTime: Duration = .milliseconds(50)
        /// The longest the run goes on after the outage, in virtual time.
        package var limit: Duration = .seconds(48 * 3600)
        /// The options of outbox number `index`: seed its retry policy's
        /// generator with it, for a run that is the same each time.
        package var options: @Sendable (_ index: Int) -> Outbox.Options = defaultOptions

        /// The default options, the retry policy's generator seeded with
        /// `index`.
        package static func defaultOptions(_ index: Int) -> Outbox.Options {
            Outbox.Options(
                publishing: PublishOptions(
                    retry: RetryPolicy(random: SeededRandomNumberGenerator(seed: UInt64(index) + 1))))
        }
        /// Seeds when each outbox is told of the network.
        package var seed: UInt64 = 1

        /// A herd of `outboxes` outboxes and a server of `capacity` requests
        /// a second.
        package init(outboxes: Int, capacity: Int) {
            self.outboxes = outboxes
            self.capacity = capacity
        }

        /// A server that takes the herd's requests in `minutes` at full
        /// capacity.
        package init(outboxes: Int, drainingIn minutes: Int) {
            self.init(outboxes: outboxes, capacity: max(1, outboxes * Herd.requestsPerPost / (minutes * 60)))
        }
    }

    /// The requests of one post: four photos and the document.
    package static let requestsPerPost = 5

    /// What the server saw after the outage.
    package struct Report: Sendable {
        /// The herd.
        package var outboxes: Int
        /// The requests the server took per second.
        package var capacity: Int
        /// The most requests that came in one virtual second, after the
        /// first minute since the outage ended.
        package var busiestSecond: Int
        /// The most requests that came in one virtual second in the first
        /// minute.
        package var busiestSecondInFirstMinute: Int
        /// The most requests that came in ``peakWindow`` (any run of that
        /// many seconds), after the first minute.
        package var busiestWindow: Int
        /// From the outage's end to the last post published; `nil` when
        /// some were not published within the run's limit.
        package var published: Duration?
        /// The posts published.
        package var publishedCount: Int
        /// Requests answered `503`.
        package var rejected: Int
        /// Requests that stored something.
        package var useful: Int

        /// The time the backlog takes at full capacity.
        package var ideal: Duration {
            .seconds(Double(outboxes * Herd.requestsPerPost) / Double(capacity))
        }

        /// The seconds over which load is counted: at some sixteen
        /// requests a second, requests that come at random at exactly the
        /// capacity already make single seconds 1.7 times busier.
        package static let peakWindow = 10

        /// The peak load after the first minute, counted over
        /// ``peakWindow``, over the capacity.
        package var peakRatio: Double { Double(busiestWindow) / Double(Self.peakWindow * capacity) }

        /// The busiest second after the first minute over the capacity.
        package var busiestSecondRatio: Double { Double(busiestSecond) / Double(capacity) }

        /// The time to publish every post over the ideal time; infinite when
        /// some were not published.
        package var timeRatio: Double {
            published.map { $0 / ideal } ?? .infinity
        }

        /// Rejected requests per useful one.
        package var rejectedRatio: Double { Double(rejected) / Double(max(useful, 1)) }

        /// `herd N: peak P× capacity, published in T× the ideal time, R
        /// rejected per useful request`.
        package var line: String {
            let time = published == nil ? "not all published" : "published in \(Self.format(timeRatio))× the ideal time"
            return "herd \(outboxes): peak \(Self.format(peakRatio))× capacity, \(time), "
                + "\(Self.format(rejectedRatio)) rejected per useful request"
        }

        private static func format(_ value: Double) -> String {
            String(format: value < 10 ? "%.2f" : "%.1f", value)
        }
    }

    /// Runs the herd, its outboxes kept in `folder`, which it empties.
    ///
    /// Each outbox holds its folder's lock open: the process's limit of
    /// open files is raised to the herd's size and some, as far as the
    /// system's hard limit lets it (macOS starts a shell at 256).
    package static func run(_ configuration: Configuration, in folder: URL) throws -> Report {
        allowOpenFiles(configuration.outboxes + 256)
        let queue = TestQueue(maxSteps: .max)
        let server = Server(queue: queue, configuration: configuration)
        let fileManager = FileManager.default
        try fileManager.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? fileManager.removeItem(at: folder) }
        let photo = folder.appendingPathComponent("photo.jpg")
        try Data(repeating: 7, count: 1_000).write(to: photo)
        var outboxes: [Outbox] = []
        defer { for outbox in outboxes { outbox.close() } }
        for index in 0..<configuration.outboxes {
            let outbox = try Outbox(
                folder: folder.appendingPathComponent("outbox-\(index)"), uploader: server,
                options: configuration.options(index), queue: queue, writer: .unsynced)
            outboxes.append(outbox)
            let base = URL(string: "https://media.example.com/\(index)/")!
            try outbox.add(
                Post(
                    text: "Back online \(index)",
                    photos: (1...4).map {
                        Photo(file: photo, destination: base.appendingPathComponent("photo-\($0).jpg"))
                    },
                    destination: URL(string: "https://media.example.com/posts/\(index).json")!))
        }
        try queue.advance(by: configuration.outage)
        server.comeBack()
        var random = SeededRandomNumberGenerator(seed: configuration.seed)
        let spread = Int64(configuration.noticeSpread / .milliseconds(1))
        for outbox in outboxes {
            let notice = Duration.milliseconds(spread > 0 ? Int64.random(in: 0...spread, using: &random) : 0)
            queue.enqueue(after: notice) { outbox.networkDidChange() }
        }
        let end = queue.now + configuration.limit
        while server.publishedCount < configuration.outboxes, queue.now < end {
            try queue.advance(by: .seconds(1))
        }
        return server.report(outboxes: configuration.outboxes)
    }

    /// Raises the soft limit of open files to `count`, or to the hard limit
    /// when that is lower; an outbox that then cannot open its lock says
    /// so with its own error.
    private static func allowOpenFiles(_ count: Int) {
        var limit = rlimit()
        #if canImport(Glibc)
        let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
        #else
        let resource = RLIMIT_NOFILE
        #endif
        guard getrlimit(resource, &limit) == 0, limit.rlim_cur < rlim_t(count) else { return }
        limit.rlim_cur = min(rlim_t(count), limit.rlim_max)
        _ = setrlimit(resource, &limit)
    }

    /// The server double: `capacity` requests a virtual second, `503` past
    /// them; no network at all until ``comeBack()``.
    private final class Server: Uploader, Sendable {
        private struct State {
            var isOnline = false
            /// Virtual time the network came back.
            var back: Duration = .zero
            /// Requests per virtual second since then, and taken.
            var arrivals: [Int: Int] = [:]
            var taken: [Int: Int] = [:]
            var rejected = 0
            var useful = 0
            var published = 0
            var lastPublished: Duration?
        }

        private enum Answer {
            case noNetwork, busy, stored
        }

        private let queue: TestQueue
        private let configuration: Configuration
        private let state = Lock(State())

        init(queue: TestQueue, configuration: Configuration) {
            self.queue = queue
            self.configuration = configuration
        }

        var publishedCount: Int { state.withLock { $0.published } }

        func comeBack() {
            let now = queue.now
            state.withLock { state in
                state.isOnline = true
                state.back = now
            }
        }

        func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
            Job { [self] controller in
                let now = queue.now
                let answer = state.withLock { state -> Answer in
                    guard state.isOnline else { return .noNetwork }
                    let second = Int((now - state.back) / .seconds(1))
                    state.arrivals[second, default: 0] += 1
                    guard state.taken[second, default: 0] < configuration.capacity else {
                        state.rejected += 1
                        return .busy
                    }
                    state.taken[second, default: 0] += 1
                    return .stored
                }
                let destination = media.destination
                let delay = answer == .stored ? configuration.serviceTime : configuration.answerTime
                let timer = queue.enqueue(after: delay) { [self] in
                    switch answer {
                    case .noNetwork:
                        controller.fail(with: UploadError.network(destination, URLError(.notConnectedToInternet)))
                    case .busy:
                        let seconds = configuration.retryAfter / .seconds(1)
                        let receipt = UploadReceipt(
                            destination: destination, status: 503, headers: ["Retry-After": "\(Int(seconds))"])
                        controller.fail(with: UploadError.httpStatus(receipt))
                    case .stored:
                        let isDocument = destination.pathExtension == "json"
                        let now = queue.now
                        state.withLock { state in
                            state.useful += 1
                            if isDocument {
                                state.published += 1
                                state.lastPublished = now - state.back
                            }
                        }
                        controller.finish(with: UploadReceipt(destination: destination, status: 201))
                    }
                }
                controller.onCancel { timer.cancel() }
            }
        }

        /// The most arrivals in ``Report/peakWindow`` seconds in a row, the
        /// first of them at `first` or later.
        private static func busiestWindow(_ arrivals: [Int: Int], from first: Int) -> Int {
            let last = arrivals.keys.max() ?? 0
            guard last >= first else { return 0 }
            return (first...last).map { start in
                (start..<start + Report.peakWindow).reduce(0) { $0 + (arrivals[$1] ?? 0) }
            }.max() ?? 0
        }

        func report(outboxes: Int) -> Report {
            state.withLock { state in
                Report(
                    outboxes: outboxes, capacity: configuration.capacity,
                    busiestSecond: state.arrivals.filter { $0.key >= 60 }.values.max() ?? 0,
                    busiestSecondInFirstMinute: state.arrivals.filter { $0.key < 60 }.values.max() ?? 0,
                    busiestWindow: Self.busiestWindow(state.arrivals, from: 60),
                    published: state.published == outboxes ? state.lastPublished : nil,
                    publishedCount: state.published, rejected: state.rejected, useful: state.useful)
            }
        }
    }
}
