import Dispatch
import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing

@Suite("zip", .timeLimit(.minutes(1)))
struct ZipTests {
    private struct User: Equatable, Sendable {
        let name: String
    }

    /// Larger than an existential's inline buffer (three words).
    private struct Large: Equatable, Sendable {
        let values: (Int, Int, Int, Int, Int)

        static func == (lhs: Large, rhs: Large) -> Bool {
            lhs.values == rhs.values
        }
    }

    @Test func valuesOfEveryTypeComeInArgumentOrderWhateverOrderTheyFinishIn() throws {
        let user = ManualJob<User>()
        let avatar = ManualJob<Data?>()
        let count = ManualJob<Int>()
        let saved = ManualJob<Void>()
        let queue = TestQueue()
        let recorder = Recorder<(User, Data?, Int, Void)>()
        Job.zip(user.job, avatar.job, count.job, saved.job).perform(on: queue, then: recorder.handler)
        try queue.run()
        let starts: [Int] = [user.startCount, avatar.startCount, count.startCount, saved.startCount]
        #expect(starts == [1, 1, 1, 1])
        saved.finish()
        count.finish(with: 3)
        avatar.finish(with: nil)
        try queue.run()
        #expect(recorder.count == 0)
        user.finish(with: User(name: "ada"))
        try queue.run()
        let (name, data, number, _) = try #require(recorder.last).get()
        #expect(name == User(name: "ada"))
        #expect(data == nil)
        #expect(number == 3)
        #expect(recorder.count == 1)
    }

    @Test func noJobsGiveAJobOfVoidAndOneJobItsOwnValue() throws {
        let none: Job<Void> = Job.zip()
        #expect(outcome(of: none)?.isSuccess == true)
        let one: Job<Int> = Job.zip(Job.succeeded(7))
        #expect(try outcome(of: one)?.get() == 7)
    }

    @Test func twelveJobsOfSixTypes() throws {
        let zipped = Job.zip(
            Job.succeeded(1), Job.succeeded("2"), Job.succeeded(3.0), Job.succeeded([4]), Job.succeeded(Int?(5)),
            Job.succeeded(UInt8(6)), Job.succeeded(7), Job.succeeded("8"), Job.succeeded(9.0), Job.succeeded([10]),
            Job.succeeded(Int?.none), Job.succeeded(UInt8(12))
        )
        let values = try #require(outcome(of: zipped)).get()
        #expect(values.0 == 1 && values.1 == "2" && values.2 == 3.0 && values.3 == [4] && values.4 == 5)
        #expect(values.5 == 6 && values.6 == 7 && values.7 == "8" && values.8 == 9.0 && values.9 == [10])
        #expect(values.10 == nil && values.11 == 12)
    }

    @Test func valuesOfExistentialTypesAndLargeOnesComeOutAsTheyWentIn() throws {
        // Each job's value travels boxed: an existential's own box holds the
        // value inside, and a large value does not fit a box inline.
        let zipped = Job.zip(
            Job<any Sendable>.succeeded("text"),
            Job<any Error>.succeeded(TestError(id: 4)),
            Job<(any Sendable)?>.succeeded(Int?.none),
            Job.succeeded(Large(values: (1, 2, 3, 4, 5))),
            Job.succeeded(User(name: "ada"))
        )
        let (text, error, nothing, large, user) = try #require(outcome(of: zipped)).get()
        #expect(text as? String == "text")
        #expect(error as? TestError == TestError(id: 4))
        #expect(nothing == nil)
        #expect(large == Large(values: (1, 2, 3, 4, 5)))
        #expect(user == User(name: "ada"))
    }

    @Test func theFirstFailureFailsItAndCancelsTheJobsStillRunningAtOnce() throws {
        let first = ManualJob<Int>()
        let second = ManualJob<String>()
        let third = ManualJob<Int>()
        let queue = TestQueue()
        let recorder = Recorder<(Int, String, Int)>()
        Job.zip(first.job, second.job, third.job).perform(on: queue, then: recorder.handler)
        try queue.run()
        first.finish(with: 1)
        second.fail(with: TestError(id: 2))
        let cancels: [Int] = [first.cancelCount, second.cancelCount, third.cancelCount]
        #expect(cancels == [0, 0, 1])
        try queue.run()
        #expect(recorder.last?.failure as? TestError == TestError(id: 2))
        #expect(third.finish(with: 3) == false)
        try queue.run()
        #expect(recorder.count == 1)
        #expect(queue.isIdle)
    }

    @Test func cancellingItCancelsEveryJob() throws {
        let first = ManualJob<Int>()
        let second = ManualJob<String>()
        let queue = TestQueue()
        let recorder = Recorder<(Int, String)>()
        let handle = Job.zip(first.job, second.job).perform(on: queue, then: recorder.handler)
        try queue.run()
        handle.cancel()
        let cancels: [Int] = [first.cancelCount, second.cancelCount]
        #expect(cancels == [1, 1])
        try queue.run()
        #expect(isCancellation(recorder.last?.failure))
        #expect(recorder.count == 1)
    }

    @Test func theValuesOfAFailedZipAreReleasedOutsideItsLock() {
        // A value whose deinit takes a snapshot of the zip: released under
        // the zip's lock, it would take that lock again.
        let handle = LockedValue<JobHandle?>(nil)
        let snapshotsTaken = LockedValue(0)
        let probe = Job<Probe> { controller in
            controller.finish(with: Probe.snapshotting(handle, counting: snapshotsTaken))
        }
        let failing = ManualJob<Void>()
        handle.setValue(Job.zip(probe, failing.job).perform(on: ImmediateQueue()) { _ in })
        #expect(snapshotsTaken.value == 0)
        failing.fail(with: TestError(id: 1))
        #expect(snapshotsTaken.value == 1)
    }

