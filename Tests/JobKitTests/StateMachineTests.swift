import Dispatch
import JobKitTesting
import Testing

@testable import JobKit

/// The combinators' state machines, event by event, without queues or
/// threads: what each event decides.
@Suite("Group state machine", .timeLimit(.minutes(1)))
struct GroupStateMachineTests {
    typealias Machine = GroupStateMachine<Int>

    private func machine(count: Int, maxConcurrent: Int = .max, policy: FailurePolicy = .failFast) -> Machine {
        Machine(count: count, maxConcurrent: maxConcurrent, failurePolicy: policy, collectsValues: true)
    }

    @Test func startHandsOutTicketsUpToTheLimit() {
        var bounded = machine(count: 5, maxConcurrent: 2)
        guard case .enqueueTickets(2) = bounded.start() else {
            Issue.record("expected 2 tickets")
            return
        }
        var unbounded = machine(count: 5)
        guard case .enqueueTickets(5) = unbounded.start() else {
            Issue.record("expected 5 tickets")
            return
        }
    }

    @Test func emptyOrInvalidGroupsFinishAtStart() {
        var empty = machine(count: 0)
        guard case .finish(.success([])) = empty.start() else {
            Issue.record("expected success")
            return
        }
        var invalid = machine(count: 3, maxConcurrent: 0)
        guard case .finish(.failure(JobError.invalidArgument)) = invalid.start() else {
            Issue.record("expected invalidArgument")
            return
        }
    }

    @Test func aCompletionThatFreesRoomCallsForOneMoreTicket() {
        var group = machine(count: 3, maxConcurrent: 1)
        _ = group.start()
        #expect(group.claim(upTo: 5) == 0..<1)
        // A block that asks for more than the tickets handed out gets nothing.
        #expect(group.claim(upTo: 5).isEmpty)
        guard case .enqueueTicket = group.childCompleted(index: 0, outcome: .success(10)).action else {
            Issue.record("expected one more ticket")
            return
        }
        #expect(group.claim(upTo: 5) == 1..<2)
        guard case .enqueueTicket = group.childCompleted(index: 1, outcome: .success(20)).action else {
            Issue.record("expected one more ticket")
            return
        }
        #expect(group.claim(upTo: 5) == 2..<3)
        guard
            case .finish(.success(let values), let cancelling) = group.childCompleted(index: 2, outcome: .success(30))
                .action
        else {
            Issue.record("expected the group to finish")
            return
        }
        #expect(values == [10, 20, 30])
        #expect(cancelling.isEmpty)
    }

    @Test func aClaimTakesAtMostItsLimit() {
        var group = machine(count: 10)
        _ = group.start()
        #expect(group.claim(upTo: 4) == 0..<4)
        #expect(group.claim(upTo: 4) == 4..<8)
        #expect(group.claim(upTo: 4) == 8..<10)
        #expect(group.claim(upTo: 4).isEmpty)
    }

    @Test func noTicketIsCalledForOnceEveryChildHasOne() {
        var group = machine(count: 2)
        _ = group.start()
        _ = group.claim(upTo: 2)
        guard case .none = group.childCompleted(index: 1, outcome: .success(2)).action else {
            Issue.record("every child has its ticket already")
            return
        }
    }

    @Test func valuesComeInInputOrderWhateverTheCompletionOrder() {
        var group = machine(count: 3)
        _ = group.start()
        _ = group.claim(upTo: 3)
        _ = group.childCompleted(index: 2, outcome: .success(3))
        _ = group.childCompleted(index: 0, outcome: .success(1))
        guard case .finish(.success(let values), _) = group.childCompleted(index: 1, outcome: .success(2)).action else {
            Issue.record("expected the group to finish")
            return
        }
        #expect(values == [1, 2, 3])
    }

