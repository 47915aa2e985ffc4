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

    /// A child described later, and where it came from.
    fileprivate struct Deferred {
        /// The placeholder's number.
        let id: Int
        /// Describes the child, from level 0.
        let describe: () -> JobSnapshot
        /// The placeholder of the first segment this child is below.
        let top: Int
        /// How deep the child is in the tree (the job a snapshot is taken
        /// of is at level 0), and how deep that placeholder is.
        let level: Int
        let topLevel: Int
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
    private var nextID = 0
    /// The child being described from level 0, if one is.
    private var current: Deferred?
    /// Whether a snapshot is being taken on this thread.
    private var isTaking = false

    /// A snapshot made by `root`, with the children past ``segmentDepth``
    /// levels described one segment at a time. A snapshot taken while one
    /// is (by an `onDescribe` block) is a walk of its own.
    static func take(_ root: () -> JobSnapshot) -> JobSnapshot {
        let walk = Trampoline.snapshotWalk
        let outer = walk.pointee
        walk.pointee = SnapshotWalk()
        walk.pointee.isTaking = true
        defer { walk.pointee = outer }

        var tree = root()
        var grafts: [Int: Graft] = [:]
        var next = 0
        while next < walk.pointee.deferred.count {
            let child = walk.pointee.deferred[next]
            next += 1
            walk.pointee.current = child
            walk.pointee.depth = 0
            let before = walk.pointee.deferred.count
            let segment = child.describe()
            let deeper = before..<walk.pointee.deferred.count
            if !deeper.isEmpty && !child.isKept {
                // A segment between: dropped, its deeper children described
                // below it. Unless it shows as nothing but its one deeper
                // child, a job says levels are not shown.
                if segment.placeholder == nil {
                    for index in deeper { walk.pointee.deferred[index].droppedShown = true }
                }
                continue
            }
            if child.top == child.id {
                grafts[child.id] = .whole(segment)
            } else {
                grafts[child.top, default: .below(levels: 0, shown: false, [])].add(segment, after: child)
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
        let id = walk.pointee.nextID
        walk.pointee.nextID += 1
        let above = walk.pointee.current
        // A segment's first job is at depth 0, and this child one level
        // below the job at `depth`.
        let level = (above?.level ?? 0) + walk.pointee.depth + 1
        // Its placeholder is kept, or the segment it is in is dropped
        // (it has this deeper child) and the placeholder above it stays.
        let child =
            if let above, !above.isKept {
                Deferred(
                    id: id, describe: describe, top: above.top, level: level, topLevel: above.topLevel,
                    droppedShown: above.droppedShown)
            } else {
                Deferred(id: id, describe: describe, top: id, level: level, topLevel: level, droppedShown: false)
            }
        walk.pointee.deferred.append(child)
        return JobSnapshot(placeholder: id)
    }
}

/// What takes a first-segment placeholder's place.
private enum Graft {
    /// The child, whole.
    case whole(JobSnapshot)
    /// The last segments below it, after `levels` levels dropped.
    case below(levels: Int, shown: Bool, [JobSnapshot])

    mutating func add(_ segment: JobSnapshot, after child: SnapshotWalk.Deferred) {
        guard case .below(let levels, let shown, var segments) = self else { return }
        segments.append(segment)
        // The levels from the placeholder's down to the segment's first.
        let dropped = child.level - child.topLevel
        self = .below(levels: max(levels, dropped), shown: shown || child.droppedShown, segments)
    }

    var snapshot: JobSnapshot {
        switch self {
        case .whole(let child):
            return child
        case .below(_, false, let segments) where segments.count == 1:
            // Only jobs that show as their child were dropped.
            return segments[0]
        case .below(let levels, _, let segments):
            var gap = JobSnapshot(state: .running)
            gap.name = "… \(levels) levels not shown"
            gap.children = segments
            return gap
        }
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
