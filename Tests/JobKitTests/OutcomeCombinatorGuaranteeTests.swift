import Dispatch
import JobKit
import JobKitTesting
import TestSupport
import Testing

@Suite("race, firstSuccess and collectOutcomes: the core's guarantees", .timeLimit(.minutes(1)))
struct OutcomeCombinatorGuaranteeTests {
    @Test func aJobThatDropsItsControllerIsAFailureLikeAnyOther() throws {
        let dropping = Job<Int> { _ in }
        let outcomes = try #require(outcome(of: Job.collectOutcomes([dropping, .succeeded(1)]))).get()
        #expect(outcomes.first?.failure as? JobError == .abandoned)
        #expect(try outcomes.last?.get() == 1)
        #expect(try outcome(of: Job.firstSuccess([dropping, .succeeded(2)]))?.get() == 2)
        #expect(outcome(of: Job.race([dropping, .never]))?.failure as? JobError == .abandoned)
    }

    @Test func theErrorsOfACancelledFirstSuccessAreReleasedOutsideItsLock() throws {
        // An error whose deinit takes a snapshot of the job: released under
        // the job's lock, it would take that lock again.
        let handle = LockedValue<JobHandle?>(nil)
        let snapshotsTaken = LockedValue(0)
        let failing = Job<Int> { controller in
            controller.fail(
                with: Probe.snapshotting(handle, counting: snapshotsTaken))
        }
        let waiting = ManualJob<Int>()
        handle.setValue(Job.firstSuccess([failing, waiting.job]).perform(on: ImmediateQueue()) { _ in })
        #expect(snapshotsTaken.value == 0)
        handle.value?.cancel()
        #expect(snapshotsTaken.value == 1)
        #expect(waiting.cancelCount == 1)
    }

    @Test func aRaceReleasesItsJobsOnceItIsOver() throws {
        weak var released: Tracked?
        let queue = TestQueue()
        do {
            let tracked = Tracked()
            released = tracked
            let loser = Job<Int> { controller in
                withExtendedLifetime(tracked) {}
                controller.onCancel { withExtendedLifetime(controller) {} }
            }
            Job.race([.succeeded(1), loser]).perform(on: queue) { _ in }
        }
        try queue.run()
        #expect(released == nil)
    }
}