    @Test func failFastFinishesAtTheFirstFailureAndCancelsWhatTheOthersAttached() {
        var group = machine(count: 4)
        _ = group.start()
        #expect(group.claim(upTo: 3) == 0..<3)
        for index in [0, 2] { #expect(group.attach(.name("child \(index)"), toChild: index, key: nil) == .kept) }
        guard
            case .finish(.failure(let error), let cancelling) = group.childCompleted(
                index: 1, outcome: .failure(TestError(id: 1))
            ).action
        else {
            Issue.record("expected the group to fail")
            return
        }
        #expect(error as? TestError == TestError(id: 1))
        #expect(Set(cancelling.compactMap(\.heldName)) == ["child 0", "child 2"])
        #expect(group.claim(upTo: 1).isEmpty)  // the fourth ticket starts nothing
        guard case .lost = group.childCompleted(index: 0, outcome: .success(0)).action else {
            Issue.record("a completion after the end is dropped")
            return
        }
    }

    @Test func waitForAllFailsWithTheFirstErrorOnceEveryChildCompleted() {
        var group = machine(count: 3, policy: .waitForAll)
        _ = group.start()
        _ = group.claim(upTo: 3)
        guard case .none = group.childCompleted(index: 2, outcome: .failure(TestError(id: 2))).action else {
            Issue.record("expected the group to wait")
            return
        }
        _ = group.childCompleted(index: 0, outcome: .failure(TestError(id: 0)))
        guard
            case .finish(.failure(let error), let cancelling) = group.childCompleted(index: 1, outcome: .success(1))
                .action
        else {
            Issue.record("expected the group to fail")
            return
        }
        #expect(error as? TestError == TestError(id: 2))
        #expect(cancelling.isEmpty)
    }

    @Test func cancelReturnsWhatTheRunningChildrenAttachedOnce() {
        var group = machine(count: 3, maxConcurrent: 2)
        _ = group.start()
        _ = group.claim(upTo: 2)
        #expect(group.attach(.name("first"), toChild: 0, key: nil) == .kept)
        #expect(group.cancel().compactMap(\.heldName) == ["first"])
        #expect(group.cancel().isEmpty)
        #expect(group.claim(upTo: 1).isEmpty)
    }

    @Test func aChildsAttachmentsAreKeptWhileItRunsThenDroppedOrCancelled() {
        var group = machine(count: 3)
        _ = group.start()
        _ = group.claim(upTo: 3)
        #expect(group.attach(.name("zero"), toChild: 0, key: nil) == .kept)
        let key = group.reserveKey(forChild: 1)
        #expect(group.attach(.name("one"), toChild: 1, key: key) == .kept)
        #expect(
            group.progress?.running.map { $0.attachments.compactMap(\.attachment.heldName) } == [["zero"], ["one"], []])
        #expect(group.detach(key, fromChild: 1)?.heldName == "one")
        // A completed child's side table leaves with it; what it attaches
        // later is dropped, even once the group is over.
        #expect(group.childCompleted(index: 0, outcome: .success(0)).detached?.attachments.count == 1)
        #expect(group.attach(.name("late"), toChild: 0, key: nil) == .drop)
        #expect(group.progress?.running.map(\.index) == [1, 2])
        _ = group.cancel()
        #expect(group.attach(.name("late"), toChild: 0, key: nil) == .drop)
        // A child still running when the group was cancelled was cancelled.
        #expect(group.attach(.name("late"), toChild: 2, key: nil) == .cancelNow)
        #expect(group.progress == nil)
    }
}

extension JobKit.Attachment {
    /// The name this attachment holds, if it is one.
    fileprivate var heldName: String? {
        if case .name(let name) = self { name } else { nil }
    }
}

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

    @Test func eachSuccessStartsTheNextStepUntilTheLast() {
        var sequence = SequenceStateMachine(count: 2)
        guard case .startStep(0) = sequence.start() else {
            Issue.record("expected step 0")
            return
        }
        guard case .startStep(1) = sequence.stepCompleted(index: 0, outcome: .success(())).action else {
            Issue.record("expected step 1")
            return
        }
        guard case .finish = sequence.stepCompleted(index: 1, outcome: .success(())).action else {
            Issue.record("expected finish")
            return
        }
        #expect(sequence.isOver)
    }

    @Test func aFailureFailsOnceAndLaterEventsDoNothing() {
        var sequence = SequenceStateMachine(count: 3)
        _ = sequence.start()
        guard case .fail(let error) = sequence.stepCompleted(index: 0, outcome: .failure(TestError(id: 7))).action
        else {
            Issue.record("expected fail")
            return
        }
        #expect(error as? TestError == TestError(id: 7))
        guard case .none = sequence.cancel() else {
            Issue.record("nothing left to cancel")
            return
        }
        // What the failed step attaches afterwards is dropped: it completed.
        #expect(sequence.attach(.name("late"), toStep: 0, key: nil) == .drop)
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

    @Test func cancelCancelsWhatTheRunningStepAttachedAndDropsItsLaterOutcome() {
        var sequence = SequenceStateMachine(count: 3)
        _ = sequence.start()
        #expect(sequence.attach(.name("step 0"), toStep: 0, key: nil) == .kept)
        guard case .cancelStep(let attachments) = sequence.cancel() else {
            Issue.record("expected cancelStep")
            return
        }
        #expect(attachments.compactMap(\.heldName) == ["step 0"])
        guard case .lost = sequence.stepCompleted(index: 0, outcome: .failure(CancellationError())).action else {
            Issue.record("the cancelled step's outcome is not the sequence's")
            return
        }
        // The step was cancelled: what it attaches now is cancelled at once.
        #expect(sequence.attach(.name("late"), toStep: 0, key: nil) == .cancelNow)
    }

    @Test func aStepsAttachmentsLeaveWithIt() {
        var sequence = SequenceStateMachine(count: 2)
        _ = sequence.start()
        let key = sequence.reserveKey()
        #expect(sequence.attach(.name("grandchild"), toStep: 0, key: key) == .kept)
        #expect(sequence.progress?.attachments.compactMap(\.attachment.heldName) == ["grandchild"])
        #expect(sequence.detach(key, fromStep: 0)?.heldName == "grandchild")
        #expect(sequence.attach(.name("name"), toStep: 0, key: nil) == .kept)
        #expect(sequence.stepCompleted(index: 0, outcome: .success(())).detached?.attachments.count == 1)
        #expect(sequence.progress?.index == 1)
        #expect(sequence.progress?.attachments.isEmpty == true)
        #expect(sequence.attach(.name("late"), toStep: 0, key: nil) == .drop)
        #expect(sequence.detach(0, fromStep: 0) == nil)
    }
}
