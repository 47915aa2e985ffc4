/// What a handle or a parent needs of a job, whatever its value type.
protocol JobCancelling: AnyObject, Sendable {
    /// Completes the job with `CancellationError` unless it already completed.
    @discardableResult func cancel() -> Bool
    /// Whether the job has completed, by any means.
    var isCompleted: Bool { get }
    /// The job and the children it waits on, as they are now.
    func snapshot() -> JobSnapshot
}

/// Something a running job holds that is cancelled with it and shows in
/// its snapshot: a child job's state, or a combinator's run (a group's,
/// a sequence's, a timeout's or a retry's timer).
protocol JobNode: AnyObject, Sendable {
    /// The job that holds this node was cancelled.
    func cancelWithOwner()
    /// Adds what this node knows to the snapshot of the job that holds it:
    /// a child job adds itself as a child; a combinator's run says which
    /// combinator the job is, and adds its own children.
    func describe(into owner: inout JobSnapshot)
}

/// What a running performance holds besides its handler, kept in its
/// lock: what to cancel with it, and what its snapshot shows.
enum Attachment: Sendable {
    /// An `onCancel` block.
    case onCancel(@Sendable () -> Void)
    /// A child job or a combinator's run.
    case node(any JobNode)
    /// The name given with `named(_:)`; kept after the job completed.
    case name(String)
    /// What the job says about its progress, asked when a snapshot is taken.
    case detail(@Sendable () -> String)
    /// Where a `Job.task`'s task waits, asked when a snapshot is taken and
    /// shown only when the job has no ``detail(_:)``.
    case taskStatus(@Sendable () -> String)
    /// The error the job failed with (`cancel` aside); kept after it
    /// completed, for its snapshots.
    case failure(any Error)

    /// The job that holds this attachment was cancelled: an `onCancel`
    /// block runs, a node is cancelled, the rest stays as it is.
    func cancelWithOwner() {
        switch self {
        case .onCancel, .node:
            // A child may hold children, and a block cancel jobs of its own
            // (a task's, a bridged job's), a million deep.
            if let level = Trampoline.Level.enter() {
                cancelNow()
                level.leave()
            } else {
                Trampoline.hold { cancelNow() }
            }
        case .name, .detail, .taskStatus, .failure: break
        }
    }

    /// ``cancelWithOwner()``, on this level.
    private func cancelNow() {
        switch self {
        case .onCancel(let run): run()
        case .node(let node): node.cancelWithOwner()
        case .name, .detail, .taskStatus, .failure: break
        }
    }
}

/// What a running job holds besides its latch and its handler: its
/// attachments, each under a key by which a finished child detaches its
/// own. A standalone performance keeps it in an ``AttachmentTable``; a
/// group or a sequence keeps one for each running child that attached
/// something.
///
/// It is deliberately not generic: a lock around a type that depends on a
/// job's `Success` makes the (unspecialized) generic deinit of its owner
/// look up type metadata at run time.
struct AttachmentList: Sendable {
    var attachments = AttachmentEntries()
    var nextKey = 0
    /// The first key of the job's current step, once a `then` or a
    /// `recover` went on to the job that finishes it in its place
    /// (``startStep()``); `nil` before. Snapshots show what was attached
    /// from it on as the job's child: the step it runs.
    var stepStart: Int?
}

/// What becomes of an attachment offered to a job.
enum AttachDecision: Sendable {
    /// It is kept while the job runs.
    case kept
    /// Cancel it now: the job was cancelled.
    case cancelNow
    /// Drop it: the job completed otherwise.
    case drop
}

extension AttachmentList {
    /// Keeps `attachment` under `key`, or under the next key.
    @inline(__always)
    @discardableResult
    mutating func append(_ attachment: Attachment, key: Int?) -> Int {
        let key = key ?? nextKey
        if key == nextKey { nextKey += 1 }
        attachments.append((key: key, attachment: attachment))
        return key
    }

    /// A key for an attachment to be kept later.
    mutating func reserveKey() -> Int {
        defer { nextKey += 1 }
        return nextKey
    }

    /// Removes the attachment kept under `key` and returns it. Children
    /// finish mostly in the order they started, so the search starts from
    /// the end.
    mutating func remove(_ key: Int) -> Attachment? {
        attachments.removeLast(key: key)
    }

