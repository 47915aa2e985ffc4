import Foundation
import JobKitTesting
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

    @Test func actsAfterUnlockingSoTheActionMayUseTheHandoffAgain() {
        let seen = LockedValue<[Int]>([])
        let handoff = LockedValue<Handoff<Int, Int>?>(nil)
        handoff.setValue(
            Self.counter { value in
                // Under the lock, this would deadlock (or trap).
                let read = handoff.value?.read { $0 } ?? -1
                seen.withValue { $0.append(read) }
                if value == 1 {
                    handoff.value?.increment()
                }
            })
        handoff.value?.increment()
        #expect(seen.value == [1, 2], "the action's own change is acted on after it, by the same thread")
        handoff.value?.update { _ in false }
        #expect(seen.value == [1, 2], "a change that leaves nothing to act on acts on nothing")
    }

    @Test func whileOneThreadActsAnotherOnlyLeavesItsChangeAndTheNewestIsActedOn() throws {
        let entered = DispatchSemaphore(value: 0)
        let proceed = DispatchSemaphore(value: 0)
        let seen = LockedValue<[Int]>([])
        let handoff = Self.counter { value in
            seen.withValue { $0.append(value) }
            if value == 1 {
                entered.signal()
                _ = proceed.wait(timeout: .now() + 10)
            }
        }
        let first = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            handoff.increment()
            first.signal()
        }
        try #require(entered.wait(timeout: .now() + 10) == .success)
        // The first thread is acting on 1: these return at once, acting on
        // nothing themselves.
        handoff.increment()
        handoff.increment()
        let waited = LockedValue(false)
        handoff.afterActions { waited.setValue(true) }
        #expect(seen.value == [1])
        #expect(!waited.value, "waits for the action in progress")
        proceed.signal()
        try #require(first.wait(timeout: .now() + 10) == .success)
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

    @Test func aReportSharesNoStorageWithTheMergersState() {
        let reports = LockedValue<[PublishProgress]>([])
        let destinations = (1...3).map { URL(string: "https://example.com/\($0)")! }
        let merged = ProgressMerger(destinations: destinations, sizes: [10, 10, 0]) { report in
            reports.withValue { $0.append(report) }
        }
        merged.update(0, bytesSent: 5)
        let kept = reports.value[0]
        merged.update(0, bytesSent: 8)
        merged.update(2, bytesSent: 0, bytesTotal: 4)
        #expect(kept.uploads.map(\.bytesSent) == [5, 0, 0], "a later change leaves an earlier report alone")
        #expect(kept.uploads.map(\.bytesTotal) == [10, 10, 0])
        #expect(reports.value.last?.uploads.map(\.bytesTotal) == [10, 10, 4])
        #expect(merged.current.bytesSent == 8)
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
