import JobKit

/// A value that is set once and awaited by any number of tasks, for the
/// test doubles: a `ManualTaskScheduler` operation's result, the end of a
/// race in `withTimeLimit`, the moment a `RecordingTaskScheduler` is idle.
///
/// Waiters suspend on continuations, never poll. ``fulfill(_:)`` resumes
/// them after the lock is released.
final class Promise<Value: Sendable>: Sendable {
    private struct State: Sendable {
        var value: Value?
        var waiters: [UInt64: UnsafeContinuation<Value, any Error>] = [:]
        /// Waits whose task was cancelled before they registered.
        var cancelledWaits: Set<UInt64> = []
        var nextWait: UInt64 = 0
    }

    private let state = Lock(State())

    init() {}

    /// Whether a value has been set.
    var isFulfilled: Bool {
        state.withLock { $0.value != nil }
    }

    /// Sets the value and resumes every waiter, unless a value was already
    /// set.
    /// - Returns: Whether this call set the value.
    @discardableResult
    func fulfill(_ value: Value) -> Bool {
        let waiters = state.withLock { state -> [UnsafeContinuation<Value, any Error>]? in
            guard state.value == nil else { return nil }
            state.value = value
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        guard let waiters else { return false }
        for waiter in waiters { waiter.resume(returning: value) }
        return true
    }

    /// Waits for the value, even if the waiting task is cancelled (like
    /// `Task.value`).
    var value: Value {
        get async {
            do {
                return try await wait(cancellable: false)
            } catch {
                preconditionFailure("Internal inconsistency: an uncancellable wait threw \(error)")
            }
        }
    }

    /// Waits for the value, or throws `CancellationError` as soon as the
    /// waiting task is cancelled.
    func cancellableValue() async throws -> Value {
        try await wait(cancellable: true)
    }

    private func wait(cancellable: Bool) async throws -> Value {
        let id = state.withLock { state in
            defer { state.nextWait += 1 }
            return state.nextWait
        }
        guard cancellable else { return try await register(id) }
        return try await withTaskCancellationHandler {
            try await register(id)
        } onCancel: {
            let waiter = state.withLock { state -> UnsafeContinuation<Value, any Error>? in
                if state.value != nil { return nil }
                guard let waiter = state.waiters.removeValue(forKey: id) else {
                    state.cancelledWaits.insert(id)
                    return nil
                }
                return waiter
            }
            waiter?.resume(throwing: CancellationError())
        }
    }

    /// Suspends until the value is set or wait `id` is cancelled.
    private func register(_ id: UInt64) async throws -> Value {
        // Unchecked: each continuation is either resumed at once here, or
        // stored under the lock and taken out by exactly one of `fulfill`
        // and the cancellation handler.
        try await withUnsafeThrowingContinuation { continuation in
            let outcome = state.withLock { state -> Result<Value, any Error>? in
                if let value = state.value { return .success(value) }
                if state.cancelledWaits.remove(id) != nil { return .failure(CancellationError()) }
                state.waiters[id] = continuation
                return nil
            }
            if let outcome { continuation.resume(with: outcome) }
        }
    }
}
