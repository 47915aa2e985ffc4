/// The state of one performance of a sequence, as a state machine: each
/// event changes the state and returns the action to take once the lock
/// is released. ``SequenceRun`` holds it under its lock and acts.
///
/// Besides the running step's ``ChildToken``, the sequence is the only
/// place the step's state lives: which step runs, and what it attached
/// (an `onCancel` block, a grandchild, a name).
struct SequenceStateMachine: Sendable {
    /// What the owner does after unlocking.
    enum Action: Sendable {
        /// Start step `index`.
        case startStep(index: Int)
        /// Finish the sequence: every step succeeded.
        case finish
        /// Fail the sequence with `error`.
        case fail(any Error)
        /// Cancel what the running step attached: the sequence was
        /// cancelled.
        case cancelStep([Attachment])
        /// Nothing.
        case none
        /// Nothing, and the step's outcome is dropped: the sequence was
        /// over already, so the step had been cancelled.
        case lost
    }

    private enum State: Sendable {
        case idle
        /// Step `index` runs.
        case running(index: Int)
        case finished
    }

    let count: Int
    private var state = State.idle
    /// What the running step attached.
    private var stepAttachments = AttachmentList()
    /// The steps that completed, all but perhaps the last successfully: a
    /// step from this index on was cancelled with the sequence.
    private var completedCount = 0

    init(count: Int) {
        self.count = count
    }

    /// Whether the sequence is over: finished, failed or cancelled.
    var isOver: Bool {
        if case .finished = state { true } else { false }
    }

    /// The sequence starts.
    mutating func start() -> Action {
        switch state {
        case .idle:
            return startStep(0)
        case .finished:
            return .none
        case .running:
            preconditionFailure("Internal inconsistency: a sequence started twice")
        }
    }

    /// Step `index`, the running one, completed with `outcome`. What it had
    /// attached is returned, to be released after unlocking.
    mutating func stepCompleted(
        index: Int,
        outcome: Result<Void, any Error>
    ) -> (action: Action, detached: AttachmentList?) {
        switch state {
        case .running(let running):
            precondition(running == index, "Internal inconsistency: step \(index) completed while \(running) ran")
            completedCount += 1
            let detached = stepAttachments.attachments.isEmpty ? nil : stepAttachments
            stepAttachments = AttachmentList()
            switch outcome {
            case .success:
                return (startStep(index + 1), detached)
            case .failure(let error):
                state = .finished
                return (.fail(error), detached)
            }
        case .finished:
            return (.lost, nil)  // cancelled meanwhile
        case .idle:
            preconditionFailure("Internal inconsistency: a step completed before the sequence started")
        }
    }

    /// The sequence is cancelled.
    mutating func cancel() -> Action {
        switch state {
        case .idle, .finished:
            state = .finished
            return .none
        case .running:
            state = .finished
            defer { stepAttachments = AttachmentList() }
            return .cancelStep(stepAttachments.attachments.map(\.attachment))
        }
    }

    /// The step to run now: `nil` once the sequence is over.
    var currentStep: Int? {
        guard case .running(let index) = state else { return nil }
        return index
    }

    /// Keeps `attachment` for step `index`, under `key` or the step's next
    /// key.
    mutating func attach(_ attachment: Attachment, toStep index: Int, key: Int?) -> AttachDecision {
        if index < completedCount { return .drop }
        guard case .running = state else { return .cancelNow }
        stepAttachments.append(attachment, key: key)
        return .kept
    }

    /// A key for an attachment of the running step, to be attached with it
    /// later.
    mutating func reserveKey() -> Int {
        stepAttachments.reserveKey()
    }

    /// Forgets the attachment `key` of step `index`; returned, to be
    /// released after unlocking.
    mutating func detach(_ key: Int, fromStep index: Int) -> Attachment? {
        guard case .running(let running) = state, running == index else { return nil }
        return stepAttachments.remove(key)
    }

    /// The running step and what it attached; `nil` before the sequence
    /// started and once it is over.
    var progress: (index: Int, attachments: [(key: Int, attachment: Attachment)])? {
        guard case .running(let index) = state else { return nil }
        return (index, stepAttachments.attachments)
    }

    private mutating func startStep(_ index: Int) -> Action {
        guard index < count else {
            state = .finished
            return .finish
        }
        state = .running(index: index)
        return .startStep(index: index)
    }
}
