#if canImport(Darwin)
import os
#else
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif
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
        guard let hooks = threadSanitizerHooks else {
            return try base.withLock { try body(&$0) }
        }
        // The lock's own address names it for Thread Sanitizer: taken before
        // the protected value is touched, so no access escapes the pairing.
        return try withUnsafePointer(to: self) { address in
            let name = UnsafeMutableRawPointer(mutating: address)
            return try base.withLock { state in
                hooks.acquire(name)
                defer { hooks.release(name) }
                return try body(&state)
            }
        }
        #endif
    }
}

#if !canImport(Darwin)
/// Thread Sanitizer's annotation functions, when the process runs under it.
///
/// `Mutex` locks with atomics and futexes inside the Synchronization
/// runtime, which is not instrumented, so Thread Sanitizer cannot see that
/// it orders the critical sections and reports every access under it as a
/// race. Under Thread Sanitizer (only), each critical section tells it
/// "acquire" on entry and "release" on exit, on the protected value's
/// address: exactly the ordering the mutex provides, no more. Outside
/// Thread Sanitizer this is `nil` and costs one load and branch.
private struct ThreadSanitizerHooks: Sendable {
    typealias Hook = @convention(c) (UnsafeMutableRawPointer?) -> Void
    let acquire: Hook
    let release: Hook
}

private let threadSanitizerHooks: ThreadSanitizerHooks? = {
    let process = dlopen(nil, RTLD_NOW)
    guard let acquire = dlsym(process, "__tsan_acquire"), let release = dlsym(process, "__tsan_release") else {
        return nil
    }
    return ThreadSanitizerHooks(
        acquire: unsafeBitCast(acquire, to: ThreadSanitizerHooks.Hook.self),
        release: unsafeBitCast(release, to: ThreadSanitizerHooks.Hook.self)
    )
}()
#endif
