import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing
import UploadsTesting

@testable import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The outbox's state machine, event by event, without queues, threads or
/// a disk: what each event decides, and the actions it hands back.
@Suite("Outbox state machine", .timeLimit(.minutes(1)))
struct OutboxStateMachineTests {
    typealias Machine = OutboxStateMachine

    /// The record of a post named `name`, with `count` photos of 10 bytes.
    static func record(
        _ name: String, media count: Int, priority: Outbox.Priority = .normal, sequence: Int = 0
    ) -> OutboxRecord {
        let media = (0..<count).map {
            OutboxRecord.Medium(
                file: URL(fileURLWithPath: "/\(name)-\($0).jpg"), destination: destination("\(name)/photo-\($0).jpg"),
                contentType: "image/jpeg", size: 10, isCopy: false, idempotencyKey: "\(name)-m\($0)")
        }
        return OutboxRecord(
            destination: destination("\(name)/post.json"), text: name, photoCount: count, media: media,
            priority: priority, sequence: sequence, status: .pending, idempotencyKey: name)
    }

    /// A machine that loaded `records`, each medium weighing 10 bytes.
    static func machine(
        _ records: [OutboxRecord], limit: Int = 4, budget: Int64 = 100, wakeWindow: Duration = .seconds(10)
    ) -> Machine {
        var machine = Machine(
            folder: URL(fileURLWithPath: "/outbox"),
            options: Outbox.Options(
                publishing: PublishOptions(maxConcurrentUploads: limit), maxBytesInFlight: budget,
                networkWakeWindow: wakeWindow))
        for record in records { _ = machine.load(record, weights: record.media.map { _ in 10 }) }
        return machine
    }

    /// A handle for a started upload that counts its cancels.
    final class Cancels: Sendable {
        private let count = Lock(0)
        /// The uploads' controllers, kept: a job whose controller goes is
        /// abandoned.
        private let controllers = Lock<[Job<Void>.Controller]>([])
        var value: Int { count.withLock { $0 } }

        func handle() -> JobHandle {
            Job<Void> { [self] controller in
                controllers.withLock { $0.append(controller) }
                controller.onCancel { self.count.withLock { $0 += 1 } }
            }
            .perform(on: ImmediateQueue()) { _ in }
        }
    }

    private static let offline = UploadError.network(destination("a"), URLError(.notConnectedToInternet))

    /// A request toward `destination`'s host, admitted and answered `503`
    /// with `Retry-After: 5`: the error, and the hold it started; `nil`
    /// when it started none.
    static func pushBack(_ machine: inout Machine, toward destination: URL) -> (UploadError, OutboxPacer.Hold)? {
        let host = OutboxPacer.host(of: destination)
        guard case .now(let epoch) = machine.admit(host, bytes: 100, { _ in }) else { return nil }
        let pushback = UploadError.httpStatus(
            UploadReceipt(destination: destination, status: 503, headers: ["Retry-After": "5"]))
        let pushed = machine.requestEnded(host, failure: UploadFailure(pushback), epoch: epoch)
        guard case .hold(let hold)? = pushed.timers.first else { return nil }
        return (pushback, hold)
    }

    @Test func postsStartByPriorityThenOrderWithinTheLimitAndTheBudget() {
        let normal = Self.record("normal", media: 2, sequence: 0)
        let high = Self.record("high", media: 1, priority: .high, sequence: 1)
        var machine = Self.machine([normal, high], limit: 2)
        let starts = machine.pump().starts
        #expect(starts.map(\.destination) == [high.destination, normal.destination])
        #expect(machine.pump().starts.isEmpty, "at the limit")

        var heavy = Self.machine([Self.record("heavy", media: 3)], budget: 15)
        #expect(heavy.pump().starts.count == 1, "an upload past the budget waits for the one in flight")
    }

    @Test func aPostIsAddedOnceAndNotOnceTheOutboxClosed() throws {
        var machine = Self.machine([])
        let post = Self.record("a", media: 1)
        #expect(try machine.reserve(post.destination) == 0)
        #expect(machine.added(post, weights: [10]).pump == .scheduled)
        #expect(try machine.reserve(post.destination) == nil, "the outbox has it")
        #expect(machine.entries.map(\.state) == [.queued])
        _ = machine.close()
        #expect(throws: OutboxError.self) { try machine.reserve(destination("b/post.json")) }
    }

