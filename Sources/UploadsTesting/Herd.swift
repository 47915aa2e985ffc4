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
/// Each of `outboxes` outboxes holds one post (four photos of different
/// sizes and its document: five requests) when an outage ends. They share
/// one `TestQueue` and one server double that takes ``Configuration/capacity``
/// requests a virtual second and answers the rest `503`, with a
/// `Retry-After` that ``Configuration/server`` chooses. The outage lasts
/// ``Configuration/outage``: every upload fails as a phone without network
/// does, and every post goes to wait for the network. Then the network
/// comes back, and each outbox is told (`networkDidChange()`) within
/// ``Configuration/noticeSpread``. The run ends once every post is
/// published, or after ``Configuration/limit``.
package enum Herd {
    /// What the server answers the requests past its capacity: `503`, and
    /// a `Retry-After` that says one of these.
    package enum Server: Sendable, Equatable, CustomStringConvertible {
        /// The same number of seconds for everyone.
        case retryAfter(Duration)
        /// A slot of each rejected client's own: the time the server takes
        /// a post at capacity after the slot it gave the client before
        /// (the i-th client turned away told some i × 5 ÷ capacity
        /// seconds), in whole seconds; a client turned away again before
        /// its slot is told the same one. A client that comes at its slot
        /// or later is served, room or not, until its post is in.
        case slots

        /// `Retry-After: 5`, `slots`.
        package var description: String {
            switch self {
            case .retryAfter(let wait): "Retry-After: \(Int(wait / .seconds(1)))"
            case .slots: "a slot each"
            }
        }
    }

    /// What the herd is, and what its server takes.
    package struct Configuration: Sendable {
        /// How many outboxes, one phone each.
        package var outboxes: Int
        /// The requests the server takes per virtual second.
        package var capacity: Double
        /// What the server answers past its capacity.
        package var server = Server.retryAfter(.seconds(5))
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
        /// Whether the report lists every request the server saw
        /// (``Report/requests``): off unless asked for, as a herd of
        /// 10,000 sends some hundred thousand.
        package var recordsRequests = false
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
        package init(outboxes: Int, capacity: Double) {
            self.outboxes = outboxes
            self.capacity = capacity
        }

        /// A server that takes the herd's requests in `minutes` at full
        /// capacity.
        package init(outboxes: Int, drainingIn minutes: Int) {
            self.init(outboxes: outboxes, capacity: Double(outboxes * Herd.requestsPerPost) / Double(minutes * 60))
        }
    }

    /// The requests of one post: four photos and the document.
    package static let requestsPerPost = 5

    /// The sizes of each post's photos, in bytes, in the post's order.
    package static let photoSizes = [3_000_000, 1_000_000, 4_000_000, 2_000_000]

    /// What the server saw after the outage.
    package struct Report: Sendable {
        /// The herd.
        package var outboxes: Int
        /// The requests the server took per second.
        package var capacity: Double
        /// What the server answered past its capacity.
        package var server: Server
        /// Requests that came in each virtual second since the outage
        /// ended.
        package var arrivals: [Int: Int]
        /// From the outage's end to the last post published; `nil` when
        /// some were not published within the run's limit.
        package var published: Duration?
        /// The posts published.
        package var publishedCount: Int
        /// Requests answered `503`, and the bytes of their bodies that went
        /// (none for one that asked first).
        package var rejected: Int
        package var rejectedBytes: Int64
        /// Requests that stored something, and the bytes they carried.
        package var useful: Int
        package var usefulBytes: Int64
        /// The most requests of one phone answered `503` in the first
        /// minute.
        package var mostRejectedOfOnePhoneInFirstMinute: Int
        /// The most requests one phone sent toward a held host in the
        /// first minute: after it had heard that a request of its was
        /// turned away, before the server took another that it sent after
        /// it heard.
        package var mostTowardAHeldHostOfOnePhoneInFirstMinute: Int
        /// Every request the server saw, in the order it saw them, when
        /// the configuration asked for them (``Configuration/recordsRequests``);
        /// else none.
        package var requests: [Request] = []

        /// One request as the server saw it.
        package struct Request: Sendable, Equatable {
            /// When it came, in virtual seconds since the outage ended.
            package var second: Double
            /// The phone that sent it: its outbox's number.
            package var phone: Int
            /// How many of that phone's requests the server had taken
            /// before this one: 0 for a phone not yet in, up to 4.
            package var takenBefore: Int
            /// Whether the server took it, rather than answering `503`.
            package var taken: Bool
            /// Whether it asked first (`Expect: 100-continue`).
            package var askedFirst: Bool
        }

        /// ``requests`` as CSV, for a spreadsheet or a script: a header,
        /// then a line a request.
        package var requestsCSV: String {
            "second,phone,taken_before,answer,asked_first\n"
                + requests.map { request in
                    let second = String(format: "%.3f", request.second)
                    return "\(second),\(request.phone),\(request.takenBefore),\(request.taken ? "taken" : "503"),"
                        + "\(request.askedFirst)\n"
                }.joined()
        }

        /// The time the backlog takes at full capacity.
        package var ideal: Duration {
            .seconds(Double(outboxes * Herd.requestsPerPost) / capacity)
        }

        /// The seconds over which load is counted: at some sixteen
        /// requests a second, requests that come at random at exactly the
        /// capacity already make single seconds 1.7 times busier.
        package static let peakWindow = 10

        /// The most requests in ``peakWindow`` seconds in a row, all of
        /// them in `seconds` (since the outage ended), over what the server
        /// takes in that time.
        package func peak(in seconds: Range<Int>) -> Double {
            let last = min(seconds.upperBound, (arrivals.keys.max() ?? 0) + 1)
            guard last - seconds.lowerBound >= Self.peakWindow else { return 0 }
            let busiest =
                (seconds.lowerBound...(last - Self.peakWindow)).map { start in
                    (start..<start + Self.peakWindow).reduce(0) { $0 + (arrivals[$1] ?? 0) }
                }.max() ?? 0
            return Double(busiest) / (Double(Self.peakWindow) * capacity)
        }

        /// The peak load in the first minute.
        package var peakInFirstMinute: Double { peak(in: 0..<60) }

        /// The peak load after the first minute.
        package var peakRatio: Double { peak(in: 60..<Int.max) }

        /// The peak load after the first tenth of the ideal time (or the
        /// first minute, when that is later).
        package var peakAfterFirstTenth: Double {
            peak(in: max(60, Int((ideal / .seconds(1)) / 10))..<Int.max)
        }

        /// The time to publish every post over the ideal time; infinite when
        /// some were not published.
        package var timeRatio: Double {
            published.map { $0 / ideal } ?? .infinity
        }

        /// Rejected requests per useful one.
        package var rejectedRatio: Double { Double(rejected) / Double(max(useful, 1)) }

        /// Rejected requests per phone.
        package var rejectedPerPhone: Double { Double(rejected) / Double(max(outboxes, 1)) }

        /// The bytes of rejected requests over those of useful ones.
        package var rejectedBytesRatio: Double { Double(rejectedBytes) / Double(max(usefulBytes, 1)) }

        /// `herd N (server): peak P× capacity, published in T× the ideal
        /// time, R rejected per useful request`.
        package var line: String {
            let time = published == nil ? "not all published" : "published in \(Self.format(timeRatio))× the ideal time"
            return "herd \(outboxes) (\(server)): peak \(Self.format(peakAfterFirstTenth))× capacity, \(time), "
                + "\(Self.format(rejectedRatio)) rejected per useful request"
        }

        /// A figure of the run against its goal.
        package struct Goal: Sendable {
            /// What it measures, as the note's table names it.
            package var name: String
            package var value: Double
            /// The most it may be.
            package var limit: Double

            package var isMet: Bool { value <= limit }
        }

        /// The issue's goals for this server (every one at most its limit):
        /// against one `Retry-After` for everyone, the peak after the first
        /// tenth of the ideal time ≤ 2×, every post within 2× the ideal
        /// time, ≤ 1.5 rejected requests per useful one, rejected bytes ≤
        /// 5 % of useful ones; against a slot each, the peak after the
        /// first minute ≤ 1.5×, every post within 1.3× the ideal time,
        /// ≤ 1.5 rejected requests per phone; and in the first minute, at
        /// most one request of a phone toward a held host (sent after the
        /// phone heard it was turned away, before the server took one it
        /// sent after that: its first contact may be turned away, and the
        /// server's word obeyed once).
        package var goals: [Goal] {
            let firstMinute = Goal(
                name: "toward a held host, of one phone, first minute",
                value: Double(mostTowardAHeldHostOfOnePhoneInFirstMinute), limit: 1)
            return switch server {
            case .retryAfter:
                [
                    Goal(name: "peak after the first tenth", value: peakAfterFirstTenth, limit: 2),
                    Goal(name: "last post ÷ ideal", value: timeRatio, limit: 2),
                    Goal(name: "rejected per useful", value: rejectedRatio, limit: 1.5),
                    Goal(name: "rejected bytes ÷ useful", value: rejectedBytesRatio, limit: 0.05), firstMinute,
                ]
            case .slots:
                [
                    Goal(name: "peak after the first minute", value: peakRatio, limit: 1.5),
                    Goal(name: "last post ÷ ideal", value: timeRatio, limit: 1.3),
                    Goal(name: "rejected per phone", value: rejectedPerPhone, limit: 1.5), firstMinute,
                ]
            }
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
        let fileManager = FileManager.default
        try fileManager.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? fileManager.removeItem(at: folder) }
        // Sparse: the server double reads sizes, not bytes.
        let photos = try photoSizes.enumerated().map { number, size in
            let photo = folder.appendingPathComponent("photo-\(number + 1).jpg")
            try Data().write(to: photo)
            let handle = try FileHandle(forWritingTo: photo)
            defer { try? handle.close() }
            try handle.truncate(atOffset: UInt64(size))
            return photo
        }
        let server = ServerDouble(
            queue: queue, configuration: configuration,
            sizes: Dictionary(uniqueKeysWithValues: zip(photos.map(\.lastPathComponent), photoSizes)))
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
                    photos: photos.map {
                        Photo(file: $0, destination: base.appendingPathComponent($0.lastPathComponent))
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

    /// A lone phone back online to an idle server: what the goal of a phone
    /// alone asks of it.
    package struct LonePhone: Sendable {
        /// From the outage's end to the phone's first request.
        package var firstRequest: Duration
        /// From its first request to its post published.
        package var publishing: Duration
        /// The requests' own time, the most `publishing` may take: a
        /// photo's and then the document's, the four photos at once, each
        /// with the round trip of asking the server first (a phone back
        /// online cannot know the server is idle before it asks).
        package var requestsOwnTime: Duration
    }

    /// Runs one outbox, its wake window `wakeWindow` (its default of 10 s,
    /// or zero) and told of the network at once, against a server with
    /// room for 1,000 requests a second; kept in `folder`, which it
    /// empties.
    package static func lonePhone(wakeWindow: Duration, in folder: URL) throws -> LonePhone {
        var configuration = Configuration(outboxes: 1, capacity: 1_000)
        configuration.noticeSpread = .zero
        configuration.recordsRequests = true
        configuration.options = { index in
            var options = Configuration.defaultOptions(index)
            options.networkWakeWindow = wakeWindow
            return options
        }
        let report = try run(configuration, in: folder)
        guard let published = report.published, let first = report.requests.first else {
            throw LonePhoneFailure()
        }
        let firstRequest = Duration.seconds(first.second)
        return LonePhone(
            firstRequest: firstRequest, publishing: published - firstRequest,
            requestsOwnTime: (configuration.serviceTime + configuration.answerTime) * 2)
    }

    /// The lone phone's post was not published within the run's limit.
    package struct LonePhoneFailure: Error {}

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

    /// The server double: `capacity` requests a virtual second (a bucket
    /// of a second's requests, refilled as time goes), `503` past them; no
    /// network at all until ``comeBack()``.
    private final class ServerDouble: Uploader, Sendable {
        private struct State {
            var isOnline = false
            /// Virtual time the network came back.
            var back: Duration = .zero
            /// Requests the server may take now, and when it last counted.
            var tokens = 0.0
            var counted: Duration = .zero
            /// The slot given last, since the network came back.
            var lastSlot: Duration = .zero
            /// The slot of each client given one, since the network came
            /// back, and the clients served until their post is in.
            var slots: [String: Duration] = [:]
            var served: Set<String> = []
            /// Requests per virtual second since then.
            var arrivals: [Int: Int] = [:]
            var rejected = 0
            var rejectedBytes: Int64 = 0
            var useful = 0
            var usefulBytes: Int64 = 0
            /// Rejected requests per phone in the first minute.
            var rejectedInFirstMinute: [String: Int] = [:]
            /// When each phone held back heard its first `503` since the
            /// server last took a request it sent after hearing one.
            var heardTurnedAway: [String: Duration] = [:]
            /// Requests per phone sent toward a held host in the first
            /// minute: after its `503` came, before a request it sent
            /// after that was taken.
            var towardAHeldHostInFirstMinute: [String: Int] = [:]
            /// Requests taken per phone, and every request, when recorded.
            var takenOfPhone: [String: Int] = [:]
            var requests: [Report.Request] = []
            var published = 0
            var lastPublished: Duration?
        }

        private enum Answer {
            case noNetwork, busy(retryAfter: Int), stored
        }

        private let queue: TestQueue
        private let configuration: Configuration
        /// The bytes of each photo, by file name.
        private let sizes: [String: Int]
        private let state = Lock(State())

        init(queue: TestQueue, configuration: Configuration, sizes: [String: Int]) {
            self.queue = queue
            self.configuration = configuration
            self.sizes = sizes
        }

        var publishedCount: Int { state.withLock { $0.published } }

        func comeBack() {
            let now = queue.now
            state.withLock { state in
                state.isOnline = true
                state.back = now
                state.counted = now
                state.tokens = max(1, configuration.capacity)
            }
        }

        /// The bytes `media` carries.
        private func bytes(of media: Media) -> Int64 {
            switch media.content {
            case .bytes(let data): Int64(data.count)
            case .file(let file): Int64(sizes[file.lastPathComponent] ?? 0)
            }
        }

        func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
            answer(media, asksFirst: { false }, continued: {})
        }

        /// Each attempt asks the server first when the outbox says so
        /// (`Expect: 100-continue`), as the module's HTTP uploaders do.
        func upload(
            _ media: Media, attempts: UploadAttempts, progress: @escaping @Sendable (UploadProgress) -> Void
        ) -> Job<UploadReceipt> {
            attempts.retrying(
                answer(
                    media, asksFirst: { attempts.asksFirst(toward: media.destination) },
                    continued: { attempts.continued(toward: media.destination) }),
                for: media)
        }

        /// One request that stores `media`, or is turned away. One that
        /// asks first (`asksFirst`, read as it is sent) is turned away
        /// before its body goes, and waits a round trip more for the
        /// server's `100 Continue` when it is taken, which `continued`
        /// hears as its body starts.
        private func answer(
            _ media: Media, asksFirst: @escaping @Sendable () -> Bool, continued: @escaping @Sendable () -> Void
        ) -> Job<UploadReceipt> {
            Job { [self] controller in
                let now = queue.now
                let asks = asksFirst()
                let bytes = bytes(of: media)
                let destination = media.destination
                let answer = state.withLock { state -> Answer in
                    guard state.isOnline else { return .noNetwork }
                    let since = now - state.back
                    state.arrivals[Int(since / .seconds(1)), default: 0] += 1
                    let capacity = configuration.capacity
                    state.tokens = min(
                        max(1, capacity), state.tokens + capacity * ((now - state.counted) / .seconds(1)))
                    state.counted = now
                    let phone = Self.phone(of: destination)
                    // A slot server serves a client that came at its slot
                    // (or later) until its post is in, room or not.
                    if state.slots[phone].map({ $0 <= since }) == true {
                        state.slots[phone] = nil
                        state.served.insert(phone)
                    }
                    let takes = state.tokens >= 1 || state.served.contains(phone)
                    // Sent after the phone heard its `503`: toward a held
                    // host, which a request taken ends (one sent before
                    // says nothing of the hold the phone knows).
                    let towardAHeldHost = state.heardTurnedAway[phone].map { $0 <= since } ?? false
                    if towardAHeldHost && since < .seconds(60) {
                        state.towardAHeldHostInFirstMinute[phone, default: 0] += 1
                    }
                    if takes {
                        if towardAHeldHost { state.heardTurnedAway[phone] = nil }
                    } else if state.heardTurnedAway[phone] == nil {
                        state.heardTurnedAway[phone] = since + configuration.answerTime
                    }
                    if configuration.recordsRequests {
                        state.requests.append(
                            Report.Request(
                                second: since / .seconds(1), phone: Int(phone) ?? -1,
                                takenBefore: state.takenOfPhone[phone] ?? 0, taken: takes, askedFirst: asks))
                    }
                    guard !takes else {
                        state.tokens -= 1
                        if configuration.recordsRequests { state.takenOfPhone[phone, default: 0] += 1 }
                        return .stored
                    }
                    state.rejected += 1
                    state.rejectedBytes += asks ? 0 : bytes
                    if since < .seconds(60) {
                        state.rejectedInFirstMinute[phone, default: 0] += 1
                    }
                    switch configuration.server {
                    case .retryAfter(let wait):
                        return .busy(retryAfter: Int(wait / .seconds(1)))
                    case .slots:
                        // A client that has a slot still to come (two of
                        // its requests turned away at once) is told it
                        // again: one slot per client.
                        if let slot = state.slots[phone] {
                            return .busy(retryAfter: Int(((slot - since) / .seconds(1)).rounded(.up)))
                        }
                        let post = Double(Herd.requestsPerPost) / capacity
                        state.lastSlot = max(state.lastSlot, since) + .seconds(post)
                        let seconds = Int(((state.lastSlot - since) / .seconds(1)).rounded(.up))
                        state.slots[phone] = since + .seconds(seconds)
                        return .busy(retryAfter: seconds)
                    }
                }
                let delay: Duration
                if case .stored = answer {
                    delay = configuration.serviceTime + (asks ? configuration.answerTime : .zero)
                } else {
                    delay = configuration.answerTime
                }
                let continues =
                    if case .stored = answer, asks { queue.enqueue(after: configuration.answerTime, continued) } else {
                        DelayedWork?.none
                    }
                let timer = queue.enqueue(after: delay) { [self] in
                    switch answer {
                    case .noNetwork:
                        controller.fail(with: UploadError.network(destination, URLError(.notConnectedToInternet)))
                    case .busy(let seconds):
                        let receipt = UploadReceipt(
                            destination: destination, status: 503, headers: ["Retry-After": "\(seconds)"])
                        controller.fail(with: UploadError.httpStatus(receipt))
                    case .stored:
                        let isDocument = destination.pathExtension == "json"
                        let now = queue.now
                        state.withLock { state in
                            state.useful += 1
                            state.usefulBytes += bytes
                            if isDocument {
                                state.served.remove(Self.phone(of: destination))
                                state.published += 1
                                state.lastPublished = now - state.back
                            }
                        }
                        controller.finish(with: UploadReceipt(destination: destination, status: 201))
                    }
                }
                controller.onCancel {
                    timer.cancel()
                    continues?.cancel()
                }
            }
        }

        /// The phone that sends to `destination`: its number, in the path
        /// of its photos (`/7/photo-1.jpg`) and its document's name
        /// (`/posts/7.json`).
        private static func phone(of destination: URL) -> String {
            destination.pathExtension == "json"
                ? destination.deletingPathExtension().lastPathComponent
                : destination.deletingLastPathComponent().lastPathComponent
        }

        func report(outboxes: Int) -> Report {
            state.withLock { state in
                Report(
                    outboxes: outboxes, capacity: configuration.capacity, server: configuration.server,
                    arrivals: state.arrivals,
                    published: state.published == outboxes ? state.lastPublished : nil,
                    publishedCount: state.published, rejected: state.rejected, rejectedBytes: state.rejectedBytes,
                    useful: state.useful, usefulBytes: state.usefulBytes,
                    mostRejectedOfOnePhoneInFirstMinute: state.rejectedInFirstMinute.values.max() ?? 0,
                    mostTowardAHeldHostOfOnePhoneInFirstMinute: state.towardAHeldHostInFirstMinute.values.max() ?? 0,
                    requests: state.requests)
            }
        }
    }
}
