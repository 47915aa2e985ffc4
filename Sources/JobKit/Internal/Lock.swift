#if canImport(Darwin)
import os
#else
import Synchronization
#endif

/// The one lock type of JobKit: a value protected by a mutual-exclusion lock.
///
/// On Linux it is a `Synchronization.Mutex`, stored inline in its owner.
/// On Apple platforms `Mutex` needs iOS 18 / macOS 15, above the package's
/// floor, so it is an `OSAllocatedUnfairLock` (iOS 16 / macOS 13).
///
/// Never call user code (handlers, `onCancel` blocks, child jobs) inside
/// `withLock`: decide under the lock, act after unlocking.
package struct Lock<State: Sendable>: ~Copyable, Sendable {
    #if canImport(Darwin)
    private let base: OSAllocatedUnfairLock<State>
    #else
    private let base: Mutex<State>
    /// Makes the lock visible to Thread Sanitizer, which does not see
    /// `Mutex`'s own atomics (they are compiled into the uninstrumented
    /// Synchronization library): an acquiring load after locking and a
    /// releasing store before unlocking, compiled into this module, give
    /// it the happens-before edge. On x86 both are plain moves.
    private let sanitizerEdge = Atomic<Int>(0)
    #endif

    /// Creates a lock protecting `initial`.
    package init(_ initial: State) {
        #if canImport(Darwin)
        base = OSAllocatedUnfairLock(initialState: initial)
        #else
        base = Mutex(initial)
        #endif
    }

    /// Runs `body` with exclusive access to the protected state.
    @inline(__always)
    package borrowing func withLock<Result: Sendable>(
        _ body: (inout State) throws -> Result
    ) rethrows -> Result {
        #if canImport(Darwin)
        // `body` runs synchronously, under the lock, before this returns.
        try base.withLockUnchecked { try body(&$0) }
        #else
        try base.withLock { state in
            _ = sanitizerEdge.load(ordering: .acquiring)
            defer { sanitizerEdge.store(0, ordering: .releasing) }
            return try body(&state)
        }
        #endif
    }
}
