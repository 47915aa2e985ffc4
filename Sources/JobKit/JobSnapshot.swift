/// A picture of one performance of a job and of the children it is
/// waiting on, taken at one moment: what each is called, where it is, and
/// what it runs.
///
/// Take one with ``JobHandle/snapshot()`` at any time, from any thread,
/// while the tree runs:
///
/// ```swift
/// let snapshot = handle.snapshot()
/// if case .group(let done, let running, let count) = snapshot.kind {
///     print("\(done) of \(count) uploaded, \(running) uploading")
/// }
/// print(snapshot)  // the tree, one job per line
/// ```
///
/// Or ask ``JobHandle/stallReport()`` where a performance that should
/// have completed is stuck:
///
/// ```text
/// 1 job has not completed:
///   publish: sequence 1/2 ▸ group 2/3 ▸ upload video-2 (running, 0 of 18 MB sent)
///
/// publish: sequence 1/2 (running)
/// └─ group 2/3 (running)
///    └─ upload video-2 (running, 0 of 18 MB sent)  ◀
/// ```
///
/// A snapshot lists the children that have not completed: a group's and a
/// sequence's completed children are counted in ``kind``, not listed.
/// Jobs built with `then`, `map`, `recover` or `mapError` show as the job
/// they are running, and a job shows the name given to it with
/// ``Job/named(_:)`` once it has started.
///
/// A snapshot is taken with a flat stack however deep the jobs nest. A
/// tree more than about a hundred levels deep shows its first hundred
/// levels and, below them, under a job that counts the levels left out
/// ("… 99891 levels not shown"), the last levels of each path down and
/// every job it waits on. Where the levels left out are all jobs that
/// show as their child (`map` of `map` …), nothing is left out, and no
/// job counts them.
public struct JobSnapshot: Sendable, CustomStringConvertible {
    /// Where a job is.
    public enum State: Sendable, CustomStringConvertible {
        /// Enqueued on its queue; its closure has not run yet.
        case waitingToStart
        /// Its closure ran and it has not completed.
        case running
        /// A `retry` whose attempt number `attempt - 1` failed with
        /// `error`: it waits `delay` before attempt number `attempt`.
        case waitingToRetry(attempt: Int, delay: Duration, after: any Error)
        /// A loop (`repeated`, `collectPages`) whose step number `step - 1`
        /// finished: it waits `delay` before step number `step`.
        case waitingToRepeat(step: Int, delay: Duration)
        /// Finished with a value.
        case finished
        /// Failed with `error`.
        case failed(any Error)
        /// Cancelled.
        case cancelled

        /// Whether the job has not completed yet.
        public var isPending: Bool {
            switch self {
            case .waitingToStart, .running, .waitingToRetry, .waitingToRepeat: true
            case .finished, .failed, .cancelled: false
            }
        }

        /// The state in a few words: "running", "failed: timedOut".
        public var description: String {
            switch self {
            case .waitingToStart: "waiting to start"
            case .running: "running"
            case .waitingToRetry(let attempt, let delay, let error):
                "waiting \(delay.formatted) before attempt \(attempt), after: \(error)"
            case .waitingToRepeat(let step, let delay):
                "waiting \(delay.formatted) before step \(step)"
            case .finished: "finished"
            case .failed(let error): "failed: \(error)"
            case .cancelled: "cancelled"
            }
        }
    }

    /// Which combinator a job is, with its progress.
    public enum Kind: Sendable, Equatable, CustomStringConvertible {
        /// A `group` or `collect` of `count` children: `done` completed,
        /// `running` started and not completed, the rest not started.
        case group(done: Int, running: Int, count: Int)
        /// A `sequence` running step number `step` (from 1) of `count`.
        case sequence(step: Int, count: Int)
        /// A `timeout(after:)` of `duration`.
        case timeout(Duration)
        /// A `retry` on attempt number `attempt` (from 1) of at most
        /// `attempts`.
        case retry(attempt: Int, attempts: Int)
        /// A `zip` of `count` jobs: `done` finished, `running` started and
        /// not completed.
        case zip(done: Int, running: Int, count: Int)
        /// A `race` of `count` jobs, `running` of them started (no job has
        /// completed: the first to complete ends the race).
        case race(running: Int, count: Int)
        /// A `firstSuccess` of `count` jobs: `failed` failed, `running`
        /// started and not completed, the rest not started (none has
        /// succeeded: the first success ends it).
        case firstSuccess(failed: Int, running: Int, count: Int)
        /// A `sleep(for:)` of `duration`.
        case sleep(Duration)
        /// A loop (`repeated(while:delay:)`, `collectPages(from:_:)`) on
        /// step number `step` (from 1): `step - 1` steps finished before it.
        case loop(step: Int)
        /// A performance of a ``JobSource``'s job, waiting for the source
        /// to complete.
        case source
        /// A performance of a ``Job/shared(keeping:)`` job, waiting for
        /// the run it shares with `consumers - 1` other performances (the
        /// run shows as its child).
        case shared(consumers: Int)

        /// The kind and its progress in a few words: "group 7/9",
        /// "sequence 2/3", "timeout 30 s", "retry 2/3", "zip 1/2", "race of 2",
        /// "first success, 1/3 failed", "sleep 5 s", "loop, step 502",
        /// "source", "shared by 2".
        public var description: String {
            switch self {
            case .group(let done, _, let count): "group \(done)/\(count)"
            case .sequence(let step, let count): "sequence \(step)/\(count)"
            case .timeout(let duration): "timeout \(duration.formatted)"
            case .retry(let attempt, let attempts): "retry \(attempt)/\(attempts)"
            case .zip(let done, _, let count): "zip \(done)/\(count)"
            case .race(_, let count): "race of \(count)"
            case .firstSuccess(let failed, _, let count): "first success, \(failed)/\(count) failed"
            case .sleep(let duration): "sleep \(duration.formatted)"
            case .loop(let step): "loop, step \(step)"
            case .source: "source"
            case .shared(let consumers): "shared by \(consumers)"
            }
        }
    }

