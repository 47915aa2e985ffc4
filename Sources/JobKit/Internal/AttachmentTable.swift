import Synchronization

/// The attachments of a standalone performance: its `onCancel` blocks,
/// children and timers, name, detail and failure. Made when the
/// performance first attaches something (``LazyAttachmentTable``), so
/// that one that attaches nothing (an awaited job, a leaf of a transform)
/// is its latch and its handler.
final class AttachmentTable: Sendable {
    private let lock = Lock(AttachmentList())

    /// Keeps `attachment` under `key`, or the next key, if the job whose
    /// outcome `latch` holds has not completed; the latch is read under
    /// the lock, so that the winner, which takes the attachments under it,
    /// sees every attachment kept.
    func attach(_ attachment: Attachment, key: Int?, unless latch: borrowing OutcomeLatch) -> AttachDecision {
        lock.withLock { list in
            switch latch.currentInOrder {
            case .pending:
                list.append(attachment, key: key)
                return .kept
            case .cancelled: return .cancelNow
            case .completed, .failed: return .drop
            }
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
    func takeOnCompletion(keeping failure: (any Error)?) -> [(key: Int, attachment: Attachment)] {
        lock.withLock { $0.takeAttachments(keeping: failure) }
    }

    /// The attachments as they are now, for a snapshot.
    var entries: [(key: Int, attachment: Attachment)] {
        lock.withLock { $0.attachments }
    }
}

/// A performance's ``AttachmentTable``, made on first use.
///
/// Read and made in sequentially consistent order, as the latch is won
/// (``OutcomeLatch/win(_:)``): the winner looks for the table after winning,
/// an attachment makes or finds the table before reading the latch under
/// its lock, so at least one of the two sees the other and no attachment
/// is lost.
struct LazyAttachmentTable: ~Copyable, Sendable {
    /// The table, retained by this reference once made.
    private let reference = Atomic<Unmanaged<AttachmentTable>?>(nil)

    /// The table, if it was made.
    var existing: AttachmentTable? {
        reference.load(ordering: .sequentiallyConsistent)?.takeUnretainedValue()
    }

    /// The table, made now if it was not.
    func made() -> AttachmentTable {
        if let table = existing { return table }
        let made = Unmanaged.passRetained(AttachmentTable())
        let (exchanged, original) = reference.compareExchange(
            expected: nil, desired: made, ordering: .sequentiallyConsistent
        )
        guard !exchanged, let original else { return made.takeUnretainedValue() }
        // Another thread made it first.
        made.release()
        return original.takeUnretainedValue()
    }

    deinit {
        reference.load(ordering: .acquiring)?.release()
    }
}
