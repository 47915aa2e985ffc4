import JobKit

#if canImport(Darwin)
import Darwin
#elseif canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// A queue that runs work at once, on the calling thread: the *immediate*
/// double of a `DispatchQueue`.
///
/// With it, a job tree completes before `perform` returns, so a test can
/// assert right after performing:
///
/// ```swift
/// let outcome = LockedValue<Job<Int>.Outcome?>(nil)
/// job.perform(on: ImmediateQueue()) { outcome.setValue($0) }
/// #expect(try outcome.value?.get() == 42)
/// ```
///
/// Delayed work runs at once too: time collapses to now. Use ``TestQueue``
/// to control time instead.
///
/// Work enqueued while the queue is already running work on the same
/// thread is queued, in order, and run right after the current work
/// returns; the outermost call returns only when all of it has run. So a
/// chain of a million steps that complete synchronously runs in a loop,
/// with a flat stack, instead of a million nested calls.
public struct ImmediateQueue: JobQueue {
    /// Creates an immediate queue. All immediate queues share, per thread,
    /// the list of work waiting behind the work that is running.
    public init() {}

    /// Runs `work` now, or right after the work running on this thread.
    public func enqueue(_ work: @escaping @Sendable () -> Void) {
        Trampoline.run(work)
    }

    /// Runs `work` now, ignoring `delay`, or right after the work running
    /// on this thread.
    ///
    /// - Returns: A handle that cancels `work` if it is still waiting
    ///   behind the work running on this thread.
    @discardableResult
    public func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork {
        let waiting = WaitingWork(work)
        Trampoline.run { waiting.take()?() }
        return DelayedWork { _ = waiting.take() }
    }
}

/// Delayed work that can be cancelled while it waits in the trampoline.
private final class WaitingWork: Sendable {
    private let work: Lock<(@Sendable () -> Void)?>

    init(_ work: @escaping @Sendable () -> Void) {
        self.work = Lock(work)
    }

    /// The work, once: to run it, or to release it (outside the lock).
    func take() -> (@Sendable () -> Void)? {
        work.withLock { work in
            defer { work = nil }
            return work
        }
    }
}

/// The per-thread list of work waiting behind the work that runs now.
private enum Trampoline {
    /// Work waiting on one thread. Only that thread touches it.
    final class Pending {
        /// Wrapped in a struct so the closures are stored as they come:
        /// an array of bare closures re-abstracts (allocates a thunk for)
        /// each one on the way in and again on the way out.
        struct Work {
            let run: @Sendable () -> Void
        }

        private var items: [Work] = []
        private var head = 0

        func append(_ work: @escaping @Sendable () -> Void) {
            items.append(Work(run: work))
        }

        func popFirst() -> Work? {
            guard head < items.count else {
                items.removeAll(keepingCapacity: true)
                head = 0
                return nil
            }
            let work = items[head]
            head += 1
            if head >= 4096 && head * 2 >= items.count {
                items.removeFirst(head)
                head = 0
            }
            return work
        }
    }

    static let key: pthread_key_t = {
        var key = pthread_key_t()
        let status = pthread_key_create(&key, nil)
        precondition(status == 0, "ImmediateQueue: pthread_key_create failed with \(status)")
        return key
    }()

    static func run(_ work: @escaping @Sendable () -> Void) {
        if let raw = pthread_getspecific(key) {
            Unmanaged<Pending>.fromOpaque(raw).takeUnretainedValue().append(work)
            return
        }
        let pending = Pending()
        pthread_setspecific(key, Unmanaged.passUnretained(pending).toOpaque())
        defer { pthread_setspecific(key, nil) }
        work()
        while let next = pending.popFirst() {
            next.run()
        }
    }
}