    @Test func aPauseCancelsTheUploadsAndTheirMediaStartAgainOnlyOnceTheyEnded() throws {
        let post = Self.record("a", media: 2)
        var machine = Self.machine([post])
        let cancels = Cancels()
        let uploads = machine.pump().starts
        for upload in uploads {
            let attached = machine.attach(cancels.handle(), to: upload)
            #expect(attached)
        }

        let paused = try machine.pause(post.destination)
        for cancel in paused.cancels { cancel() }
        #expect(cancels.value == 2)
        #expect(machine.takeEffects().writes.map(\.status) == [.paused])
        #expect(machine.entry(post.destination)?.state == .paused)

        #expect(try machine.resume(post.destination).pump == .scheduled)
        #expect(machine.takeEffects().writes.map(\.status) == [.pending])
        #expect(machine.pump().starts.isEmpty, "each medium's cancelled upload has not ended")
        _ = machine.finished(uploads[0], with: .failure(CancellationError()))
        #expect(machine.pump().starts.map(\.index) == [0], "one medium never has two uploads at once")
    }

    @Test func loadingKeepsTheNewerRecordOfAPostAndSaysWhatOfTheDiskGoes() throws {
        var machine = Self.machine([])
        let older = Self.record("a", media: 1, sequence: 0)
        var newer = Self.record("a", media: 1, sequence: 3)
        newer.status = .published
        #expect(machine.load(older, weights: [10]).older == nil)
        let leftovers = machine.load(newer, weights: [10])
        #expect(leftovers.older?.sequence == 0 && leftovers.removesCopies)
        #expect(machine.entries.map(\.state) == [.published])
        #expect(try machine.reserve(destination("b/post.json")) == 4, "after every loaded record")
        #expect(machine.opened().pump == .scheduled)
    }

    @Test func pauseAllAndResumeAllLeaveAFailedPostAsItIs() throws {
        let failing = Self.record("failing", media: 1, sequence: 0)
        let other = Self.record("other", media: 1, sequence: 1)
        var machine = Self.machine([failing, other], limit: 1)
        let upload = try #require(machine.pump().starts.first)
        _ = machine.finished(upload, with: .failure(TestFailure(id: 1)))
        _ = machine.pauseAll()
        #expect(machine.entries.map(\.state) == [.failed, .paused])
        #expect(machine.resumeAll().pump == .scheduled)
        #expect(machine.entries.map(\.state) == [.failed, .queued])
        #expect(machine.pump().starts.map(\.destination) == [other.destination])
    }

    @Test func oneScheduledStartAtATimeAndAnUploadThatEndedIsNotAttached() throws {
        let post = Self.record("a", media: 1)
        var machine = Self.machine([post])
        let first = machine.schedulesPump()
        let second = machine.schedulesPump()
        #expect(first && !second, "one is pending")
        let ran = machine.scheduledPumpRan()
        let upload = try #require(ran.starts.first)
        let third = machine.schedulesPump()
        #expect(third)
        _ = machine.finished(upload, with: .success(UploadReceipt(destination: post.media[0].destination)))
        let attached = machine.attach(Cancels().handle(), to: upload)
        #expect(!attached, "its answer came first")
    }

    @Test func progressIsCountedForTheUploadInFlightAndToldOnlyToObservers() throws {
        var record = Self.record("a", media: 1)
        record.media[0].receipt = OutboxRecord.Receipt(UploadReceipt(destination: record.media[0].destination))
        var machine = Self.machine([record])
        let document = try #require(machine.pump().starts.first)
        machine.built(document, size: 30)
        let unobserved = machine.progressed(document, bytesSent: 12)
        #expect(!unobserved, "nobody to tell")
        let entry = try #require(machine.entry(record.destination))
        #expect(entry.bytesSent == 22 && entry.bytesTotal == 40, "the medium stored, 12 of the document's 30")
        let (_, observer) = AsyncStream.makeStream(of: [Outbox.Entry].self)
        let observing = machine.observe(observer)
        let key = try #require(observing)
        let observed = machine.progressed(document, bytesSent: 20)
        #expect(observed)
        machine.stopObserving(key)
        _ = machine.finished(document, with: .failure(Self.offline))
        let stale = machine.progressed(document, bytesSent: 30)
        #expect(!stale, "the upload ended")
    }

