import Foundation
import JobKit
import Testing

@testable import Uploads

/// The outbox's pacer, event by event, without queues or threads: what
/// each request's end decides for its host.
@Suite("Outbox pacer", .timeLimit(.minutes(1)))
struct OutboxPacerTests {
    static let host = OutboxPacer.host(of: URL(string: "https://media.example/photos/1.jpg")!)

    /// Requests queued on a pacer, and the epochs they went in.
    final class Requests: Sendable {
        private let went = Lock<[Int: Int]>([:])

        /// What a queued request `id` calls when it goes.
        func go(_ id: Int) -> @Sendable (Int) -> Void {
            { epoch in self.went.withLock { $0[id] = epoch } }
        }

        var gone: [Int: Int] { went.withLock { $0 } }
    }

    private func pacer(window: Int = 4, pushbackDelay: Duration = .seconds(10)) -> OutboxPacer {
        OutboxPacer(
            options: Outbox.Options(
                publishing: PublishOptions(
                    maxConcurrentUploads: window, retry: RetryPolicy(maximumRetryAfter: .seconds(120))),
                pushbackDelay: pushbackDelay))
    }

    /// Admits `count` requests toward the host; returns how many went at
    /// once.
    private func admit(_ count: Int, to pacer: inout OutboxPacer, _ requests: Requests, from first: Int = 0) -> Int {
        (first..<first + count).count { id in
            if case .now = pacer.admit(Self.host, requests.go(id)) { true } else { false }
        }
    }

    @Test func aHostTakesItsWindowAtOnceAndTheRestInTurn() {
        var pacer = pacer(window: 2)
        let requests = Requests()
        #expect(admit(4, to: &pacer, requests) == 2)
        #expect(pacer.admitsUpload(toward: Self.host, running: 1) && !pacer.admitsUpload(toward: Self.host, running: 2))

        let ended = pacer.ended(Self.host, failure: nil, epoch: 0)
        #expect(ended.requests.count == 1 && ended.hold == nil && ended.opened.isEmpty, "full: it stays at 2")
        for request in ended.requests { request() }
        #expect(requests.gone == [2: 0], "first come, first gone")
    }

    @Test func aPushbackHoldsTheHostHalvesItsWindowAndOldNewsChangesNothing() throws {
        var pacer = pacer(window: 4)
        let requests = Requests()
        #expect(admit(4, to: &pacer, requests) == 4)

        let pushed = pacer.ended(Self.host, failure: .pushback(retryAfter: .seconds(600)), epoch: 0)
        let hold = try #require(pushed.hold)
        #expect(hold.asked == .seconds(120), "capped at maximumRetryAfter")
        #expect(pacer.isHeld(Self.host) && !pacer.admitsUpload(toward: Self.host, running: 0))
        #expect(admit(1, to: &pacer, requests, from: 10) == 0, "held: it waits")
        let armed = pacer.armed(hold, until: DelayedWork {})
        #expect(armed)

        // Sent before the pushback: their success opens nothing.
        #expect(pacer.ended(Self.host, failure: nil, epoch: 0).opened.isEmpty)
        #expect(pacer.ended(Self.host, failure: .pushback(retryAfter: nil), epoch: 0).hold == nil, "held already")

        let released = pacer.holdEnded(hold.key, id: hold.id)
        #expect(released.opened == [Self.host] && released.timers.count == 1)
        for request in released.requests { request() }
        #expect(requests.gone == [10: 1], "goes in the epoch after the pushback")
        #expect(pacer.admitsUpload(toward: Self.host, running: 1) && !pacer.admitsUpload(toward: Self.host, running: 2))

        // A request of the new epoch stored: one more in flight, and a
        // window that opened takes an upload held back.
        #expect(pacer.ended(Self.host, failure: nil, epoch: 1).opened == [Self.host])
        #expect(pacer.admitsUpload(toward: Self.host, running: 2))
        #expect(pacer.holdEnded(hold.key, id: hold.id).opened.isEmpty, "a hold ends once")
    }

