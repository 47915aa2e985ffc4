import Foundation
import JobKitTesting
import TestSupport
import Testing

@testable import Uploads

/// Decided under the lock, acted on outside it: the `Handoff` that
/// delivers progress and writes manifests, and the `ProgressMerger` on it.
@Suite("Handoff", .timeLimit(.minutes(1)))
struct HandoffTests {
    /// A handoff whose state is a counter and whose action records it.
    static func counter(act: @escaping @Sendable (Int) -> Void) -> Handoff<Int, Int> {
        Handoff(0, take: { $0 }, act: act)
    }

    @Test(.onThreadOfItsOwn) func actsAfterUnlockingSoTheActionMayUseTheHandoffAgain() async {
        let seen = LockedValue<[Int]>([])
        let handoff = LockedValue<Handoff<Int, Int>?>(nil)
        handoff.setValue(
            Self.counter { value in
                // Under the lock, this would deadlock (or trap).
                let read = handoff.value?.read { $0 } ?? -1
                seen.withValue { $0.append(read) }
                if value == 1 { handoff.value?.increment() }
            })
        let done = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            handoff.value?.increment()
            done.signal()
        }
        #expect(await done.signalled(within: 10), "no deadlock")
        #expect(seen.value == [1, 2], "the action's own change is acted on after it, by the same thread")
        handoff.value?.update { _ in false }
        #expect(seen.value == [1, 2], "a change that leaves nothing to act on acts on nothing")
    }

    @Test(.onThreadOfItsOwn) func whileOneThreadActsAnotherOnlyLeavesItsChangeAndTheNewestIsActedOn() async throws {
        let entered = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        let seen = LockedValue<[Int]>([])
        let handoff = Self.counter { value in
            seen.withValue { $0.append(value) }
            if value == 1 {
                entered.signal()
                // allowed: the action runs on a dispatch thread, held until the test lets it go
                _ = proceed.wait(timeout: .now() + 10)
            }
        }
        let first = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            handoff.increment()
            first.signal()
        }
        try #require(await entered.signalled(within: 10))
        // The first thread is acting on 1: these return at once, acting on
        // nothing themselves.
        handoff.increment()
        handoff.increment()
        let waited = LockedValue(false)
        handoff.afterActions { waited.setValue(true) }
        #expect(seen.value == [1])
        #expect(!waited.value, "waits for the action in progress")
        proceed.signal()
        try #require(await first.signalled(within: 10))
        #expect(seen.value == [1, 3], "2 was replaced before anyone took it")
        #expect(waited.value)
        handoff.afterActions { waited.setValue(false) }
        #expect(!waited.value, "nothing in progress: runs at once")
    }

    @Test func manyThreadsChangingAtOnceGetOneActorAtATimeInTheirOrder() {
        for _ in 0..<50 {
            let acting = LockedValue((now: 0, most: 0))
            let seen = LockedValue<[Int]>([])
            let handoff = Self.counter { value in
                acting.withValue {
                    $0.now += 1
                    $0.most = max($0.most, $0.now)
                }
                seen.withValue { $0.append(value) }
                // Gives other threads the processor while acting: a second
                // actor, if there could be one, would show here.
                sched_yield()
                acting.withValue { $0.now -= 1 }
            }
            DispatchQueue.concurrentPerform(iterations: 200) { _ in
                handoff.increment()
            }
            #expect(acting.value.most == 1)
            #expect(seen.value == seen.value.sorted() && Set(seen.value).count == seen.value.count)
            #expect(seen.value.last == 200, "the last change is always acted on")
        }
    }

    // MARK: - Progress

    @Test func theSumsKeptAsTransfersChangeAreTheSumsOfTheTransfers() {
        var generator = SeededRandomNumberGenerator(seed: 7)
        let totals = (0..<40).map { _ in Int64.random(in: 0...1_000, using: &generator) }
        let mismatches = LockedValue(0)
        let merged = ProgressMerger<Bool>(
            totals: totals, holdsBackTheLastByte: true,
            report: { state in
                let sent = state.transfers.reduce(0) { $0 + $1.bytesSent }
                let total = state.transfers.reduce(0) { $0 + $1.bytesTotal }
                let unfinished = state.transfers.filter { !$0.isFinished }.count
                return state.bytesSent == sent && state.bytesTotal == total && state.unfinishedCount == unfinished
            },
            deliver: { (agrees: Bool) in if !agrees { mismatches.withValue { $0 += 1 } } })
        for _ in 0..<2_000 {
            let index = Int.random(in: 0..<totals.count, using: &generator)
            switch Int.random(in: 0..<10, using: &generator) {
            case 0: merged.finish(index)
            case 1: merged.update(index, bytesSent: 0, bytesTotal: Int64.random(in: 0...1_000, using: &generator))
            default: merged.update(index, bytesSent: Int64.random(in: 0...1_000, using: &generator))
            }
        }
        #expect(mismatches.value == 0)
        #expect(merged.current)
    }

    @Test func aPostsDocumentCountsFromWhenItsSizeIsKnown() {
        let reports = LockedValue<[PublishProgress]>([])
        let destinations = (1...3).map { URL(string: "https://example.com/\($0)")! }
        let merged = ProgressMerger(destinations: destinations, sizes: [10, 10, 0]) { report in
            reports.withValue { $0.append(report) }
        }
        merged.update(0, bytesSent: 5)
        merged.update(2, bytesSent: 0, bytesTotal: 4)
        #expect(reports.value.map { $0.uploads.map(\.bytesTotal) } == [[10, 10, 0], [10, 10, 4]])
        #expect(reports.value.map(\.bytesSent) == [5, 5])
        #expect(merged.current.uploads.map(\.destination) == destinations)
    }

    @Test func theShareDoneNeverFallsWhenATotalBecomesKnownAndIsOneOnlyWhenAllSucceeded() {
        let shares = LockedValue<[Double]>([])
        let merged = ProgressMerger(totals: [10, 0], report: { $0.fractionCompleted }) { share in
            shares.withValue { $0.append(share) }
        }
        merged.update(0, bytesSent: 10)  // 9 of 10
        merged.update(1, bytesSent: 0, bytesTotal: 90)  // 9 of 100: the share stays
        merged.finish(0)
        merged.update(1, bytesSent: 90)
        merged.finish(1)
        #expect(shares.value == [0.9, 0.9, 0.9, 0.99, 1])
    }
}

extension Handoff where State == Int {
    /// Adds one to the counter, to be acted on.
    func increment() {
        update { count in
            count += 1
            return true
        }
    }
}
