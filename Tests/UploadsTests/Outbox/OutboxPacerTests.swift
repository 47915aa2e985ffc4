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
        #expect(hold.asked == .seconds(600), "an hour at most, by default")
        #expect(pacer.isHeld(Self.host) && !pacer.admitsUpload(toward: Self.host, running: 0))
        #expect(admit(1, to: &pacer, requests, from: 10) == 0, "held: it waits")
        let armed = pacer.armed(hold, lasting: .seconds(5), until: DelayedWork {})
        #expect(armed)

        // Sent before the pushback: their success opens nothing.
        #expect(pacer.ended(Self.host, failure: nil, epoch: 0).opened.isEmpty)
        #expect(pacer.ended(Self.host, failure: .pushback(retryAfter: nil), epoch: 0).hold == nil, "held already")

        let released = pacer.holdEnded(hold.key, id: hold.id)
        #expect(released.opened == [Self.host] && released.timers.count == 1)
        #expect(released.requests.isEmpty, "probed: one request at a time, and one is still in flight")
        let last = pacer.ended(Self.host, failure: nil, epoch: 0)
        #expect(last.opened.isEmpty)
        for request in last.requests { request() }
        #expect(requests.gone == [10: 1], "goes in the epoch after the pushback")
        #expect(admit(1, to: &pacer, requests, from: 11) == 0, "one request at a time while probed")
        #expect(pacer.admitsUpload(toward: Self.host, running: 1) && !pacer.admitsUpload(toward: Self.host, running: 2))

        // The probe of the new epoch stored: the window, halved to 2, opens
        // by one, lets the request that waited go, and takes uploads held
        // back.
        let stored = pacer.ended(Self.host, failure: nil, epoch: 1)
        #expect(stored.opened == [Self.host] && stored.requests.count == 1)
        #expect(pacer.admitsUpload(toward: Self.host, running: 2) && !pacer.admitsUpload(toward: Self.host, running: 3))
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

    /// A failure of the phone's network said nothing of the server: once
    /// the server lets the probe send its body (its `100 Continue`), the
    /// window is what it was, and the requests still ask first until one
    /// is stored. A pushback's probe waits for a request stored.
    @Test func aProbeTheServerLetsSendItsBodyAfterANetworkFailureOpensTheWindowAsItWas() throws {
        var pacer = pacer(window: 4)
        let requests = Requests()
        _ = admit(1, to: &pacer, requests)
        _ = pacer.ended(Self.host, failure: .offline, epoch: 0)
        #expect(admit(4, to: &pacer, requests, from: 1) == 1, "the probe alone")
        #expect(pacer.continued("https://elsewhere.example").requests.isEmpty, "another host: nothing")
        let continued = pacer.continued(Self.host)
        for request in continued.requests { request() }
        #expect(continued.opened == [Self.host] && !pacer.isProbed(Self.host))
        #expect(requests.gone == [2: 0, 3: 0, 4: 0], "the three others go at once")
        #expect(pacer.admitsUpload(toward: Self.host, running: 3) && !pacer.admitsUpload(toward: Self.host, running: 4))
        #expect(pacer.asksFirst(Self.host), "nothing stored yet")
        #expect(pacer.continued(Self.host).requests.isEmpty, "once")
        _ = pacer.ended(Self.host, failure: nil, epoch: 0)
        #expect(!pacer.asksFirst(Self.host), "one stored, in a full window")

        // Without a `100 Continue` (a request without a body), the probe
        // stored opens it as it was.
        var unheard = self.pacer(window: 4)
        _ = admit(1, to: &unheard, requests, from: 10)
        _ = unheard.ended(Self.host, failure: .offline, epoch: 0)
        #expect(admit(4, to: &unheard, requests, from: 11) == 1)
        let stored = unheard.ended(Self.host, failure: nil, epoch: 0)
        #expect(stored.requests.count == 3 && stored.opened == [Self.host] && !unheard.asksFirst(Self.host))

        // After a pushback, only a request stored ends the probe.
        let hold = try #require(pacer.ended(Self.host, failure: .pushback(retryAfter: nil), epoch: 0).hold)
        _ = pacer.holdEnded(hold.key, id: hold.id)
        #expect(pacer.continued(Self.host).requests.isEmpty && pacer.isProbed(Self.host))
        // A network failure after it opens again to the halved window.
        _ = pacer.ended(Self.host, failure: .offline, epoch: 1)
        _ = pacer.ended(Self.host, failure: nil, epoch: 1)
        #expect(!pacer.admitsUpload(toward: Self.host, running: 2), "halved to 2, then 1 offline, then 2 stored")
    }

    @Test func aProbedHostTakesItsSmallestWaitingRequestOneAtATimeUntilOneIsTaken() throws {
        var pacer = pacer(window: 4)
        let requests = Requests()
        #expect(admit(1, to: &pacer, requests) == 1)
        let hold = try #require(pacer.ended(Self.host, failure: .pushback(retryAfter: nil), epoch: 0).hold)
        #expect(pacer.isProbed(Self.host))
        // Queued while held: a part of 4 MB, a `HEAD`, a photo of 1 MB.
        for (id, bytes) in [(1, Int64(4_000_000)), (2, 0), (3, 1_000_000)] {
            #expect(pacer.admit(Self.host, bytes: bytes, requests.go(id)) == .queued(ticket: id - 1))
        }
        let released = pacer.holdEnded(hold.key, id: hold.id)
        for request in released.requests { request() }
        #expect(requests.gone == [2: 1], "the smallest first, alone")

        // A transient failure (a 500) ends no probe: the next smallest
        // goes.
        for request in pacer.ended(Self.host, failure: .transient, epoch: 1).requests { request() }
        #expect(requests.gone == [2: 1, 3: 1])
        let taken = pacer.ended(Self.host, failure: nil, epoch: 1)
        for request in taken.requests { request() }
        #expect(
            requests.gone == [2: 1, 3: 1, 1: 1] && taken.opened == [Self.host],
            "taken: the window, halved to 2, opens to 3")
        #expect(!pacer.isProbed(Self.host))
        #expect(admit(2, to: &pacer, requests, from: 4) == 2, "in turn again, up to the window")
    }

    @Test func aHostIsProbedAfterANetworkFailureOrARelaunchInItsStreakUntilItTakesARequest() {
        var pacer = pacer(window: 4)
        let requests = Requests()
        _ = admit(2, to: &pacer, requests)
        _ = pacer.ended(Self.host, failure: .offline, epoch: 0)
        #expect(pacer.isProbed(Self.host) && pacer.probesSomeHost)
        _ = pacer.ended(Self.host, failure: .permanent, epoch: 0)
        #expect(pacer.isProbed(Self.host), "a 404 (or a file gone) takes nothing")
        #expect(admit(1, to: &pacer, requests, from: 2) == 1)
        _ = pacer.ended(Self.host, failure: nil, epoch: 0)
        #expect(!pacer.isProbed(Self.host) && !pacer.probesSomeHost, "a request taken ends it")

        var relaunched = self.pacer(window: 4)
        relaunched.resume([Self.host: OutboxPacer.Streak(pushbacks: 1, held: .seconds(5))])
        #expect(relaunched.isProbed(Self.host))
        #expect(admit(1, to: &relaunched, requests, from: 10) == 1)
        _ = relaunched.ended(Self.host, failure: .cancelled, epoch: 0)
        #expect(relaunched.isProbed(Self.host), "a cancellation says nothing")
    }

    @Test func withoutAPushbackDelayOnlyARetryAfterHolds() {
        var pacer = pacer(window: 4, pushbackDelay: .zero)
        let requests = Requests()
        _ = admit(2, to: &pacer, requests)
        #expect(pacer.ended(Self.host, failure: .pushback(retryAfter: nil), epoch: 0).hold == nil)
        #expect(!pacer.isHeld(Self.host) && !pacer.admitsUpload(toward: Self.host, running: 2), "halved all the same")
        #expect(pacer.ended(Self.host, failure: .pushback(retryAfter: .seconds(1)), epoch: 1).hold != nil)
    }

    // MARK: - Holds that learn

    /// Lets the host's hold end, and one request go in the epoch after it.
    private func release(_ hold: OutboxPacer.Hold, _ pacer: inout OutboxPacer, _ requests: Requests, id: Int) {
        _ = pacer.holdEnded(hold.key, id: hold.id)
        #expect(admit(1, to: &pacer, requests, from: id) == 1)
    }

    @Test func pushbacksInARowMakeAStreakThatCountsItsHoldsAndEndsAGraceAfterItsWindowIsFull() throws {
        typealias Streak = OutboxPacer.Streak
        var pacer = pacer(window: 2)
        let requests = Requests()
        _ = admit(1, to: &pacer, requests)
        let first = pacer.ended(Self.host, failure: .pushback(retryAfter: .seconds(5)), epoch: 0)
        let hold = try #require(first.hold)
        #expect(hold.streak == Streak(pushbacks: 1, held: .zero) && !first.streaksChanged, "kept once armed")
        let armed = pacer.armed(hold, lasting: .seconds(7), until: DelayedWork {})
        #expect(armed && pacer.streaks == [Self.host: Streak(pushbacks: 1, held: .seconds(7))])

        release(hold, &pacer, requests, id: 1)
        let pushed = try #require(pacer.ended(Self.host, failure: .pushback(retryAfter: nil), epoch: 1).hold)
        #expect(pushed.streak == Streak(pushbacks: 2, held: .seconds(7)))
        _ = pacer.armed(pushed, lasting: .seconds(20), until: DelayedWork {})
        #expect(pacer.streaks[Self.host] == Streak(pushbacks: 2, held: .seconds(27)))

        release(pushed, &pacer, requests, id: 2)
        let stored = pacer.ended(Self.host, failure: nil, epoch: 2)
        let end = try #require(stored.streakEnd, "the window is full again: the streak ends after a grace")
        #expect(!stored.streaksChanged && pacer.streaks[Self.host]?.pushbacks == 2)
        let graceArmed = pacer.armed(end, until: DelayedWork {})
        #expect(graceArmed)
        _ = admit(1, to: &pacer, requests, from: 3)
        #expect(pacer.ended(Self.host, failure: nil, epoch: 2).streakEnd == nil, "one end at a time")
        let over = pacer.streakEnded(end)
        #expect(over.streaksChanged && pacer.streaks.isEmpty, "the grace is over: so is the backlog")
        let again = pacer.streakEnded(end)
        #expect(!again.streaksChanged, "once")
        _ = admit(1, to: &pacer, requests, from: 4)
        #expect(!pacer.ended(Self.host, failure: nil, epoch: 2).streaksChanged, "no streak, nothing to keep")
    }

    @Test func aStreakTheJournalKeptGoesOnAndAnAnswerSentBeforeTheLastPushbackEndsNothing() throws {
        typealias Streak = OutboxPacer.Streak
        var pacer = pacer(window: 4)
        pacer.resume([Self.host: Streak(pushbacks: 3, held: .seconds(600))])
        let requests = Requests()
        #expect(admit(2, to: &pacer, requests) == 1, "it was pushing back: one request goes first")
        _ = pacer.ended(Self.host, failure: nil, epoch: 0)
        #expect(pacer.streaks[Self.host]?.pushbacks == 3, "taken, but the window is not full yet")
        _ = admit(1, to: &pacer, requests, from: 2)
        let hold = try #require(pacer.ended(Self.host, failure: .pushback(retryAfter: .seconds(5)), epoch: 0).hold)
        #expect(hold.streak == Streak(pushbacks: 4, held: .seconds(600)) && !hold.isSlot)
        #expect(!pacer.admitsUpload(toward: Self.host, running: 0), "held")
        let old = pacer.ended(Self.host, failure: nil, epoch: 0)
        #expect(!old.streaksChanged && pacer.streaks[Self.host]?.pushbacks == 4, "sent before the pushback: old news")
    }

    @Test func aStreakOutlivesASuccessUntilTheWindowIsFullAgainAndItsGraceIsOver() throws {
        var pacer = pacer(window: 4)
        let requests = Requests()
        _ = admit(1, to: &pacer, requests)
        let hold = try #require(pacer.ended(Self.host, failure: .pushback(retryAfter: nil), epoch: 0).hold)
        _ = pacer.armed(hold, lasting: .seconds(30), until: DelayedWork {})
        _ = pacer.holdEnded(hold.key, id: hold.id)
        #expect(admit(2, to: &pacer, requests, from: 1) == 1, "probed: one request")
        let once = pacer.ended(Self.host, failure: nil, epoch: 1)
        #expect(once.requests.count == 1, "the window, halved to 2, opens to 3")
        #expect(!once.streaksChanged && pacer.streaks[Self.host]?.pushbacks == 1, "3 of 4: still in the backlog")
        #expect(once.streakEnd == nil)
        let full = pacer.ended(Self.host, failure: nil, epoch: 1)
        let end = try #require(full.streakEnd, "4 of 4: the grace starts")
        #expect(!full.streaksChanged && pacer.streaks[Self.host]?.pushbacks == 1)
        let over = pacer.streakEnded(end)
        #expect(over.streaksChanged && pacer.streaks.isEmpty, "its grace over")

        // With no pushback delay, there is no grace: the streak ends with
        // the full window, as the server's word alone holds the outbox.
        var wordOnly = self.pacer(window: 1, pushbackDelay: .zero)
        _ = admit(1, to: &wordOnly, requests, from: 10)
        let slot = try #require(wordOnly.ended(Self.host, failure: .pushback(retryAfter: .seconds(5)), epoch: 0).hold)
        release(slot, &wordOnly, requests, id: 11)
        let taken = wordOnly.ended(Self.host, failure: nil, epoch: 1)
        #expect(taken.streakEnd == nil && taken.streaksChanged && wordOnly.streaks.isEmpty)
    }

    /// A host that takes a window of requests in the middle of a backlog,
    /// then pushes back again, goes on from its streak: the second hold is
    /// drawn, not the server's slot again (a phone of the herd, turned
    /// away at the end of its post, came back a second time in the first
    /// minute when this ended its streak).
    @Test func aPushbackAfterAWindowTakenInTheMiddleOfABacklogGoesOnFromItsStreak() throws {
        var pacer = pacer(window: 4, pushbackDelay: .seconds(240))
        let requests = Requests()
        _ = admit(1, to: &pacer, requests)
        let slot = try #require(pacer.ended(Self.host, failure: .pushback(retryAfter: .seconds(5)), epoch: 0).hold)
        release(slot, &pacer, requests, id: 1)
        _ = pacer.ended(Self.host, failure: nil, epoch: 1)
        #expect(admit(3, to: &pacer, requests, from: 2) == 3, "the window, halved to 2, opens to 3")
        let ends = (0..<3).compactMap { _ in pacer.ended(Self.host, failure: nil, epoch: 1).streakEnd }
        #expect(!pacer.asksFirst(Self.host) && ends.count == 1, "4 taken: the window is full, its grace starts")
        let cancelled = Lock(0)
        let grace = DelayedWork { cancelled.withLock { $0 += 1 } }
        let graceArmed = pacer.armed(ends[0], until: grace)
        #expect(graceArmed)
        _ = admit(1, to: &pacer, requests, from: 5)
        let pushed = pacer.ended(Self.host, failure: .pushback(retryAfter: .seconds(5)), epoch: 1)
        let again = try #require(pushed.hold)
        #expect(again.streak.pushbacks == 2 && !again.isSlot && !again.breaksSlots, "its slot was kept")
        for timer in pushed.timers { timer.cancel() }
        #expect(pushed.timers.count == 1 && cancelled.withLock { $0 } == 1, "the grace's end is cancelled")
        let late = pacer.streakEnded(ends[0])
        #expect(!late.streaksChanged && pacer.streaks[Self.host]?.pushbacks == 2, "a grace a pushback ended")
        let delay = Outbox.Options(
            publishing: PublishOptions(retry: RetryPolicy(random: AtTheFloor())), pushbackDelay: .seconds(240)
        ).holdDelay(again)
        #expect(delay == .seconds(60), "a minute at least")
        // Closing cancels a grace armed.
        release(again, &pacer, requests, id: 6)
        _ = pacer.ended(Self.host, failure: nil, epoch: 2)
        #expect(admit(1, to: &pacer, requests, from: 7) == 1)
        let last = try #require(pacer.ended(Self.host, failure: nil, epoch: 2).streakEnd, "full again")
        let lastArmed = pacer.armed(last, until: DelayedWork { cancelled.withLock { $0 += 1 } })
        #expect(lastArmed)
        for timer in pacer.close().timers { timer.cancel() }
        #expect(cancelled.withLock { $0 } == 2)
    }

    @Test func requestsAskTheServerFirstFromAPushbackOrANetworkFailureUntilTheWindowIsFull() throws {
        var pacer = pacer(window: 4)
        let requests = Requests()
        #expect(!pacer.asksFirst(Self.host), "a host it never sent to")
        _ = admit(4, to: &pacer, requests)
        #expect(!pacer.asksFirst(Self.host), "a full window")
        let hold = try #require(pacer.ended(Self.host, failure: .pushback(retryAfter: nil), epoch: 0).hold)
        #expect(pacer.asksFirst(Self.host), "held, and probed after")
        _ = pacer.holdEnded(hold.key, id: hold.id)
        for _ in 1..<4 { _ = pacer.ended(Self.host, failure: nil, epoch: 0) }
        #expect(pacer.asksFirst(Self.host), "taken before the pushback: old news")
        #expect(admit(1, to: &pacer, requests, from: 4) == 1)
        _ = pacer.ended(Self.host, failure: nil, epoch: 1)
        #expect(
            !pacer.isProbed(Self.host) && pacer.asksFirst(Self.host), "the probe taken: the window, halved to 2, is 3")
        #expect(admit(1, to: &pacer, requests, from: 5) == 1)
        _ = pacer.ended(Self.host, failure: nil, epoch: 1)
        #expect(!pacer.asksFirst(Self.host), "4 of 4")

        _ = admit(1, to: &pacer, requests, from: 6)
        _ = pacer.ended(Self.host, failure: .offline, epoch: 1)
        #expect(pacer.asksFirst(Self.host), "after a failure of the phone's network")
        var relaunched = self.pacer(window: 4)
        relaunched.resume([Self.host: OutboxPacer.Streak(pushbacks: 1, held: .seconds(5))])
        #expect(relaunched.asksFirst(Self.host), "relaunched in a streak")
    }

    @Test func aServerThatTurnsTheOutboxAwayAfterItsSlotIsNotTakenAtItsWordAgain() throws {
        var pacer = pacer(window: 1)
        let requests = Requests()
        _ = admit(1, to: &pacer, requests)
        let first = try #require(pacer.ended(Self.host, failure: .pushback(retryAfter: .seconds(5)), epoch: 0).hold)
        #expect(first.isSlot)
        _ = pacer.armed(first, lasting: .seconds(5), until: DelayedWork {})
        release(first, &pacer, requests, id: 1)
        let second = try #require(pacer.ended(Self.host, failure: .pushback(retryAfter: .seconds(5)), epoch: 1).hold)
        #expect(!second.isSlot && second.streak.pushbacks == 2)
        _ = pacer.armed(second, lasting: .seconds(50), until: DelayedWork {})
        release(second, &pacer, requests, id: 2)
        let full = try #require(pacer.ended(Self.host, failure: nil, epoch: 2).streakEnd)
        _ = pacer.streakEnded(full)
        #expect(pacer.streaks.isEmpty)
        _ = admit(1, to: &pacer, requests, from: 3)
        let next = try #require(pacer.ended(Self.host, failure: .pushback(retryAfter: .seconds(5)), epoch: 2).hold)
        #expect(next.streak.pushbacks == 1 && !next.isSlot, "a new streak; the same server")

        // A second pushback without a Retry-After breaks the slot too; one
        // after a hold that was no slot breaks nothing.
        var quiet = self.pacer(window: 1)
        _ = admit(1, to: &quiet, requests, from: 10)
        let slot = try #require(quiet.ended(Self.host, failure: .pushback(retryAfter: .seconds(5)), epoch: 0).hold)
        release(slot, &quiet, requests, id: 11)
        let drawn = try #require(quiet.ended(Self.host, failure: .pushback(retryAfter: nil), epoch: 1).hold)
        #expect(drawn.breaksSlots)
        var plain = self.pacer(window: 1)
        _ = admit(1, to: &plain, requests, from: 20)
        let unnamed = try #require(plain.ended(Self.host, failure: .pushback(retryAfter: nil), epoch: 0).hold)
        release(unnamed, &plain, requests, id: 21)
        let then = try #require(plain.ended(Self.host, failure: .pushback(retryAfter: .seconds(5)), epoch: 1).hold)
        #expect(!then.breaksSlots && !then.isSlot, "the second of a streak draws; the server is not blamed")
    }

    @Test func aClosedPacerKeepsNoStreak() throws {
        var pacer = pacer(window: 1)
        let requests = Requests()
        _ = admit(1, to: &pacer, requests)
        _ = pacer.close()
        let ended = pacer.ended(Self.host, failure: .pushback(retryAfter: .seconds(5)), epoch: 0)
        #expect(ended.hold == nil && !ended.streaksChanged && pacer.streaks.isEmpty)
    }

    @Test func aHoldObeysTheFirstRetryAfterAndThenDrawsBelowACeilingThatGrowsWithTheStreak() {
        typealias Streak = OutboxPacer.Streak
        func delay(_ streak: Streak, asked: Duration, _ random: some RandomNumberGenerator & Sendable) -> Duration {
            Outbox.Options(
                publishing: PublishOptions(retry: RetryPolicy(random: random)), pushbackDelay: .seconds(240),
                maxPushbackDelay: .seconds(3600), maxRetryAfter: .seconds(3600)
            )
            .holdDelay(OutboxPacer.Hold(key: Self.host, asked: asked, streak: streak, id: 1))
        }
        /// Whether `duration` is `expected` seconds, give or take rounding.
        func seconds(_ duration: Duration, _ expected: Double) -> Bool {
            abs(duration / .seconds(1) - expected) < 1e-9
        }
        let first = Streak(pushbacks: 1, held: .zero)
        // The server's slot, ending within the second it names.
        let slotJitter = Outbox.Options.slotJitter / .seconds(1)
        #expect(seconds(delay(first, asked: .seconds(100), AtTheFloor()), 100))
        #expect(seconds(delay(first, asked: .seconds(100), Halfway()), 100 + slotJitter / 2))
        #expect(seconds(delay(first, asked: .seconds(3000), Halfway()), 3000 + slotJitter / 2), "not a fifth more")
        // Without one: drawn between a quarter of the pushback delay and
        // it, a minute at least.
        let least = 240 * Outbox.Options.leastHoldShare
        #expect(least == 60)
        #expect(seconds(delay(first, asked: .zero, AtTheFloor()), least))
        #expect(seconds(delay(first, asked: .zero, Halfway()), least + (240 - least) / 2))
        // The slot did not hold: the ceiling is the pushback delay until the
        // streak's holds make it longer, and the longer of the two counts.
        let second = Streak(pushbacks: 2, held: .seconds(60))
        #expect(seconds(delay(second, asked: .seconds(5), AtTheFloor()), least))
        #expect(seconds(delay(second, asked: .seconds(5), Halfway()), least + (240 - least) / 2))
        #expect(seconds(delay(second, asked: .seconds(100), AtTheFloor()), 100))
        // A Retry-After that is no slot gets up to a fifth more.
        let jitter = Outbox.Options.retryAfterJitter
        #expect(seconds(delay(second, asked: .seconds(300), Halfway()), 300 * (1 + jitter / 2)))
        // A first pushback of a server that broke its slot before.
        let broken = Outbox.Options(publishing: PublishOptions(retry: RetryPolicy(random: AtTheFloor())))
            .holdDelay(OutboxPacer.Hold(key: Self.host, asked: .seconds(5), streak: first, breaksSlots: true, id: 1))
        #expect(seconds(broken, least))
        // A ceiling of more than ten times that floor: a tenth of it.
        let floor = Outbox.Options.holdFloor
        let long = Streak(pushbacks: 4, held: .seconds(600))
        let ceiling = 600 * Outbox.Options.holdGrowth
        #expect(seconds(delay(long, asked: .seconds(5), AtTheFloor()), ceiling * floor))
        #expect(seconds(delay(long, asked: .seconds(5), Halfway()), ceiling * (floor + (1 - floor) / 2)))
        // The herd benchmark's other growth (`--herd-growth`): a ceiling of
        // three times the time held.
        var faster = Outbox.Options(
            publishing: PublishOptions(retry: RetryPolicy(random: Halfway())), maxPushbackDelay: .seconds(3600))
        faster.holdCeilingGrowth = 3
        let fasterHold = faster.holdDelay(OutboxPacer.Hold(key: Self.host, asked: .seconds(5), streak: long, id: 1))
        #expect(seconds(fasterHold, 1800 * (floor + (1 - floor) / 2)))
        // Never above the longest hold, however long the streak.
        let endless = Streak(pushbacks: 9, held: .seconds(36_000))
        #expect(seconds(delay(endless, asked: .seconds(5), Halfway()), 3600 * (floor + (1 - floor) / 2)))
        // No pushback delay: the server's word alone.
        let wordOnly = Outbox.Options(pushbackDelay: .zero)
            .holdDelay(OutboxPacer.Hold(key: Self.host, asked: .seconds(5), streak: long, id: 1))
        #expect(wordOnly == .seconds(5))
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
        let armed = pacer.armed(hold, lasting: .seconds(5), until: DelayedWork {})
        #expect(armed)
        #expect(pacer.close().timers.count == 1)
        #expect(pacer.admit(Self.host, requests.go(9)) == .closed)
        let late = pacer.armed(hold, lasting: .seconds(5), until: DelayedWork {})
        #expect(!late, "too late to arm")
        #expect(pacer.holdEnded(hold.key, id: hold.id).requests.isEmpty)
        #expect(pacer.ended(Self.host, failure: .pushback(retryAfter: .seconds(5)), epoch: 1).hold == nil)
        #expect(requests.gone.isEmpty)
    }
}
