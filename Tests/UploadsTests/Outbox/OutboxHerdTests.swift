import Foundation
import TestSupport
import Testing
import Uploads
import UploadsTesting

/// The herd test: outboxes back online at once, on one `TestQueue`, against
/// a server of fixed capacity that answers `503` past it, with `Retry-After:
/// 5` or a slot of each client's own (`Herd`). The Benchmarks' `herd` case
/// runs them with 1,000 and 10,000 outboxes, backlogs of 5, 25 and 60
/// minutes.
///
/// A herd is seconds of work for one thread (some 40 in all, in a debug
/// build): its tests run one at a time, each on a thread of its own, never
/// on one of Swift's cooperative threads, which the suite's other tests
/// run on (two herds at once held both of a machine of two cores, and
/// starved some thirty tests past their time limits); and their limit
/// allows a busy machine, as the herd runs in virtual time and cannot hang.
@Suite("Outbox herd", .serialized, .onThreadOfItsOwn, .timeLimit(.minutes(3)))
struct OutboxHerdTests {
    @Test func fiveHundredOutboxesBackOnlineAtOnceKeepTheServerNearItsCapacity() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("UploadsTests-herd-\(UUID())")
        let report = try Herd.run(Herd.Configuration(outboxes: 500, drainingIn: 5), in: folder)
        #expect(report.publishedCount == 500)
        #expect(report.useful == 500 * Herd.requestsPerPost, "every medium and document stored once")
        #expect(report.peakRatio <= 2, "peak load after the first minute: \(report.line)")
        // In the first minute, the wake window spreads the outboxes' first
        // tries, one request each: 500 over some 12 s, some 42 a second
        // against a capacity of 8; the server's 5 s later, most try again.
        #expect(report.peakInFirstMinute <= 12, "the busiest 10 s of the first minute: \(report.peakInFirstMinute)")
        #expect(report.timeRatio <= 2.5, "time to publish every post: \(report.line)")
        // Issue 56's goal: a few phones turned away late wait past it.
        // Shorter holds would bring them in sooner, and keep a long
        // backlog's server busier (a test below; the Benchmarks README,
        // case 19).
        withKnownIssue("issue 56: the last post of a 5-minute backlog waits past 2× its ideal time (2.38×)") {
            #expect(report.timeRatio <= 2, "time to publish every post: \(report.line)")
        }
        #expect(report.rejectedRatio <= 1, "rejected requests per useful one: \(report.line)")
        // Issue 56's goal: rejected bytes at most 5 % of useful ones. After
        // a pushback, or after the network came back, a phone's requests
        // ask the server first (`Expect: 100-continue`), and one turned
        // away sends no body: 0.008. Before, the smallest went first, and
        // 0.57 were turned away; in the post's order, 0.82.
        #expect(report.rejectedBytesRatio <= 0.05, "rejected bytes per useful one: \(report.rejectedBytesRatio)")
        // Issue 56's goal: in the first minute, at most one request of a
        // phone toward a held host. Its first contact is turned away, it
        // obeys the server's 5 s, and turned away again it holds a minute
        // at least. When the least hold was 24 s, 61 of the 500 phones
        // sent two.
        let towardAHeldHost = report.mostTowardAHeldHostOfOnePhoneInFirstMinute
        #expect(towardAHeldHost == 1, "requests of one phone toward a held host, first minute: \(towardAHeldHost)")
        #expect(!FileManager.default.fileExists(atPath: folder.path))
    }

    /// Issue 56's goal for a phone alone: back online to an idle server,
    /// it publishes within its wake window and the requests' own time. Its
    /// probe asks first; the server's `100 Continue` opens its window as it
    /// was, and the other three photos go at once. When the window opened
    /// only as each request was stored, it took 2.1 s, not 1.1 s.
    @Test(arguments: [Duration.zero, .seconds(10)])
    func aLonePhoneBackOnlinePublishesInItsRequestsOwnTime(wakeWindow: Duration) throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("UploadsTests-herd-\(UUID())")
        let phone = try Herd.lonePhone(wakeWindow: wakeWindow, in: folder)
        #expect(phone.firstRequest <= wakeWindow, "its first request, after the network came back")
        #expect(phone.requestsOwnTime == .milliseconds(1_100))
        #expect(phone.publishing <= phone.requestsOwnTime, "published after its first request")
    }

    /// A server that hands each client it turns away a slot of its own
    /// (and serves it when it comes) is obeyed: the backlog drains near the
    /// time it takes at capacity, each phone turned away about once.
    @Test func aServerThatHandsOutSlotsIsObeyed() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("UploadsTests-herd-\(UUID())")
        var configuration = Herd.Configuration(outboxes: 300, drainingIn: 25)
        configuration.server = .slots
        let report = try Herd.run(configuration, in: folder)
        #expect(report.publishedCount == 300 && report.useful == 300 * Herd.requestsPerPost)
        #expect(report.timeRatio <= 1.3, "\(report.line)")
        // Issue 56's goal: the busiest 10 s after the first minute at most
        // 1.5× the capacity. Each hold ends within the second its slot
        // names (1.40× here): when the policy's wait came on top, and the
        // hold took up to a fifth more, chance bunched phones the server had
        // spread, 3.90×.
        #expect(report.peakRatio <= 1.5, "peak load after the first minute: \(report.line)")
        #expect(report.rejectedPerPhone <= 1.5, "rejected per phone: \(report.rejectedPerPhone)")
        // Turned away, mostly at its first request after the network came
        // back, which asks first: no body goes (0.11 of the bytes stored
        // did when that request was its smallest photo, sent whole; 0.31
        // in the post's order).
        #expect(report.rejectedBytesRatio <= 0.01, "rejected bytes per useful one: \(report.rejectedBytesRatio)")
        // Issue 56's goal: in the first minute, one request of a phone
        // toward a held host at most, the one at its slot, which is served.
        #expect(report.mostTowardAHeldHostOfOnePhoneInFirstMinute == 1)
    }

    /// Asked to, the server double lists every request it saw, and the
    /// list agrees with its counts: what a study of a herd's requests
    /// (`Benchmarks --case herd --herd-requests DIR`) reads is what the
    /// figures were made of.
    @Test func theServerListsEveryRequestItSawWhenAsked() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("UploadsTests-herd-\(UUID())")
        var configuration = Herd.Configuration(outboxes: 40, drainingIn: 1)
        configuration.recordsRequests = true
        let report = try Herd.run(configuration, in: folder)
        let requests = report.requests
        #expect(report.publishedCount == 40)
        #expect(requests.count == report.rejected + report.useful)
        #expect(requests.filter(\.taken).count == report.useful)
        #expect(requests.map(\.second) == requests.map(\.second).sorted(), "in the order the server saw them")
        let arrivals = Dictionary(grouping: requests) { Int($0.second) }.mapValues(\.count)
        #expect(arrivals == report.arrivals)
        let firstMinute = Dictionary(grouping: requests.filter { !$0.taken && $0.second < 60 }, by: \.phone)
        #expect(firstMinute.values.map(\.count).max() ?? 0 == report.mostRejectedOfOnePhoneInFirstMinute)
        // A request toward a held host: one that came after the phone heard
        // a request of its turned away, before the server took another it
        // sent after it heard.
        var heard: [Int: Double] = [:]
        var towardAHeldHost: [Int: Int] = [:]
        for request in requests {
            if request.second < 60, let moment = heard[request.phone], moment <= request.second {
                towardAHeldHost[request.phone, default: 0] += 1
            }
            if request.taken {
                if let moment = heard[request.phone], moment <= request.second { heard[request.phone] = nil }
            } else if heard[request.phone] == nil {
                heard[request.phone] = request.second + configuration.answerTime / .seconds(1)
            }
        }
        #expect(towardAHeldHost.values.max() ?? 0 == report.mostTowardAHeldHostOfOnePhoneInFirstMinute)
        #expect(report.mostTowardAHeldHostOfOnePhoneInFirstMinute >= 1, "a herd that holds phones back")
        // Each phone's requests count up what it had taken, to its post.
        for (phone, sent) in Dictionary(grouping: requests, by: \.phone) {
            var taken = 0
            for request in sent {
                #expect(request.takenBefore == taken, "phone \(phone)")
                if request.taken { taken += 1 }
            }
            #expect(taken == Herd.requestsPerPost, "phone \(phone)")
        }
        #expect(Set(requests.map(\.phone)) == Set(0..<40))
        #expect(report.requestsCSV.hasPrefix("second,phone,taken_before,answer,asked_first\n"))
        #expect(report.requestsCSV.split(separator: "\n").count == requests.count + 1)

        configuration.recordsRequests = false
        let unrecorded = try Herd.run(configuration, in: folder)
        #expect(unrecorded.requests.isEmpty && unrecorded.rejected + unrecorded.useful == requests.count)
    }

    /// A phone knows of a backlog only what the server answers it: while
    /// two servers answer it alike, it sends at the same moments in a
    /// backlog of five minutes and in one of an hour. So its holds cannot
    /// be the short ones a short backlog wants and the long ones a long
    /// one wants at once: against `Retry-After: 5`, issue 56's goal for the
    /// last post (a short backlog's) and its goals for the load (a long
    /// one's) pull against each other, as the Benchmarks README measures
    /// (case 19).
    @Test func aPhoneAnsweredAlikeSendsAtTheSameMomentsWhateverTheBacklog() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("UploadsTests-herd-\(UUID())")
        var short = Herd.Configuration(outboxes: 50, drainingIn: 5)
        short.recordsRequests = true
        var long = Herd.Configuration(outboxes: 50, drainingIn: 60)
        long.recordsRequests = true
        let inShort = Dictionary(grouping: try Herd.run(short, in: folder).requests, by: \.phone)
        let inLong = Dictionary(grouping: try Herd.run(long, in: folder).requests, by: \.phone)
        var turnedAwayInBoth = 0
        var takenInBoth = 0
        for phone in 0..<short.outboxes {
            let shortRequests = inShort[phone] ?? [], longRequests = inLong[phone] ?? []
            // Up to the first request the two servers answered otherwise,
            // that one included: until then, it had heard the same.
            var alike = 0
            while alike < min(shortRequests.count, longRequests.count),
                shortRequests[alike].taken == longRequests[alike].taken
            {
                if shortRequests[alike].taken { takenInBoth += 1 } else { turnedAwayInBoth += 1 }
                alike += 1
            }
            let compared = min(alike + 1, shortRequests.count, longRequests.count)
            #expect(
                shortRequests.prefix(compared).map(\.second) == longRequests.prefix(compared).map(\.second),
                "phone \(phone): answered alike, it sent at other moments")
        }
        // More than first requests: 114 requests were turned away by both
        // servers, and 11 taken by both, before the two answered otherwise.
        #expect(turnedAwayInBoth >= 90, "requests turned away in both backlogs: \(turnedAwayInBoth)")
        #expect(takenInBoth >= 5, "requests taken in both backlogs: \(takenInBoth)")
    }

    /// A herd with every wait in step (each jitter drawn at its ceiling, no
    /// wake window, no pushback delay) misses the goals: the first test
    /// measures something. Smaller, as in-step requests are many; stopped
    /// after 20 virtual minutes.
    @Test func theSameHerdWithItsWaitsInStepMissesTheGoals() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("UploadsTests-herd-\(UUID())")
        var configuration = Herd.Configuration(outboxes: 200, drainingIn: 5)
        configuration.options = { _ in
            Outbox.Options(
                publishing: PublishOptions(retry: RetryPolicy(random: AtTheCeiling())), networkWakeWindow: .zero,
                pushbackDelay: .zero)
        }
        configuration.limit = .seconds(20 * 60)
        let report = try Herd.run(configuration, in: folder)
        #expect(report.peakRatio > 2, "\(report.line)")
        #expect(report.rejectedRatio > 1, "\(report.line)")
        // Its last post is not what it misses: 1.99× D (2.11× before its
        // requests asked first, which moves each stored one by a round
        // trip), about the time of the herd above. The server pays for it:
        // 11× its capacity, 9 requests turned away for each one stored.
        #expect(report.publishedCount > 0, "\(report.line)")
    }
}