    @Test func aFailureThatCanPassWaitsAndItsWakeTriesAgainWithTheWaitsCounted() throws {
        let post = Self.record("a", media: 1)
        var machine = Self.machine([post])
        let first = try #require(machine.pump().starts.first)
        let ended = machine.finished(first, with: .failure(Self.offline))
        #expect(ended.timers == [.wake(post.destination, waits: 1)] && ended.pump == .now)
        #expect(machine.entry(post.destination)?.state == .waitingForNetwork)
        #expect(machine.pump().starts.isEmpty)
        let armed = machine.armed(.wake(post.destination, waits: 1), lasting: .seconds(1), until: DelayedWork {})
        let stale = machine.armed(.wake(post.destination, waits: 2), lasting: .seconds(1), until: DelayedWork {})
        #expect(armed && !stale)

        #expect(machine.fired(.wake(post.destination, waits: 1)).pump == .now)
        let second = try #require(machine.pump().starts.first)
        #expect(machine.finished(second, with: .failure(Self.offline)).timers == [.wake(post.destination, waits: 2)])
        #expect(machine.fired(.wake(post.destination, waits: 2)).pump == .now)
        let third = try #require(machine.pump().starts.first)
        _ = machine.finished(third, with: .success(UploadReceipt(destination: post.media[0].destination)))
        #expect(machine.posts[post.destination]?.waits == 0, "a stored medium ends the run of waits")
    }

    @Test func aFailureForGoodFailsThePostUntilItIsTriedAgain() throws {
        let post = Self.record("a", media: 1)
        var machine = Self.machine([post])
        let upload = try #require(machine.pump().starts.first)
        #expect(machine.finished(upload, with: .failure(TestFailure(id: 1))).timers.isEmpty)
        #expect(machine.entry(post.destination)?.state == .failed)
        #expect(machine.takeEffects().writes.map(\.status) == [.failed])
        #expect(machine.pump().starts.isEmpty)

        #expect(try machine.retry(post.destination).pump == .scheduled)
        #expect(machine.takeEffects().writes.map(\.status) == [.pending])
        #expect(machine.pump().starts.count == 1)
        #expect(throws: OutboxError.self) { try machine.retry(destination("b/post.json")) }
    }

    @Test func aPushbackWhileItsHostIsHeldWaitsForTheHostNotForTheNetwork() throws {
        let post = Self.record("a", media: 1)
        var machine = Self.machine([post], wakeWindow: .zero)
        let upload = try #require(machine.pump().starts.first)
        let (pushback, hold) = try #require(Self.pushBack(&machine, toward: post.media[0].destination))
        #expect(machine.finished(upload, with: .failure(pushback)).timers.isEmpty, "no wake: the hold's end is")
        #expect(machine.entry(post.destination)?.state == .waitingForNetwork)
        _ = machine.networkDidChange()
        #expect(machine.pump().starts.isEmpty, "a new network does not end a server's hold")

        let opened = machine.fired(.hold(hold))
        #expect(opened.pump == .scheduled && machine.entry(post.destination)?.state == .queued)
        #expect(machine.pump().starts.count == 1)
    }

    @Test func aNetworkChangeTriesTheWaitingPostsOnceAfterAMomentInItsWindow() throws {
        let post = Self.record("a", media: 1)
        var machine = Self.machine([post])
        let upload = try #require(machine.pump().starts.first)
        _ = machine.finished(upload, with: .failure(Self.offline))
        let armedWake = machine.armed(.wake(post.destination, waits: 1), lasting: .seconds(1), until: DelayedWork {})

        let changed = machine.networkDidChange()
        #expect(changed.timers == [.notice(generation: 1)])
        #expect(machine.networkDidChange().timers.isEmpty, "a try is pending")
        let armedNotice = machine.armed(.notice(generation: 1), lasting: .seconds(1), until: DelayedWork {})
        #expect(armedWake && armedNotice)
        let tried = machine.fired(.notice(generation: 1))
        #expect(tried.cancels.count == 1 && tried.pump == .scheduled, "its own wake is cancelled")
        #expect(machine.pump().starts.count == 1)
        #expect(machine.networkDidChange().timers == [.notice(generation: 2)], "the next change")
    }

