import Synchronization

/// The attachments of a running job: its `onCancel` blocks, children and
/// timers, name, detail and (for a standalone performance) failure. Made
/// when the job first attaches something (``LazyReference``), so that one
/// that attaches nothing (an awaited job, a leaf, most of a group's
/// children) is its latch and its handler.
final class AttachmentTable: Sendable {
    private let lock = Lock(AttachmentList())

    /// Keeps `attachment` under `key`, or the next key, if `decide`, asked
    /// under the lock, says so: the owner's completion takes the
    /// attachments under the same lock, so an attachment that `decide` lets
    /// in is taken with the others.
    func attach(_ attachment: Attachment, key: Int?, deciding decide: () -> AttachDecision) -> AttachDecision {
        lock.withLock { list in
            let decision = decide()
            if decision == .kept { list.append(attachment, key: key) }
            return decision
        }
    }

    /// A key for an attachment to be kept later.
    func reserveKey() -> Int {
        lock.withLock { $0.reserveKey() }
    }

    /// Removes the attachment kept under `key` (a child finished) and
    /// returns it, to be released outside the lock.
    func detach(_ key: Int) -> Attachment? {
        lock.withLock { $0.remove(key) }
    }

    /// Takes every attachment out, for the job completed, keeping what its
    /// snapshots still show: its names, and `failure`, if it failed.
    func takeOnCompletion(keeping failure: (any Error)?) -> AttachmentEntries {
        lock.withLock { $0.takeAttachments(keeping: failure) }
    }

    /// Takes every attachment out, keeping none: a group's child or a
    /// sequence's step completed, or its run is over. To be cancelled or
    /// released by the caller, outside the lock.
    func takeAll() -> AttachmentEntries {
        lock.withLock { list in
            // A sequence's next step, in the same table, starts afresh.
            list.stepStart = nil
            return list.attachments.takeAll()
        }
    }

    /// The job goes on to the job that finishes it in its place: see
    /// ``AttachmentList/startStep()``.
    func startStep() {
        let dropped = lock.withLock { $0.startStep() }
        _ = dropped  // released here, outside the lock
    }

    /// Performs `child` on `queue` as a child of the job this table is
    /// the attachments of: `keep` keeps it under a key of its own (or
    /// cancels or drops it, as the job stands), and it leaves this table
    /// when it completes. `handler` is called on the thread that completes
    /// it, or through the queue if `hopsToQueue`. Its body runs on this
    /// thread, now, if `startsHere` (the caller runs on `queue`: a job's
    /// body), or else through the queue. `makeToken`, if any, makes the
    /// child's state and its controllers' token, in place of this
    /// generic code (``JobState/MakeToken``). The child's handler holds
    /// this table, not the job's controllers: a body that dropped its
    /// controllers is abandoned even while a child it started runs.
    func perform<Child>(
        _ child: Job<Child>,
        on queue: any JobQueue,
        hopsToQueue: Bool,
        startsHere: Bool,
        making makeToken: JobState<Child>.MakeToken?,
        keep: (Attachment, _ key: Int) -> Void,
        then handler: @escaping @Sendable (Result<Child, any Error>) -> Void
    ) -> JobState<Child> {
        let key = reserveKey()
        if let makeToken {
            // The child leaves this table through its token, as its own
            // outcome comes: its handler needs no wrapper.
            let token = makeToken(queue, handler)
            token.parent = ChildLink(table: self, key: key)
            keep(.node(token.state), key)
            if startsHere {
                token.state.startHere(child.body, controlledBy: token)
            } else {
                token.state.start(child.body, controlledBy: token)
            }
            return token.state
        }
        let state = JobState<Child>(queue: queue, hopsToQueue: hopsToQueue) { [self] outcome in
            let detached = detach(key)
            _ = detached  // released here, outside the lock
            handler(outcome)
        }
        keep(.node(state), key)
        if startsHere {
            state.startHere(child.body)
        } else {
            state.start(child.body)
        }
        return state
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