    /// The name given with ``Job/named(_:)``, if any.
    public var name: String?
    /// The combinator the job is, if it is one.
    public var kind: Kind?
    /// Where the job is.
    public var state: State
    /// What the job says about its progress (``Job/Controller/onDescribe(_:)``):
    /// "0 of 18 MB sent".
    public var detail: String?
    /// The children the job is waiting on, in the order they started.
    public var children: [JobSnapshot]
    /// Set on a child still to describe, while a snapshot is taken
    /// (``SnapshotWalk``).
    var placeholder: Int?

    /// A snapshot of a job in `state`, with nothing else known yet.
    init(state: State) {
        self.state = state
        self.children = []
    }

    /// How the job is shown: its name, else its kind ("group 7/9"), else
    /// "job".
    public var title: String {
        switch (name, kind) {
        case (let name?, let kind?): "\(name): \(kind)"
        case (let name?, nil): name
        case (nil, let kind?): kind.description
        case (nil, nil): "job"
        }
    }

    /// The jobs that have not completed and are not waiting on a child:
    /// where the tree is stuck, if it is. Each is a path from this job
    /// down, `[self, child, ..., leaf]`. Empty once this job has completed,
    /// even if a child it cancelled has not completed yet.
    public var pendingLeaves: [[JobSnapshot]] {
        guard state.isPending else { return [] }
        var paths: [[JobSnapshot]] = []
        var path: [JobSnapshot] = []
        collectPendingLeaves(into: &paths, path: &path)
        return paths
    }

    private func collectPendingLeaves(into paths: inout [[JobSnapshot]], path: inout [JobSnapshot]) {
        path.append(self)
        defer { path.removeLast() }
        let pendingChildren = children.filter(\.state.isPending)
        if pendingChildren.isEmpty {
            // Only pending jobs are reached: this one, or a pending child.
            paths.append(path)
            return
        }
        for child in pendingChildren { child.collectPendingLeaves(into: &paths, path: &path) }
    }

    /// Whether this is a pending job with no name, kind, detail or
    /// children: one that says nothing about itself.
    var isAnonymousLeaf: Bool {
        state.isPending && name == nil && kind == nil && detail == nil && children.isEmpty
    }

    /// The job in one line, as the last element of a path: "upload video-2
    /// (running, 0 of 18 MB sent)".
    public var line: String {
        "\(title) (\(state)\(detail.map { ", \($0)" } ?? ""))"
    }

    /// The tree, one job per line, children indented below their parent.
    public var description: String {
        var lines: [String] = []
        appendTree(to: &lines, marking: false, prefix: "", childPrefix: "")
        return lines.joined(separator: "\n")
    }

    /// The tree as ``description`` shows it, with each pending leaf marked
    /// `◀`, after one line per pending leaf giving its path (see the
    /// example above). `nil` if this job has completed.
    public var stallReport: String? {
        guard state.isPending else { return nil }
        let leaves = pendingLeaves
        var lines = ["\(leaves.count) job\(leaves.count == 1 ? " has" : "s have") not completed:"]
        for path in leaves.prefix(Self.mostLines) {
            let ancestors = path.dropLast().map(\.title)
            lines.append("  " + (ancestors + [path[path.count - 1].line]).joined(separator: " ▸ "))
        }
        if leaves.count > Self.mostLines { lines.append("  … and \(leaves.count - Self.mostLines) more") }
        lines.append("")
        appendTree(to: &lines, marking: true, prefix: "", childPrefix: "")
        return lines.joined(separator: "\n")
    }

    /// The most children listed below one job, and the most paths in a
    /// stall report: a group of a thousand running uploads stays readable.
    static var mostLines: Int { 20 }

    private func appendTree(to lines: inout [String], marking: Bool, prefix: String, childPrefix: String) {
        let isPendingLeaf = state.isPending && !children.contains { $0.state.isPending }
        lines.append(prefix + line + (marking && isPendingLeaf ? "  ◀" : ""))
        let shown = children.prefix(Self.mostLines)
        for (offset, child) in shown.enumerated() {
            let isLast = offset == shown.count - 1 && children.count <= Self.mostLines
            child.appendTree(
                to: &lines,
                marking: marking,
                prefix: childPrefix + (isLast ? "└─ " : "├─ "),
                childPrefix: childPrefix + (isLast ? "   " : "│  ")
            )
        }
        if children.count > Self.mostLines {
            lines.append(childPrefix + "└─ … and \(children.count - Self.mostLines) more")
        }
    }
}

extension Duration {
    /// A short form for snapshots: "30 s", "250 ms", "1.5 s". A duration
    /// that is not a round number (a jittered wait) is rounded: to the
    /// millisecond below a second ("178 ms"), to the tenth above ("2.3 s").
    var formatted: String {
        let (seconds, attoseconds) = components
        let attosecondsPerMillisecond: Int64 = 1_000_000_000_000_000
        if seconds == 0 {
            let milliseconds = (attoseconds + attosecondsPerMillisecond / 2) / attosecondsPerMillisecond
            return milliseconds < 1_000 ? "\(milliseconds) ms" : "1 s"
        }
        let tenthsPerAttosecond = 100 * attosecondsPerMillisecond
        let tenths = (attoseconds + tenthsPerAttosecond / 2) / tenthsPerAttosecond
        switch tenths {
        case 0: return "\(seconds) s"
        case 10: return "\(seconds + 1) s"
        default: return "\(seconds).\(tenths) s"
        }
    }
}
