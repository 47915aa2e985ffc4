import JobKit
import JobKitTesting
import Testing

/// The combinators' promises in the orders a concurrent queue allows: the
/// events that race here (a child finishing, a timer firing, a cancel) fall
/// due at the same instant of virtual time, and each seed runs them in
/// another order.
@Suite("Combinators in explored orders", .timeLimit(.minutes(1)))
struct ExploredOrderingTests {
    private struct Broken: Error, CustomStringConvertible {
        let description: String
    }

    /// Runs `job` on `queue` until `time`, and returns its one outcome;
    /// throws if it completed twice or not at all, or left work behind.
    private func onlyOutcome<T>(of job: Job<T>, on queue: TestQueue, until time: Duration = .seconds(60)) throws
        -> Job<T>.Outcome
    {
        let outcomes = LockedValue<[Job<T>.Outcome]>([])
        job.perform(on: queue) { outcome in outcomes.withValue { $0.append(outcome) } }
        try queue.advance(by: time)
        guard outcomes.value.count == 1, let outcome = outcomes.value.first else {
            throw Broken(description: "\(outcomes.value.count) outcomes")
        }
        guard queue.isIdle else { throw Broken(description: "\(queue.pendingCount) items left on the queue") }
        return outcome
    }

    @Test func aTimeoutAndACompletionAtTheSameInstantGiveOneOutcome() throws {
        let outcomes = LockedValue<Set<String>>([])
        try exploreOrderings(seeds: 0..<300) { queue in
            let outcome = try onlyOutcome(of: finishing(7, after: .seconds(1)).timeout(after: .seconds(1)), on: queue)
            switch outcome {
            case .success(let value): try #require(value == 7)
            case .failure(let error): try #require(error as? JobError == .timedOut)
            }
            outcomes.withValue { $0.insert((try? outcome.get()).map { "\($0)" } ?? "timed out") }
        }
        #expect(outcomes.value == ["7", "timed out"])
    }

    @Test func aFailFastGroupFailsOnceAndStartsNothingAfterItsFailure() throws {
        let started = LockedValue<Set<Int>>([])
        try exploreOrderings(seeds: 0..<300) { queue in
            let ran = LockedValue(0)
            let children = (0..<6).map { index in
                finishing((), failing: index == 2 ? Broken(description: "child 2") : nil, after: .seconds(1), ran: ran)
            }
            let outcome = try onlyOutcome(of: Job.group(children, maxConcurrent: 3), on: queue)
            try #require((outcome.failure as? Broken)?.description == "child 2")
            try #require(ran.value == 3 || ran.value == 4 || ran.value == 5)
            started.withValue { $0.insert(ran.value) }
        }
        // Child 2 failed first, after one of the others, or after both.
        #expect(started.value == [3, 4, 5])
    }

    @Test func aWaitForAllGroupReportsTheFirstFailureAfterEveryChild() throws {
        let firstFailures = LockedValue<Set<Int>>([])
        try exploreOrderings(seeds: 0..<300) { queue in
            let finished = LockedValue<[Int]>([])
            let children = (0..<5).map { index in
                finishing(
                    index, failing: index.isMultiple(of: 2) ? Broken(description: "child \(index)") : nil,
                    after: .seconds(1), finished: finished
                )
                .discardingValue()
            }
            let outcome = try onlyOutcome(of: Job.group(children, failurePolicy: .waitForAll), on: queue)
            try #require(finished.value.count == 5)
            let first = try #require(finished.value.first { $0.isMultiple(of: 2) })
            try #require((outcome.failure as? Broken)?.description == "child \(first)")
            firstFailures.withValue { $0.insert(first) }
        }
        #expect(firstFailures.value == [0, 2, 4])
    }

    @Test func aCollectKeepsInputOrderInEveryOrderOfCompletion() throws {
        let completionOrders = LockedValue<Set<[Int]>>([])
        try exploreOrderings(seeds: 0..<300) { queue in
            let finished = LockedValue<[Int]>([])
            let children = (0..<6).map { finishing($0, after: .seconds(1), finished: finished) }
            let outcome = try onlyOutcome(of: Job<[Int]>.collect(children, maxConcurrent: 4), on: queue)
            try #require(try outcome.get() == Array(0..<6))
            completionOrders.withValue { $0.insert(finished.value) }
        }
        // Four finish at 1 s, the other two at 2 s: 4! × 2! = 48 orders, all seen.
        #expect(completionOrders.value.count == 48)
    }

    @Test func aCancelAtTheInstantAStepFinishesGivesOneOutcome() throws {
        let started = LockedValue<Set<Int>>([])
        try exploreOrderings(seeds: 0..<300) { queue in
            let ran = LockedValue(0)
            let steps = (0..<4).map { _ in finishing((), after: .seconds(1), ran: ran) }
            let outcomes = LockedValue<[Job<Void>.Outcome]>([])
            let handle = Job.sequence(steps).perform(on: queue) { outcome in outcomes.withValue { $0.append(outcome) } }
            // At 2 s, as step 2 finishes: before it, or after it and before
            // or after step 3 starts.
            queue.enqueue(after: .seconds(2)) { handle.cancel() }
            try queue.advance(by: .seconds(60))
            try #require(outcomes.value.count == 1)
            try #require(outcomes.value.first?.failure is CancellationError)
            try #require(ran.value == 2 || ran.value == 3)
            try #require(queue.isIdle)
            started.withValue { $0.insert(ran.value) }
        }
        #expect(started.value == [2, 3])
    }

    @Test func aTimeoutAtTheInstantARetryWaitEndsGivesOneOutcome() throws {
        let started = LockedValue<Set<Int>>([])
        try exploreOrderings(seeds: 0..<300) { queue in
            let ran = LockedValue(0)
            let flaky = finishing(1, failing: Broken(description: "flaky"), after: .seconds(1), ran: ran)
            let job = flaky.retry(attempts: 3, delay: .fixed(.seconds(1))).timeout(after: .seconds(2))
            let outcome = try onlyOutcome(of: job, on: queue)
            // Attempt 1 fails at 1 s; its wait ends at 2 s, the instant the
            // timeout fires: attempt 2 starts before it, or never.
            try #require(outcome.failure as? JobError == .timedOut)
            try #require(ran.value == 1 || ran.value == 2)
            started.withValue { $0.insert(ran.value) }
        }
        #expect(started.value == [1, 2])
    }
}
