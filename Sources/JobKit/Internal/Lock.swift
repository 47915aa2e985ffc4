import Synchronization

// The C library's module has a different name on each platform; only
// `dlopen`/`dlsym` are used from it, to find Thread Sanitizer's hooks.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The one lock type of JobKit: a value protected by a
/// `Synchronization.Mutex`, stored inline in its owner.
///
/// The protected value need not be `Sendable`: the lock hands it out only
/// inside ``withLock(_:)``, one caller at a time, and what leaves the lock
/// must be `sending` (a value no other region refers to).
///
/// Never call user code (handlers, `onCancel` blocks, child jobs) inside
/// `withLock`, and never block (file or network I/O) there: decide under
/// the lock, act after unlocking.
package struct Lock<State>: ~Copyable, Sendable {
    private let base: Mutex<State>

    /// Creates a lock protecting `initial`.
    package init(_ initial: consuming sending State) {
        base = Mutex(initial)
    }

    /// Runs `body` with exclusive access to the protected state.
    @inline(__always)
    package borrowing func withLock<Result, Failure: Error>(
        _ body: (inout sending State) throws(Failure) -> sending Result
    ) throws(Failure) -> sending Result {
        guard let hooks = threadSanitizerHooks else {
            return try base.withLock(body)
        }
        // The lock's own address names it for Thread Sanitizer: taken before
        // the protected value is touched, so no access escapes the pairing.
        let name = withUnsafePointer(to: self) { UnsafeMutableRawPointer(mutating: $0) }
        return try base.withLock { (state) throws(Failure) -> sending Result in
            hooks.acquire(name)
            defer { hooks.release(name) }
            return try body(&state)
        }
    }
}

/// Thread Sanitizer's annotation functions, when the process runs under it.
///
/// On Linux, `Mutex` locks with atomics and futexes inside the
/// Synchronization runtime, which is not instrumented, so Thread Sanitizer
/// cannot see that it orders the critical sections and reports every
/// access under it as a race. Under Thread Sanitizer (only), each critical
/// section tells it "acquire" on entry and "release" on exit, on the lock's
/// address: exactly the ordering the mutex provides, no more. (Where Thread
/// Sanitizer does see the mutex, the annotations repeat what it knows.)
/// Outside Thread Sanitizer this is `nil` and costs one load and branch.
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
