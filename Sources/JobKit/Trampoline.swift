// The C library's module has a different name on each platform; only the
// thread-specific data functions are used from it.
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The per-thread line that JobKit's own enqueues wait in, so that nothing
/// recurses whatever the queue; and the way for a queue that runs work
/// inline (``run(_:)``) to join that line.
///
/// A queue may run work before `enqueue` returns. If that work enqueues
/// more, and that runs at once too, a chain of a million synchronous steps
/// would nest a million calls. So while a thread is inside one of JobKit's
/// enqueues (a job's body, a handler's hop, a group's ticket) or inside
/// ``run(_:)``, further such calls on that thread are held back, in order,
/// and made when the outer call returns: the stack stays flat, each work
/// item still goes to its queue, and work run inline and JobKit's own
/// enqueues keep one first-in, first-out order. On a queue that never runs
/// work inline (`DispatchQueue`, `TestQueue`) nothing is ever held back,
/// and the cost is one thread-local read and a few stores.
///
/// A queue of your own that runs work on the calling thread, as
/// `ImmediateQueue` does, gives each work item to ``run(_:)``, once. Work
/// held back can still be cancelled, so delayed work waits in a box that
/// cancelling empties (`LockedValue` is JobKitTesting's; any lock does):
///
/// ```swift
/// struct InlineQueue: JobQueue {
///     func enqueue(_ work: @escaping @Sendable () -> Void) {
///         Trampoline.run(work)
///     }
///
///     func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork {
///         let waiting = LockedValue<(@Sendable () -> Void)?>(work)
///         Trampoline.run { waiting.withValue { $0.take() }?() }
///         return DelayedWork { _ = waiting.withValue { $0.take() } }
///     }
/// }
/// ```
public enum Trampoline {
    /// Calls `queue.enqueue(work)` now, or, inside another call on this
    /// thread, as soon as that call returns.
    static func enqueue(_ work: @escaping @Sendable () -> Void, on queue: any JobQueue) {
        let thread = ThreadState.current
        if thread.pointee.isInsideCall {
            thread.pointee.held.append(HeldWork(queue: queue, work: work))
            return
        }
        thread.pointee.isInsideCall = true
        enqueueNow(work, on: queue, thread: thread)
        drain(thread)
        thread.pointee.isInsideCall = false
    }

    /// Runs `work` now, on the calling thread, or, while the thread is
    /// inside another call to `run(_:)` or inside JobKit's enqueueing of its
    /// own work, as soon as that call returns, in the order it was given.
    ///
    /// The outermost call returns once all of that work has run, so a chain
    /// of work that enqueues more work runs in a loop, with a flat stack.
    /// Each thread keeps its own line. A queue calls it once per `enqueue`,
    /// with the work it was given: when JobKit enqueues held-back work on an
    /// inline queue, that call is the work's turn, and it runs at once.
    ///
    /// - Parameter work: The work to run.
    public static func run(_ work: @escaping @Sendable () -> Void) {
        let thread = ThreadState.current
        if thread.pointee.isInsideCall {
            if thread.pointee.runsEnqueuedWorkInline {
                // An inline queue running the very work this thread is
                // enqueueing on it: that is its turn, so it runs now.
                thread.pointee.runsEnqueuedWorkInline = false
                work()
            } else {
                thread.pointee.held.append(HeldWork(queue: nil, work: work))
            }
            return
        }
        thread.pointee.isInsideCall = true
        work()
        drain(thread)
        thread.pointee.isInsideCall = false
    }

    @inline(__always)
    private static func enqueueNow(
        _ work: @escaping @Sendable () -> Void,
        on queue: any JobQueue,
        thread: UnsafeMutablePointer<ThreadState>
    ) {
        thread.pointee.runsEnqueuedWorkInline = true
        queue.enqueue(work)
        thread.pointee.runsEnqueuedWorkInline = false
    }

    /// Makes the work held back meanwhile, and the work held back while
    /// making it, in order.
    @inline(__always)
    private static func drain(_ thread: UnsafeMutablePointer<ThreadState>) {
        // Most calls hold nothing back (a dispatch queue never runs the
        // work it is given at once): they leave without a call.
        if thread.pointee.holdsNothing { return }
        drainHeld(thread)
    }

    private static func drainHeld(_ thread: UnsafeMutablePointer<ThreadState>) {
        while let next = thread.pointee.popFirst() {
            if let queue = next.queue {
                enqueueNow(next.work, on: queue, thread: thread)
            } else {
                next.work()
            }
        }
    }

    private struct HeldWork {
        /// Where to enqueue `work`; `nil` to run it here.
        let queue: (any JobQueue)?
        let work: @Sendable () -> Void
    }

    /// One thread's state, made the first time the thread enqueues, freed
    /// when it exits. Only that thread touches it, through a pointer (so
    /// without the exclusivity checks of a class's properties).
    private struct ThreadState {
        var isInsideCall = false
        /// Set while `execute` enqueues held work: an inline queue may run
        /// that work at once, as its turn has come.
        var runsEnqueuedWorkInline = false
        /// The work held back, from `head` on. Each item leaves its slot as
        /// it is made (`nil`), so that emptying the array releases nothing:
        /// releasing work can release the last controller of a job, whose
        /// abandonment holds back more work, which must not land in the
        /// array while it changes.
        var held: [HeldWork?] = []
        var head = 0

        /// Whether no work is held back: outside `drain`, all of it has
        /// been made and `held` emptied.
        var holdsNothing: Bool { held.isEmpty }

        mutating func popFirst() -> HeldWork? {
            guard head < held.count else {
                if head > 0 {
                    held.removeAll(keepingCapacity: true)
                    head = 0
                }
                return nil
            }
            let item = held[head].take()
            head += 1
            if head >= 4096 && head * 2 >= held.count {
                held.removeFirst(head)
                head = 0
            }
            return item
        }

        static var current: UnsafeMutablePointer<ThreadState> {
            if let raw = pthread_getspecific(key) {
                return raw.assumingMemoryBound(to: ThreadState.self)
            }
            let state = UnsafeMutablePointer<ThreadState>.allocate(capacity: 1)
            state.initialize(to: ThreadState())
            pthread_setspecific(key, state)
            return state
        }

        private static let key: pthread_key_t = {
            var key = pthread_key_t()
            // The destructor's parameter is optional on Linux and not on
            // Apple platforms; `as UnsafeMutableRawPointer?` fits both.
            let status = pthread_key_create(&key) { raw in
                guard let raw = raw as UnsafeMutableRawPointer? else { return }
                let state = raw.assumingMemoryBound(to: ThreadState.self)
                state.deinitialize(count: 1)
                state.deallocate()
            }
            precondition(status == 0, "JobKit: pthread_key_create failed with \(status)")
            return key
        }()
    }
}