    @Test func aProbedHostTakesTheSmallestUploadTheOutboxHasForItFirstAlone() throws {
        // A video of 4,000 bytes first, then photos of 30 and 20; a later
        // post's photo of 10 (its document, smaller, goes after it); a
        // photo toward another host.
        var video = Self.record("a", media: 3)
        for (index, size) in [4_000, 30, 20].enumerated() { video.media[index].size = Int64(size) }
        let later = Self.record("b", media: 1, sequence: 1)
        var other = Self.record("c", media: 1, sequence: 2)
        other.media[0].destination = URL(string: "https://cdn.example.net/c/photo-0.jpg")!
        var machine = Self.machine([video, later, other], limit: 5, wakeWindow: .zero)
        let host = OutboxPacer.host(of: video.media[0].destination)
        let starts = machine.pump().starts
        #expect(starts.count == 5, "nothing probed: every upload")
        // Each upload's request fails as a phone without network does.
        for start in starts {
            let key = OutboxPacer.host(of: start.record.destination(of: start.index))
            guard case .now(let epoch) = machine.admit(key, bytes: 0, { _ in }) else {
                Issue.record("an idle host admits at once")
                return
            }
            _ = machine.requestEnded(key, failure: .offline, epoch: epoch)
            _ = machine.finished(start, with: .failure(Self.offline))
        }
        #expect(machine.pacer.isProbed(host))
        #expect(machine.pump().starts.isEmpty, "every post waits for the network")

        _ = machine.networkDidChange()
        let probes = machine.pump().starts
        #expect(
            probes.map { $0.record.destination(of: $0.index).path } == ["/b/photo-0.jpg", "/c/photo-0.jpg"],
            "the smallest medium toward each host, of any post, alone")
        #expect(machine.pump().starts.isEmpty, "the window, one after the network failed")

