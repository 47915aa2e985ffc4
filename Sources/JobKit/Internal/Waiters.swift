/// The performances waiting for one outcome that something else produces
/// (a ``JobSource``'s, a shared job's run), in the order they came. Each
/// leaves when it is cancelled; the rest are taken together, in that
/// order, when the outcome comes.
///
/// Kept under its owner's lock, and not generic: it holds each
/// performance's ``ControllerToken``, which its owner types again as it
/// completes it. (A lock around a type that depends on a job's `Success`
/// would look its metadata up on every call, in unspecialized code.)
/// Leaving is a look-up, so that a long-lived source that thousands of
/// cancelled performances waited for keeps none of them.
struct Waiters: Sendable {
    private var tokens: [Int: ControllerToken] = [:]
    private var nextID = 0

    /// How many performances wait.
    var count: Int { tokens.count }

    /// Adds a performance that waits.
    /// - Returns: The number it leaves with.
    mutating func add(_ token: ControllerToken) -> Int {
        defer { nextID += 1 }
        tokens[nextID] = token
        return nextID
    }

    /// Removes the performance `add` numbered `id`, if it still waits.
    /// - Returns: Its token, to release outside the lock: it may be the
    ///   last reference to the performance's state.
    mutating func remove(_ id: Int) -> ControllerToken? {
        tokens.removeValue(forKey: id)
    }

    /// Takes every performance that waits, in the order they came.
    mutating func takeAll() -> [ControllerToken] {
        defer { tokens = [:] }
        if tokens.count == 1 { return [tokens.first!.value] }
        return tokens.sorted { $0.key < $1.key }.map(\.value)
    }
}

/// What a performance waits for: a ``JobSource``, or a shared job's run.
protocol Waited: AnyObject, Sendable {
    /// The performance numbered `id` that waits for the outcome numbered
    /// `number` (a shared job's run; a source has one) was cancelled.
    func leave(_ id: Int, from number: Int)
    /// Says in `owner`, the snapshot of a performance that waits for the
    /// outcome numbered `number`, what it waits for.
    func describe(_ number: Int, into owner: inout JobSnapshot)
}

/// A performance waiting for a ``Waited``: a cancel makes it leave, and
/// its snapshots say what it waits for. Not generic, so that making one
/// looks nothing up.
final class WaitNode: JobNode {
    let waited: any Waited
    let number: Int
    let id: Int

    init(_ waited: any Waited, number: Int, id: Int) {
        self.waited = waited
        self.number = number
        self.id = id
    }

    func cancelWithOwner() {
        waited.leave(id, from: number)
    }

    func describe(into owner: inout JobSnapshot) {
        waited.describe(number, into: &owner)
    }
}
