extension JobSnapshot {
    /// A snapshot of a job in `state` that holds `attachments`: its name,
    /// its detail (asked now; else its task's status) and what its nodes
    /// describe.
    init(state: State, attachments: [(key: Int, attachment: Attachment)]) {
        self.init(state: state)
        var taskStatus: (@Sendable () -> String)?
        defer { if detail == nil, let taskStatus { detail = taskStatus() } }
        for (_, attachment) in attachments {
            switch attachment {
            case .onCancel: break
            case .node(let node): node.describe(into: &self)
            case .name(let name): if self.name == nil { self.name = name }
            case .detail(let describe): self.detail = describe()
            case .taskStatus(let describe): taskStatus = describe
            case .failure: break
            }
        }
    }

    /// A snapshot of a job in `state` whose table holds `entries`. What it
    /// attached from the step it runs in its place on (a `then`'s next
    /// job, the latest step of a loop written as recursion) shows as its
    /// child while it runs, as it would if that step ran as one; a
    /// completed job shows what it had before.
    init(state: State, entries: AttachmentTable.Entries) {
        guard let stepStart = entries.stepStart else {
            self.init(state: state, attachments: entries.attachments)
            return
        }
        self.init(state: state, attachments: entries.attachments.filter { $0.key < stepStart })
        if state.isPending {
            let step = entries.attachments.filter { $0.key >= stepStart }
            children.append(SnapshotWalk.child { JobSnapshot(state: state, attachments: step).collapsingWrapper() })
        }
    }

    /// This snapshot as a reader wants it. A pending job that is nothing
    /// but a wrapper around the one child it runs (`then`, `map`,
    /// `recover`, `mapError`, unnamed) shows as that child; a pending job
    /// that waits on one anonymous job, with nothing to say and no
    /// children, shows without it (an uploader's request under "upload
    /// photo-1.jpg"): it is where that job is stuck.
    func collapsingWrapper() -> JobSnapshot {
        guard state.isPending, kind == nil, children.count == 1 else { return self }
        if name == nil && detail == nil { return children[0] }
        var snapshot = self
        if children[0].isAnonymousLeaf { snapshot.children = [] }
        return snapshot
    }
}
