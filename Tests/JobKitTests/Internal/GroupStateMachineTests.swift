import Dispatch
import JobKitTesting
import Testing

@testable import JobKit

/// The group's state machine, event by event, without queues or threads:
/// what each event decides.
@Suite("Group state machine", .timeLimit(.minutes(1)))
struct GroupStateMachineTests {
    typealias Machine = GroupStateMachine<Int>

    private func machine(count: Int, maxConcurrent: Int = .max, policy: FailurePolicy = .failFast) -> Machine {
        Machine(count: count, maxConcurrent: maxConcurrent, goal: .everySuccess(policy), collectsValues: true)
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
        guard case .finish(.success(.values([]))) = empty.start() else {
            Issue.record("expected success")
            return
        }
        var invalid = machine(count: 3, maxConcurrent: 0)
        guard case .finish(.failure(JobError.invalidArgument)) = invalid.start() else {
            Issue.record("expected invalidArgument")
            return
        }
    }

    @Test func aGroupOfMoreChildrenThanATokenCanNumberFailsAtStart() {
        var huge = machine(count: Machine.maxCount + 1)
        guard case .finish(.failure(JobError.invalidArgument)) = huge.start() else {
            Issue.record("expected invalidArgument")
            return
        }
        #expect(huge.isOver)
    }

    @Test func aCompletionThatFreesRoomCallsForOneMoreTicket() {
        var group = machine(count: 3, maxConcurrent: 1)
        _ = group.start()
        #expect(group.claim(upTo: 5) == 0..<1)
        // A block that asks for more than the tickets handed out gets nothing.
        #expect(group.claim(upTo: 5).isEmpty)
        guard case .enqueueTicket = group.childCompleted(index: 0, outcome: .success(10)) else {
            Issue.record("expected one more ticket")
            return
        }
        #expect(group.claim(upTo: 5) == 1..<2)
        guard case .enqueueTicket = group.childCompleted(index: 1, outcome: .success(20)) else {
            Issue.record("expected one more ticket")
            return
        }
        #expect(group.claim(upTo: 5) == 2..<3)
        guard
            case .finish(.success(let values), let cancelsRunning) = group.childCompleted(
                index: 2, outcome: .success(30))
        else {
            Issue.record("expected the group to finish")
            return
        }
        #expect(values.values == [10, 20, 30])
        #expect(!cancelsRunning)
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
        guard case .none = group.childCompleted(index: 1, outcome: .success(2)) else {
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
        guard case .finish(.success(let values), _) = group.childCompleted(index: 1, outcome: .success(2)) else {
            Issue.record("expected the group to finish")
            return
        }
        #expect(values.values == [1, 2, 3])
    }

    @Test func failFastFinishesAtTheFirstFailureAndCancelsTheOthers() {
        var group = machine(count: 4)
        _ = group.start()
        #expect(group.claim(upTo: 3) == 0..<3)
        guard
            case .finish(.failure(let error), let cancelsRunning) = group.childCompleted(
                index: 1, outcome: .failure(TestError(id: 1))
            )
        else {
            Issue.record("expected the group to fail")
            return
        }
        #expect(error as? TestError == TestError(id: 1))
        #expect(cancelsRunning)
        // The failed child completed; the others are cancelled.
        #expect(group.hasCompleted(1))
        #expect(!group.hasCompleted(0) && !group.hasCompleted(2))
        #expect(group.claim(upTo: 1).isEmpty)  // the fourth ticket starts nothing
        guard case .lost = group.childCompleted(index: 0, outcome: .success(0)) else {
            Issue.record("a completion after the end is dropped")
            return
        }
    }

    @Test func waitForAllFailsWithTheFirstErrorOnceEveryChildCompleted() {
        var group = machine(count: 3, policy: .waitForAll)
        _ = group.start()
        _ = group.claim(upTo: 3)
        guard case .none = group.childCompleted(index: 2, outcome: .failure(TestError(id: 2))) else {
            Issue.record("expected the group to wait")
            return
        }
        _ = group.childCompleted(index: 0, outcome: .failure(TestError(id: 0)))
        guard
            case .finish(.failure(let error), let cancelsRunning) = group.childCompleted(index: 1, outcome: .success(1))
        else {
            Issue.record("expected the group to fail")
            return
        }
        #expect(error as? TestError == TestError(id: 2))
        #expect(!cancelsRunning)
    }

    @Test func cancelSaysOnceWhetherChildrenWereRunning() {
        var group = machine(count: 3, maxConcurrent: 2)
        _ = group.start()
        _ = group.claim(upTo: 2)
        let first = group.cancel()
        let second = group.cancel()
        #expect(first && !second)
        #expect(group.claim(upTo: 1).isEmpty)
        var idle = machine(count: 3)
        let cancelledIdle = idle.cancel()
        #expect(!cancelledIdle)
    }

    @Test func failingTheLastRunningChildCancelsNoOne() {
        var group = machine(count: 2, maxConcurrent: 1)
        _ = group.start()
        _ = group.claim(upTo: 1)
        guard
            case .finish(.failure, let cancelsRunning) = group.childCompleted(
                index: 0, outcome: .failure(TestError(id: 0)))
        else {
            Issue.record("expected the group to fail")
            return
        }
        #expect(!cancelsRunning)
    }

    @Test func progressListsTheRunningChildrenInOrderWhileTheGroupRuns() {
        var group = machine(count: 4)
        #expect(group.progress == nil)
        _ = group.start()
        _ = group.claim(upTo: 3)
        _ = group.childCompleted(index: 1, outcome: .success(1))
        #expect(group.progress?.done == 1)
        #expect(group.progress?.running == [0, 2])
        // Completions are kept once the group is over, for its children.
        _ = group.cancel()
        #expect(group.progress == nil)
        #expect(group.hasCompleted(1) && !group.hasCompleted(0))
    }
}
