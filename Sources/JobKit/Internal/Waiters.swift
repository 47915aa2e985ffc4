/// The performances waiting for one outcome that something else produces
/// (a ``JobSource``'s, a shared job's run), in the order they came. Each
/// leaves when it is cancelled; the rest are taken together, in that
/// order, when the outcome comes.
///
/// Kept under its owner's lock. Leaving is a look-up, so that a
/// long-lived source that thousands of cancelled performances waited for
/// keeps none of them.
struct Waiters<Success: Sendable>: Sendable {
    private var controllers: [Int: Job<Success>.Controller] = [:]
    private var nextID = 0

    /// How many performances wait.
    var count: Int { controllers.count }

    /// Adds a performance that waits.
    /// - Returns: The number it leaves with.
    mutating func add(_ controller: Job<Success>.Controller) -> Int {
        defer { nextID += 1 }
        controllers[nextID] = controller
        return nextID
    }

    /// Removes the performance `add` numbered `id`, if it still waits.
    mutating func remove(_ id: Int) {
        controllers[id] = nil
    }

    /// Takes every performance that waits, in the order they came.
    mutating func takeAll() -> [Job<Success>.Controller] {
        defer { controllers = [:] }
        return controllers.sorted { $0.key < $1.key }.map(\.value)
    }
}

extension Job.Controller {
    /// Completes the job with `outcome` on its queue's next turn, as a
    /// job's body does there: whoever produced the outcome (a thread that
    /// completed a source, the run of a shared job) runs none of the code
    /// the job's parents run when it completes.
    func complete(onQueueWith outcome: Result<Success, any Error>) {
        Trampoline.enqueue({ [self] in complete(with: outcome) }, on: queue)
    }
}