    @Test func theValuesOfACancelledZipAreReleasedOutsideItsLock() {
        // A value whose deinit reports through the zip's other job, which
        // takes the zip's lock (a snapshot would not reach the zip: its job
        // let go of it as it was cancelled): released under the lock, it
        // would take it again.
        let waiting = ManualJob<Void>()
        let reported = LockedValue<Bool?>(nil)
        let probe = Job<Probe> { controller in
            controller.finish(with: Probe { reported.setValue(waiting.finish()) })
        }
        let handle = Job.zip(probe, waiting.job).perform(on: ImmediateQueue()) { _ in }
        #expect(reported.value == nil)
        handle.cancel()
        // Dropped: the zip was over.
        #expect(reported.value == false)
        #expect(waiting.cancelCount == 1)
    }

    @Test func aJobThatFailsInItsBodyKeepsTheJobsAfterItFromStarting() {
        let later = ManualJob<Int>()
        let failing = Job<String>.failed(TestError(id: 1))
        #expect(outcome(of: Job.zip(Job.succeeded(0), failing, later.job))?.failure as? TestError == TestError(id: 1))
        #expect(later.startCount == 0)
    }

    @Test func aCancelWhileTheJobsStartKeepsTheRestFromStarting() throws {
        let handle = LockedValue<JobHandle?>(nil)
        let later = ManualJob<Int>()
        let cancelling = Job<Int> { controller in
            handle.value?.cancel()
            controller.finish(with: 1)
        }
        let queue = TestQueue()
        let recorder = Recorder<(Int, Int)>()
        handle.setValue(Job.zip(cancelling, later.job).perform(on: queue, then: recorder.handler))
        try queue.run()
        #expect(later.startCount == 0)
        #expect(isCancellation(recorder.last?.failure))
        #expect(recorder.count == 1)
    }

    @Test func aJobThatDropsItsControllerFailsItAsAbandoned() {
        let dropping = Job<String> { _ in }
        #expect(outcome(of: Job.zip(Job.succeeded(1), dropping))?.failure as? JobError == .abandoned)
    }

    @Test func theJobsStartInArgumentOrderAndPerformingItAgainRunsThemAgain() throws {
        let starts = LockedValue<[String]>([])
        func starting<T: Sendable>(_ name: String, _ value: T) -> Job<T> {
            Job { controller in
                starts.withValue { $0.append(name) }
                controller.finish(with: value)
            }
        }
        let zipped = Job.zip(starting("a", 1), starting("b", "two"), starting("c", 3.0))
        let queue = TestQueue()
        let recorder = Recorder<(Int, String, Double)>()
        zipped.perform(on: queue, then: recorder.handler)
        try queue.run()
        zipped.perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(starts.value == ["a", "b", "c", "a", "b", "c"])
        #expect(try recorder.outcomes.map { try $0.get().1 } == ["two", "two"])
    }

    @Test func twoFailuresAtTheSameInstantFailItWithEitherByTheSeedTheSameWayEveryTime() throws {
        func failure(seed: UInt64) throws -> Int {
            let queue = TestQueue(ordering: .shuffled(seed: seed))
            let recorder = Recorder<(Int, String)>()
            Job.zip(
                finishing(1, failing: TestError(id: 1), after: .seconds(1)),
                finishing("2", failing: TestError(id: 2), after: .seconds(1))
            )
            .perform(on: queue, then: recorder.handler)
            try queue.advance(by: .seconds(1))
            try #require(recorder.count == 1)
            try #require(queue.isIdle)
            return try #require((recorder.last?.failure as? TestError)?.id)
        }
        let failures = try (0..<64).map { try failure(seed: UInt64($0)) }
        #expect(Set(failures) == [1, 2])
        #expect(try (0..<64).map { try failure(seed: UInt64($0)) } == failures)
    }

    @Test func aZipSaysHowFarItIsAndWhichJobsItWaitsOn() throws {
        let queue = TestQueue()
        let user = ManualJob<User>()
        let avatar = ManualJob<Data>()
        let settings = ManualJob<Int>()
        let handle = Job.zip(user.job.named("user"), avatar.job.named("avatar"), settings.job.named("settings"))
            .named("profile")
            .perform(on: queue) { _ in }
        try queue.run()
        avatar.finish(with: Data())
        try queue.run()
        let snapshot = handle.snapshot()
        #expect(snapshot.kind == .zip(done: 1, running: 2, count: 3))
        #expect(snapshot.title == "profile: zip 1/3")
        #expect(snapshot.children.map(\.line) == ["user (running)", "settings (running)"])
        handle.cancel()
    }

    @Test(.onThreadOfItsOwn) func completesOnceWithEveryValueWhenJobsFinishOnManyThreads() async throws {
        func later<T: Sendable>(_ value: T) -> Job<T> {
            Job { controller in DispatchQueue.global().async { controller.finish(with: value) } }
        }
        for round in 0..<200 {
            let done = DispatchSemaphore(value: 0)
            let recorder = Recorder<(Int, String, [Int])>()
            Job.zip(later(round), later("\(round)"), later([round])).perform(on: DispatchQueue.global()) { outcome in
                recorder.handler(outcome)
                done.signal()
            }
            // Thirty seconds: a CI run with the sanitized pass beside it
            // once kept one round past ten seconds; a lost
            // completion would wait past any bound.
            #expect(await done.signalled(within: 30))
            let values = try #require(recorder.last).get()
            #expect(values.0 == round && values.1 == "\(round)" && values.2 == [round])
            #expect(recorder.count == 1)
        }
    }
}
