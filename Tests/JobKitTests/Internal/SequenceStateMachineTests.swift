import Testing

@testable import JobKit

/// The sequence's state machine, event by event, without queues or
/// threads: what each event decides.
@Suite("Sequence state machine", .timeLimit(.minutes(1)))
struct SequenceStateMachineTests {
    @Test func emptySequenceFinishesAtStart() {
        var sequence = SequenceStateMachine(count: 0)
        guard case .finish = sequence.start() else {
            Issue.record("expected finish")
            return
        }
        #expect(sequence.isOver)
    }

    @Test func aSequenceOfMoreStepsThanATokenCanNumberFailsAtStart() {
        var huge = SequenceStateMachine(count: SequenceStateMachine.maxCount + 1)
        guard case .fail(JobError.invalidArgument) = huge.start() else {
            Issue.record("expected invalidArgument")
            return
        }
        #expect(huge.isOver)
    }

    @Test func eachSuccessStartsTheNextStepUntilTheLast() {
        var sequence = SequenceStateMachine(count: 2)
        guard case .startStep(0) = sequence.start() else {
            Issue.record("expected step 0")
            return
        }
        guard case .startStep(1) = sequence.stepCompleted(index: 0, outcome: .success(())) else {
            Issue.record("expected step 1")
            return
        }
        guard case .finish = sequence.stepCompleted(index: 1, outcome: .success(())) else {
            Issue.record("expected finish")
            return
        }
        #expect(sequence.isOver)
    }

    @Test func aFailureFailsOnceAndLaterEventsDoNothing() {
        var sequence = SequenceStateMachine(count: 3)
        _ = sequence.start()
        guard case .fail(let error) = sequence.stepCompleted(index: 0, outcome: .failure(TestError(id: 7)))
        else {
            Issue.record("expected fail")
            return
        }
        #expect(error as? TestError == TestError(id: 7))
        guard case .none = sequence.cancel() else {
            Issue.record("nothing left to cancel")
            return
        }
    }

    @Test func theCurrentStepIsTheOneToRunUntilTheSequenceIsOver() {
        var sequence = SequenceStateMachine(count: 3)
        _ = sequence.start()
        #expect(sequence.currentStep == 0)
        _ = sequence.stepCompleted(index: 0, outcome: .success(()))
        #expect(sequence.currentStep == 1)
        _ = sequence.cancel()
        #expect(sequence.currentStep == nil)
    }

    @Test func cancelCancelsTheRunningStepAndDropsItsLaterOutcome() {
        var sequence = SequenceStateMachine(count: 3)
        _ = sequence.start()
        guard case .cancelStep = sequence.cancel() else {
            Issue.record("expected cancelStep")
            return
        }
        guard case .lost = sequence.stepCompleted(index: 0, outcome: .failure(CancellationError())) else {
            Issue.record("the cancelled step's outcome is not the sequence's")
            return
        }
        #expect(sequence.currentStep == nil)
    }
}
