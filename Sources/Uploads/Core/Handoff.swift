import JobKit

/// State behind a lock whose changes are acted on outside it: by one thread
/// at a time, newest first.
///
/// A change is decided under the lock. When it leaves something to act on
/// (a report to deliver, a file to write), the thread that made it acts
/// after unlocking, unless another thread is already acting: that one then
/// takes the newest value before it stops. So the action never runs under
/// the lock, never runs on two threads at once, and a slow one only skips
/// the values that were replaced while it ran. The values acted on follow
/// the order of the changes that made them.
///
/// The thread that acts goes on until nothing is pending, so it may act on
/// other threads' changes too, and it runs what waits in
/// ``afterActions(_:)``. An action must not wait for a change of its own
/// to be acted on: it is the thread that would act on it.
final class Handoff<State: Sendable, Value: Sendable>: Sendable {
    private struct Guarded: Sendable {
        var state: State
        /// A change was made that no action has taken yet.
        var isPending = false
        /// A thread is acting; it takes what is pending before it stops.
        var isActing = false
        /// What waits for the action in progress (and for the next one,
        /// when a change is pending).
        var afterActions: [@Sendable () -> Void] = []
    }

    private let guarded: Lock<Guarded>
    /// What to act on, made from the state under the lock.
    private let take: @Sendable (inout State) -> Value
    private let act: @Sendable (Value, Handoff) -> Void

    /// Keeps `initial`; `take` makes what `act` is given from it.
    convenience init(
        _ initial: State,
        take: @escaping @Sendable (inout State) -> Value,
        act: @escaping @Sendable (Value) -> Void
    ) {
        self.init(initial, take: take, actingOn: { value, _ in act(value) })
    }

    /// Keeps `initial`; `take` makes what `act` is given from it, with
    /// this handoff, which `act` may change (its change is then acted on
    /// next, by the same thread).
    init(
        _ initial: State,
        take: @escaping @Sendable (inout State) -> Value,
        actingOn act: @escaping @Sendable (Value, Handoff) -> Void
    ) {
        guarded = Lock(Guarded(state: initial))
        self.take = take
        self.act = act
    }

    /// Runs `change` under the lock; acts on the state after it when
    /// `change` says it left something to act on.
    func update<Result: Sendable>(_ change: (inout State) -> (Result, actOn: Bool)) -> Result {
        let (result, acts) = guarded.withLock { guarded -> (Result, Bool) in
            let (result, actOn) = change(&guarded.state)
            guard actOn else { return (result, false) }
            guarded.isPending = true
            guard !guarded.isActing else { return (result, false) }
            guarded.isActing = true
            return (result, true)
        }
        if acts { actOnPending() }
        return result
    }

    /// Runs `change` under the lock; acts on the state after it when it
    /// returns `true`.
    func update(_ change: (inout State) -> Bool) {
        update { state in ((), actOn: change(&state)) }
    }

    /// Runs `body` once every change made so far has been acted on: at once
    /// when no thread is acting, otherwise on the acting thread, after its
    /// actions.
    func afterActions(_ body: @escaping @Sendable () -> Void) {
        let now = guarded.withLock { guarded -> Bool in
            guard guarded.isActing else { return true }
            guarded.afterActions.append(body)
            return false
        }
        if now { body() }
    }

    /// Reads the state under the lock.
    func read<Result: Sendable>(_ body: (State) -> Result) -> Result {
        guarded.withLock { body($0.state) }
    }

    /// Acts on what is pending until nothing is, running what waited for
    /// each action after it.
    private func actOnPending() {
        while true {
            let (value, waited) = guarded.withLock { guarded -> (Value?, [@Sendable () -> Void]) in
                defer { guarded.afterActions = [] }
                guard guarded.isPending else {
                    guarded.isActing = false
                    return (nil, guarded.afterActions)
                }
                guarded.isPending = false
                return (take(&guarded.state), guarded.afterActions)
            }
            if let value { act(value, self) }
            for body in waited { body() }
            if value == nil { return }
        }
    }
}