    /// The job goes on to the job that finishes it in its place (a `then`'s
    /// next job, a `recover`'s): that job's body reports through the same
    /// controllers, as the next step of a loop. What the step that ends
    /// said about itself (its names and details, kept since the last step
    /// began) goes, so that a loop a million steps long holds one step's
    /// worth. What the job had until its first step went on stays (the
    /// names of the loop as a whole, and its first step's own, which
    /// cannot be told apart), and so does whatever else was attached
    /// (`onCancel` blocks, running children).
    /// - Returns: What went, to be released outside the lock.
    mutating func startStep() -> [Attachment] {
        var dropped: [Attachment] = []
        // Most loops attach nothing of their own to their steps: the step
        // that ends left with its child.
        if let stepStart, !attachments.isEmpty {
            attachments.removeAll { entry in
                guard entry.key >= stepStart else { return false }
                switch entry.attachment {
                case .name, .detail, .taskStatus:
                    dropped.append(entry.attachment)
                    return true
                case .onCancel, .node, .failure:
                    return false
                }
            }
        }
        stepStart = nextKey
        return dropped
    }

    /// Takes every attachment out, for the job has completed, and keeps
    /// what snapshots of the completed job still show: its names, and
    /// `failure`, the error it failed with, if any.
    mutating func takeAttachments(keeping failure: (any Error)?) -> AttachmentEntries {
        // Most jobs that attach anything attach one thing, not a name.
        if failure == nil && attachments.isOneThatIsNotAName { return attachments.takeAll() }
        let taken = attachments
        let isName = { (entry: AttachmentEntries.Element) in
            if case .name = entry.attachment { true } else { false }
        }
        // A named job that holds nothing else keeps its list as it is.
        if failure == nil && taken.allSatisfy(isName) { return AttachmentEntries() }
        attachments = AttachmentEntries(taken.filter(isName))
        // Under a key of its own, which no child's detach can name.
        if let failure { attachments.append((key: reserveKey(), attachment: .failure(failure))) }
        return taken
    }
}

/// A job's attachments with their keys, in the order they were attached:
/// the first inline, the others in an array made for the second, as most
/// jobs that attach anything attach one thing (a combinator its run, a
/// leaf its `onCancel` block).
struct AttachmentEntries: Sequence, Sendable {
    typealias Element = (key: Int, attachment: Attachment)

    /// The first entry; `nil` only when there are none.
    private var first: Element?
    /// The entries after the first.
    private var rest: [Element] = []

    init() {}

    init(_ entries: [Element]) {
        first = entries.first
        rest = Array(entries.dropFirst())
    }

    /// Whether there are no entries.
    var isEmpty: Bool { first == nil }

    /// Whether there is one entry, and not a name.
    var isOneThatIsNotAName: Bool {
        switch first {
        case .none, (_, .name)?: false
        case .some: rest.isEmpty
        }
    }

    /// Takes every entry out, leaving none.
    mutating func takeAll() -> AttachmentEntries {
        var taken = AttachmentEntries()
        swap(&self, &taken)
        return taken
    }

    mutating func append(_ entry: Element) {
        if first == nil { first = entry } else { rest.append(entry) }
    }

    /// Removes the last entry under `key` and returns its attachment.
    /// Children finish mostly in the order they started, so the search
    /// starts from the end.
    mutating func removeLast(key: Int) -> Attachment? {
        if let index = rest.lastIndex(where: { $0.key == key }) { return rest.remove(at: index).attachment }
        guard let entry = first, entry.key == key else { return nil }
        removeFirst()
        return entry.attachment
    }

    /// Removes every entry `shouldBeRemoved` says so of.
    mutating func removeAll(where shouldBeRemoved: (Element) -> Bool) {
        rest.removeAll(where: shouldBeRemoved)
        if let entry = first, shouldBeRemoved(entry) { removeFirst() }
    }

    /// The second entry, if any, becomes the first.
    private mutating func removeFirst() {
        first = rest.isEmpty ? nil : rest.removeFirst()
    }

    func makeIterator() -> Iterator {
        Iterator(first: first, rest: rest.makeIterator())
    }

    /// The entries, first to last.
    struct Iterator: IteratorProtocol {
        fileprivate var first: Element?
        fileprivate var rest: IndexingIterator<[Element]>

        mutating func next() -> Element? {
            if let entry = first {
                first = nil
                return entry
            }
            return rest.next()
        }
    }
}
