/// How a snapshot of a job nested to any depth is taken with a flat stack,
/// and stays a tree a reader (and a recursive walk over it) can take.
///
/// A snapshot describes a job, and each child it waits on inside that
/// description: one level of recursion per level of nesting, a few
/// frames and a kilobyte or two of stack each. Past ``segmentDepth``
/// levels, a child is not described at once: a placeholder stands in for
/// it, and the child is described once the recursion has unwound, from
/// level 0 again (``take(_:)``). So the stack holds one segment of
/// ``segmentDepth`` levels at a time, however deep the tree.
///
/// The snapshot keeps the segments down to ``keptDepth`` levels, where a
/// placeholder's child is grafted whole if it ends within one more
/// segment. Below a deeper one, the segments between are dropped, and the
/// last segment of each path down, the one with the jobs the tree waits
/// on, hangs below a job that says how many levels are not shown. Where
/// the levels dropped are all jobs that show as their child (`map`,
/// `then`, unnamed), no such job shows: nothing was lost. A tree of a
/// usual depth is described in one recursion, as before.
struct SnapshotWalk {
    /// The most levels described in one recursion.
    static let segmentDepth = 32
    /// How deep a deferred child is kept whole, with its segment: deeper
    /// ones are kept only if their segment is the last on its path.
    static let keptDepth = 3 * segmentDepth

    /// A child described later, and where it came from. Its placeholder's
    /// number is its place in ``deferred``.
    private struct Deferred {
        /// Describes the child, from level 0.
        let describe: () -> JobSnapshot
        /// The kept placeholder this child is below, or its own.
        let top: Int
        /// How deep the child is in the tree (the job a snapshot is taken
        /// of is at level 0).
        let level: Int
        /// Whether a job among them showed (named, a combinator, with a
        /// detail): then a job says they are not shown.
        var droppedShown: Bool

        /// Whether its segment is kept whole, whatever is below it.
        var isKept: Bool { level < SnapshotWalk.keptDepth }
    }

    /// Levels described in the segment being described now.
    private var depth = 0
    /// Children to describe once the segment is done.
    private var deferred: [Deferred] = []
    /// The child being described from level 0, if one is.
    private var current: Deferred?
    /// Whether a snapshot is being taken on this thread.
    private var isTaking = false
    /// What several jobs wait on that was described already (a shared
    /// job's run), held until the walk ends, so that no other object
    /// takes its identifier meanwhile.
    private var described: [ObjectIdentifier: AnyObject] = [:]

    /// Whether `shared`, which several jobs may wait on (a shared job's
    /// run), is met for the first time in this walk. Describe it under the
    /// first job only: under every job that waits on it, a run that waits
    /// on itself would be described without end, and runs shared in layers
    /// a number of times that doubles with each layer.
    static func isFirstVisit(to shared: AnyObject) -> Bool {
        let walk = Trampoline.snapshotWalk
        guard walk.pointee.isTaking else { return true }
        return walk.pointee.described.updateValue(shared, forKey: ObjectIdentifier(shared)) == nil
    }

    /// A snapshot made by `root`, with the children past ``segmentDepth``
    /// levels described one segment at a time. A snapshot taken while one
    /// is (by an `onDescribe` block) is a walk of its own.
    static func take(_ root: () -> JobSnapshot) -> JobSnapshot {
        let walk = Trampoline.snapshotWalk
        let outer = walk.pointee
        walk.pointee = SnapshotWalk()
        walk.pointee.isTaking = true
        defer {
            // The outer walk is back before this one's closures go, and
            // with them perhaps a job whose cleanup takes a snapshot.
            let done = walk.pointee
            walk.pointee = outer
            _ = done
        }

        var tree = root()
        var grafts: [Int: Graft] = [:]
        var id = 0
        while id < walk.pointee.deferred.count {
            let child = walk.pointee.deferred[id]
            defer { id += 1 }
            // The levels from the kept placeholder's down to this child.
            let dropped = child.level - walk.pointee.deferred[child.top].level
            walk.pointee.current = child
            walk.pointee.depth = 0
            let before = walk.pointee.deferred.count
            let segment = child.describe()
            let deeper = before..<walk.pointee.deferred.count
            if !deeper.isEmpty && !child.isKept {
                // A segment between: dropped, its deeper children described
                // below it. Unless it shows as nothing but its one deeper
                // child, a job says levels are not shown, and the jobs it
                // waits on in the segment itself show below that job.
                if segment.placeholder == nil {
                    for index in deeper { walk.pointee.deferred[index].droppedShown = true }
                    let waitedOn = segment.pendingLeaves.compactMap(\.last).filter { $0.placeholder == nil }
                    if !waitedOn.isEmpty {
                        grafts[child.top, default: Graft()].add(waitedOn, dropped: dropped)
                    }
                }
                continue
            }
            if child.top == id {
                grafts[id, default: Graft()].whole = segment
            } else {
                grafts[child.top, default: Graft()].add([segment], dropped: dropped, shown: child.droppedShown)
            }
        }
        tree.graft(grafts)
        return tree
    }

