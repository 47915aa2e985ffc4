import JobKit

/// A value protected by an actor, for state that async code under test
/// shares with the test: the async counterpart of ``LockedValue``.
///
/// ```swift
/// let events = ActorValue<[String]>([])
/// let scheduler = RecordingTaskScheduler()
/// scheduler.schedule { await events.withValue { $0.append("saved") } }
/// try await scheduler.waitForTasks()
/// #expect(await events.value == ["saved"])
/// ```
///
/// Every access suspends instead of blocking a thread. From synchronous
/// code (a completion handler, a `TestQueue` step), use ``LockedValue``.
/// (Not named `ActorIsolated`: swift-concurrency-extras, which test targets
/// often import too, has a type of that name.)
public actor ActorValue<Value: Sendable> {
    /// The current value.
    public private(set) var value: Value

    /// Creates a box holding `value`.
    public init(_ value: Value) {
        self.value = value
    }

    /// Replaces the value.
    public func setValue(_ newValue: Value) {
        value = newValue
    }

    /// Gives `operation` exclusive access to the value, to read and change
    /// it in one step (`await counter.withValue { $0 += 1 }`).
    /// - Returns: What `operation` returns.
    @discardableResult
    public func withValue<Result: Sendable>(
        _ operation: @Sendable (inout Value) throws -> Result
    ) rethrows -> Result {
        try operation(&value)
    }
}