        // The probe is stored: the window opens again to what it was
        // before the network failed (five), and the posts go in their
        // order again, the video's three media at once.
        guard case .now(let epoch) = machine.admit(host, bytes: 10, { _ in }) else {
            Issue.record("the probe's request goes at once")
            return
        }
        let opened = machine.requestEnded(host, failure: nil, epoch: epoch)
        _ = machine.finished(probes[0], with: .success(UploadReceipt(destination: later.media[0].destination)))
        #expect(opened.pump == .scheduled && !machine.pacer.isProbed(host))
        let next = machine.pump().starts
        #expect(
            next.map { $0.record.destination(of: $0.index).path }
                == ["/a/photo-0.jpg", "/a/photo-1.jpg", "/a/photo-2.jpg"])
    }

    @Test func afterAHoldTheSmallestUploadStartsFirstOutOfTurnThenTheRestInTurn() throws {
        var video = Self.record("v", media: 4)
        for (index, size) in [4_000, 30, 20, 25].enumerated() { video.media[index].size = Int64(size) }
        var machine = Self.machine([video], budget: 10_000)
        let starts = machine.pump().starts
        #expect(starts.map(\.index) == [0, 1, 2, 3], "in turn")
        let (pushback, hold) = try #require(Self.pushBack(&machine, toward: video.media[0].destination))
        for start in starts { _ = machine.finished(start, with: .failure(pushback)) }
        #expect(machine.pump().starts.isEmpty, "held")

        _ = machine.fired(.hold(hold))
        // The window, halved to 2: the photo of 20 bytes first, out of
        // turn, then the next in turn.
        #expect(machine.pump().starts.map(\.index) == [2, 0])
    }

    @Test func aRemovedPostDiscardsWhatItKeptAndItsRecordGoesAfterTheWrites() throws {
        let post = Self.record("a", media: 2)
        var machine = Self.machine([post])
        let uploads = machine.pump().starts
        _ = machine.finished(uploads[0], with: .success(UploadReceipt(destination: post.media[0].destination)))
        let removed = try machine.remove(post.destination)
        #expect(removed.discards.map(\.destination) == [post.media[1].destination], "the stored one stays stored")
        let effects = machine.takeEffects()
        #expect(effects.writes.isEmpty && effects.removals.map(\.destination) == [post.destination])
        #expect(machine.entry(post.destination) == nil)
        #expect(machine.finished(uploads[1], with: .failure(CancellationError())).timers.isEmpty)
    }

    @Test func aClosedMachineCancelsEverythingEndsEverySequenceAndRefusesEvents() throws {
        let post = Self.record("a", media: 1)
        var machine = Self.machine([post])
        let cancels = Cancels()
        let upload = try #require(machine.pump().starts.first)
        let attached = machine.attach(cancels.handle(), to: upload)
        #expect(attached)
        let (_, observer) = AsyncStream.makeStream(of: [Outbox.Entry].self)
        #expect(machine.observe(observer) != nil)

        let closed = machine.close()
        for cancel in closed.cancels { cancel() }
        #expect(cancels.value == 1 && closed.finishes.count == 1)
        #expect(machine.close().cancels.isEmpty, "once")
        #expect(machine.observe(observer) == nil)
        #expect(throws: OutboxError.self) { try machine.pause(post.destination) }
        #expect(machine.pump().starts.isEmpty)
        let armed = machine.armed(.notice(generation: 1), lasting: .seconds(1), until: DelayedWork {})
        #expect(!armed)
        #expect(machine.finished(upload, with: .failure(CancellationError())).timers.isEmpty)
    }

    @Test func theDocumentStartsOnlyOnceEveryReceiptIsOnDisk() throws {
        let added = Self.record("a", media: 1)
        let medium = added.media[0]
        var machine = Self.machine([added])
        let upload = try #require(machine.pump().starts.first)
        #expect(upload.index == 0)
        let ended = machine.finished(upload, with: .success(UploadReceipt(destination: medium.destination)))
        #expect(ended.pump == .now)
        let receipted = try #require(machine.takeEffects().writes.first)

        let early = machine.pump().starts
        #expect(early.isEmpty, "its receipt is known, but not yet on disk")
        machine.wrote([receipted], failed: [])
        let starts = machine.pump().starts
        #expect(starts.map(\.isDocument) == [true])
    }

    @Test func anUploadThatEndedBeforeAPauseKeepsItsReceiptAndOneThatFailsSaysNothing() throws {
        let added = Self.record("a", media: 2)
        var machine = Self.machine([added])
        let uploads = machine.pump().starts
        #expect(uploads.map(\.index) == [0, 1])
        // Paused while both answers wait on the queue.
        _ = try machine.pause(added.destination)
        _ = machine.finished(uploads[0], with: .success(UploadReceipt(destination: added.media[0].destination)))
        _ = machine.finished(uploads[1], with: .failure(CancellationError()))
        let tracked = try #require(machine.posts[added.destination])
        #expect(tracked.record.media.map { $0.receipt != nil } == [true, false])
        #expect(tracked.running.isEmpty)
        #expect(machine.entry(added.destination)?.state == .paused)
        #expect(machine.pump().starts.isEmpty, "paused")
    }

    @Test func observersAreNeverToldOfAPublishedPostWhoseRecordCouldNotBeWritten() async throws {
        let writer = DurableFileWriter { data, file in
            if String(decoding: data, as: UTF8.self).contains(#""status":"published""#) {
                throw DurableFiles.Failure("cannot write it", errno: ENOSPC)
            }
            try DurableFiles.writeNewFile(data, to: file)
        }
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let journal = try OutboxJournal(folder: folder.url.appendingPathComponent("outbox"), writer: writer)
        defer { journal.close() }
        var record = Self.record("a", media: 1)
        record.media[0].receipt = OutboxRecord.Receipt(UploadReceipt(destination: record.media[0].destination))
        var machine = Self.machine([record])
        // Every list told, none skipped.
        let (told, observer) = AsyncStream.makeStream(of: [Outbox.Entry].self)
        _ = machine.observe(observer)
        _ = machine.takeEffects()
        let document = try #require(machine.pump().starts.first)
        #expect(document.isDocument)
        let handoff = Handoff(
            machine, take: { $0.takeEffects() },
            actingOn: { effects, handoff in Outbox.carryOut(effects, journal: journal, machine: handoff) })

        // The post's document stored.
        handoff.update { machine in
            _ = machine.finished(document, with: .success(UploadReceipt(destination: record.destination)))
            return true
        }
        observer.finish()
        var states: [[Outbox.State]] = []
        for await posts in told { states.append(posts.map(\.state)) }
        #expect(states == [[.failed]], "the list that said published is not told")
    }
}