    /// A child of the job being described: `describe` makes it now, one
    /// level deeper, or later, past ``segmentDepth`` levels, when this
    /// returns a placeholder for it.
    static func child(_ describe: @escaping () -> JobSnapshot) -> JobSnapshot {
        let walk = Trampoline.snapshotWalk
        guard walk.pointee.isTaking else {
            // Taken outside a walk: a snapshot of its own.
            return take(describe)
        }
        guard walk.pointee.depth >= segmentDepth else {
            walk.pointee.depth += 1
            defer { walk.pointee.depth -= 1 }
            return describe()
        }
        let id = walk.pointee.deferred.count
        let above = walk.pointee.current
        // A segment's first job is at depth 0, and this child one level
        // below the job at `depth`.
        let level = (above?.level ?? 0) + walk.pointee.depth + 1
        // Its placeholder is kept, or the segment it is in is dropped
        // (it has this deeper child) and the placeholder above it stays.
        let child =
            if let above, !above.isKept {
                Deferred(describe: describe, top: above.top, level: level, droppedShown: above.droppedShown)
            } else {
                Deferred(describe: describe, top: id, level: level, droppedShown: false)
            }
        walk.pointee.deferred.append(child)
        return JobSnapshot(placeholder: id)
    }
}

/// What takes a kept placeholder's place: its child whole, or the last
/// segments below it (and the jobs waited on in the segments between).
private struct Graft {
    var whole: JobSnapshot?
    var below: [JobSnapshot] = []
    /// The most levels dropped above one of `below`.
    var levels = 0
    /// Whether a job among the levels dropped showed.
    var shown = false

    /// Adds the last segment of a path, or the jobs waited on in a
    /// segment left out, `dropped` levels below the placeholder, where
    /// the levels left out `shown` a job.
    mutating func add(_ jobs: [JobSnapshot], dropped: Int, shown: Bool = true) {
        below.append(contentsOf: jobs)
        levels = max(levels, dropped)
        self.shown = self.shown || shown
    }

    var snapshot: JobSnapshot {
        if let whole { return whole }
        // Only jobs that show as their child were dropped.
        if !shown && below.count == 1 { return below[0] }
        var gap = JobSnapshot(state: .running)
        gap.name = "… \(levels) levels not shown"
        gap.children = below
        return gap
    }
}

extension JobSnapshot {
    /// A placeholder for a child described later (``SnapshotWalk``).
    fileprivate init(placeholder id: Int) {
        self.init(state: .running)
        placeholder = id
        // Not an anonymous leaf, which a named parent leaves out.
        detail = "…"
    }

    /// Puts each placeholder's child, or the segments below it, in its
    /// place, and leaves out a child that turned out an anonymous leaf
    /// under a named job, as describing it at once would have.
    fileprivate mutating func graft(_ grafts: [Int: Graft]) {
        guard !grafts.isEmpty else { return }
        // What takes a placeholder's place may be another (a segment of
        // jobs that show as their child), and holds more.
        while let id = placeholder, let graft = grafts[id] { self = graft.snapshot }
        var grafted = false
        for index in children.indices {
            grafted = grafted || children[index].placeholder != nil
            children[index].graft(grafts)
        }
        if grafted { self = collapsingWrapper() }
    }
}