    @Test func transientFailuresInARowHoldUntilTheNetworkChangesAndAnAnswerEndsTheRun() throws {
        var pacer = pacer(window: 4)
        let requests = Requests()
        _ = admit(8, to: &pacer, requests)
        for _ in 1..<OutboxPacer.transientRunLimit {
            #expect(pacer.ended(Self.host, failure: .transient, epoch: 0).hold == nil)
        }
        #expect(pacer.ended(Self.host, failure: .permanent, epoch: 0).hold == nil, "a 404 is no load")
        for _ in 1..<OutboxPacer.transientRunLimit {
            #expect(pacer.ended(Self.host, failure: .transient, epoch: 0).hold == nil)
        }
        let hold = try #require(pacer.ended(Self.host, failure: .transient, epoch: 0).hold)
        #expect(hold.asked == .zero && pacer.isHeld(Self.host))

        let changed = pacer.networkChanged()
        #expect(changed.opened == [Self.host] && !pacer.isHeld(Self.host), "maybe the phone's network")

        var server = self.pacer(window: 4)
        _ = admit(1, to: &server, requests, from: 20)
        _ = server.ended(Self.host, failure: .pushback(retryAfter: .seconds(5)), epoch: 0)
        #expect(server.networkChanged().opened.isEmpty && server.isHeld(Self.host), "the server's answer holds")
    }

    @Test func aFailureOfThePhonesNetworkLetsOneRequestProbe() {
        var pacer = pacer(window: 4)
        let requests = Requests()
        _ = admit(2, to: &pacer, requests)
        let offline = pacer.ended(Self.host, failure: .offline, epoch: 0)
        #expect(offline.hold == nil && !pacer.isHeld(Self.host))
        #expect(pacer.admitsUpload(toward: Self.host, running: 0) && !pacer.admitsUpload(toward: Self.host, running: 1))
        #expect(pacer.ended(Self.host, failure: .cancelled, epoch: 0).opened.isEmpty, "a cancellation says nothing")
    }

    @Test func withoutAPushbackDelayOnlyARetryAfterHolds() {
        var pacer = pacer(window: 4, pushbackDelay: .zero)
        let requests = Requests()
        _ = admit(2, to: &pacer, requests)
        #expect(pacer.ended(Self.host, failure: .pushback(retryAfter: nil), epoch: 0).hold == nil)
        #expect(!pacer.isHeld(Self.host) && !pacer.admitsUpload(toward: Self.host, running: 2), "halved all the same")
        #expect(pacer.ended(Self.host, failure: .pushback(retryAfter: .seconds(1)), epoch: 1).hold != nil)
    }

    @Test func aWithdrawnRequestNeverGoesAndLetsTheNextOneGo() {
        var pacer = pacer(window: 1)
        let requests = Requests()
        _ = admit(1, to: &pacer, requests)
        guard case .queued(let ticket) = pacer.admit(Self.host, requests.go(1)) else {
            Issue.record("the window is full")
            return
        }
        _ = pacer.admit(Self.host, requests.go(2))
        #expect(pacer.withdraw(Self.host, ticket: ticket).requests.isEmpty, "still full")
        for request in pacer.ended(Self.host, failure: nil, epoch: 0).requests { request() }
        #expect(requests.gone == [2: 0])
    }

    @Test func aClosedPacerAdmitsNothingAndCancelsItsHolds() throws {
        var pacer = pacer(window: 2)
        let requests = Requests()
        _ = admit(3, to: &pacer, requests)
        let hold = try #require(pacer.ended(Self.host, failure: .pushback(retryAfter: .seconds(5)), epoch: 0).hold)
        let armed = pacer.armed(hold, until: DelayedWork {})
        #expect(armed)
        #expect(pacer.close().timers.count == 1)
        #expect(pacer.admit(Self.host, requests.go(9)) == .closed)
        let late = pacer.armed(hold, until: DelayedWork {})
        #expect(!late, "too late to arm")
        #expect(pacer.holdEnded(hold.key, id: hold.id).requests.isEmpty)
        #expect(pacer.ended(Self.host, failure: .pushback(retryAfter: .seconds(5)), epoch: 1).hold == nil)
        #expect(requests.gone.isEmpty)
    }
}
