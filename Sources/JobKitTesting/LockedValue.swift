import JobKit

/// A value protected by a lock, for state that a test shares with work
/// running on other threads: outcomes from handlers, counters, logs.
///
/// ```swift
/// let outcome = LockedValue<Job<Int>.Outcome?>(nil)
/// job.perform(on: queue) { result in outcome.setValue(result) }
/// try queue.run()
/// #expect(try outcome.value?.get() == 42)
/// ```
///
/// Reads and writes are synchronous. For async contexts that would rather
/// suspend than block, use ``ActorValue``. Unlike a bare `Mutex`, its lock
/// is visible to Thread Sanitizer on Linux, so tests run under it report
/// real races only. (Not named `LockIsolated`: swift-concurrency-extras,
/// which test targets often import too, has a type of that name.)
public final class LockedValue<Value: Sendable>: Sendable {
    private let lock: Lock<Value>

    /// Creates a box holding `value`.
    public init(_ value: Value) {
        lock = Lock(value)
    }

    /// The current value.
    public var value: Value {
        lock.withLock { $0 }
    }

    /// Replaces the value.
    public func setValue(_ newValue: Value) {
        lock.withLock { $0 = newValue }
    }

    /// Gives `operation` exclusive access to the value, to read and change
    /// it in one step (`counter.withValue { $0 += 1 }`).
    ///
    /// Don't call back into the same box from `operation`: the lock is not
    /// reentrant.
    /// - Returns: What `operation` returns.
    @discardableResult
    public func withValue<Result: Sendable>(_ operation: (inout Value) throws -> Result) rethrows -> Result {
        try lock.withLock { try operation(&$0) }
    }
}
