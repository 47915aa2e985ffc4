import Synchronization

/// The attachments of a running job: its `onCancel` blocks, children and
/// timers, name, detail and (for a standalone performance) failure. Made
/// when the job first attaches something (``LazyReference``), so that one
/// that attaches nothing (an awaited job, a leaf, most of a group's
/// children) is its latch and its handler.
final class AttachmentTable: Sendable {
    private let lock = Lock(AttachmentList())
    /// Whether the table holds nothing and a step has started: a step's
    /// start then has nothing to do (``startStep()``). Written under the
    /// lock after every change, read without it.
    private let isQuietStep = Atomic<Bool>(false)

    /// Changes the list under the lock, and says after whether it is a
    /// quiet step.
    @inline(__always)
    private func change<Result: Sendable>(_ body: (inout AttachmentList) -> Result) -> Result {
        lock.withLock { list in
            let result = body(&list)
            isQuietStep.store(list.attachments.isEmpty && list.stepStart != nil, ordering: .relaxed)
            return result
        }
    }

    /// Keeps `attachment` under `key`, or the next key, if `decide`, asked
    /// under the lock, says so: the owner's completion takes the
    /// attachments under the same lock, so an attachment that `decide` lets
    /// in is taken with the others.
    /// - Returns: What `decide` said, and the key `attachment` is kept
    ///   under, if it is.
    @inline(__always)
    func attach(
        _ attachment: Attachment, key: Int?, deciding decide: () -> AttachDecision
    ) -> (decision: AttachDecision, key: Int?) {
        change { list in
            let decision = decide()
            guard decision == .kept else { return (decision, nil) }
            return (decision, list.append(attachment, key: key))
        }
    }

    /// A key for an attachment to be kept later.
    func reserveKey() -> Int {
        lock.withLock { $0.reserveKey() }
    }

    /// Removes the attachment kept under `key` (a child finished) and
    /// returns it, to be released outside the lock.
    func detach(_ key: Int) -> Attachment? {
        change { $0.remove(key) }
    }

    /// Takes every attachment out, for the job completed, keeping what its
    /// snapshots still show: its names, and `failure`, if it failed.
    func takeOnCompletion(keeping failure: (any Error)?) -> AttachmentEntries {
        change { $0.takeAttachments(keeping: failure) }
    }

    /// Takes every attachment out, keeping none: a group's child or a
    /// sequence's step completed, or its run is over. To be cancelled or
    /// released by the caller, outside the lock.
    func takeAll() -> AttachmentEntries {
        change { list in
            // A sequence's next step, in the same table, starts afresh.
            list.stepStart = nil
            return list.attachments.takeAll()
        }
    }

    /// The job goes on to the job that finishes it in its place: see
    /// ``AttachmentList/startStep()``.
    /// Most loops attach nothing of their own to their steps (the step
    /// that ends left with its child): their steps start without the lock.
    func startStep() {
        if isQuietStep.load(ordering: .relaxed) { return }
        let dropped = change { $0.startStep() }
        _ = dropped  // released here, outside the lock
    }

    /// Performs `child` on `queue` as a child of the job this table is
    /// the attachments of: `keep` keeps it under the key it is given, or a
    /// new one if none, and returns that key (or cancels or drops it, as
    /// the job stands, and returns `nil`), and it leaves this table
    /// when it completes. `handler` is called on the thread that completes
    /// it, or through the queue if `hopsToQueue`. Its body runs on this
    /// thread, now, if `startsHere` (the caller runs on `queue`: a job's
    /// body), or else through the queue. The child's handler holds
    /// this table, not the job's controllers: a body that dropped its
    /// controllers is abandoned even while a child it started runs.
    func perform<Child>(
        _ child: Job<Child>,
        on queue: any JobQueue,
        hopsToQueue: Bool,
        startsHere: Bool,
        keep: (Attachment, _ key: Int?) -> Int?,
        then handler: @escaping @Sendable (Result<Child, any Error>) -> Void
    ) -> JobState<Child> {
        let key = reserveKey()
        let state = JobState<Child>(queue: queue, hopsToQueue: hopsToQueue) { [self] outcome in
            let detached = detach(key)
            _ = detached  // released here, outside the lock
            handler(outcome)
        }
        _ = keep(.node(state), key)
        if startsHere {
            state.startHere(child.body)
        } else {
            state.start(child.body)
        }
        return state
    }

    /// ``perform(_:on:hopsToQueue:startsHere:keep:then:)`` for a child
    /// whose state and controllers' token `makeToken` makes, in place of
    /// this generic code (``JobState/MakeToken``), and whose handler is
    /// called on the thread that completes it. The child leaves this table
    /// through its token, as its own outcome comes: its handler needs no
    /// wrapper, and its key is known once it is kept (one lock, not two).
    /// - Returns: The child's token, which the caller releases.
    func perform<Child>(
        _ child: Job<Child>,
        on queue: any JobQueue,
        startsHere: Bool,
        making makeToken: JobState<Child>.MakeToken,
        keep: (Attachment, _ key: Int?) -> Int?,
        then handler: @escaping @Sendable (Result<Child, any Error>) -> Void
    ) -> ChildStateToken<Child> {
        let token = makeToken(queue, handler)
        token.withState { state in
            if let key = keep(.node(state), nil) {
                token.kept(in: self, key: key)
            }
            if startsHere {
                state.startHere(child.body, controlledBy: token)
            } else {
                state.start(child.body, controlledBy: token)
            }
        }
        return token
    }

    /// What a snapshot reads of a table.
    struct Entries: Sendable {
        /// The attachments as they are now.
        var attachments: [(key: Int, attachment: Attachment)] = []
        /// The first key of the step the job runs in its place
        /// (``AttachmentList/stepStart``).
        var stepStart: Int?
    }

    /// The attachments as they are now, for a snapshot.
    var entries: Entries {
        lock.withLock { Entries(attachments: Array($0.attachments), stepStart: $0.stepStart) }
    }
}
