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
/// work inline (`DispatchQueue`, `TestQueue`) nothing is held back, and the
/// cost is one thread-local read and a few stores, unless jobs nest deeper
/// than a few levels: what a job does to the job that holds it (its
/// outcome) or to the jobs it holds (a cancel) past that is held back in
/// the same way, whatever the queue.
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
        asOutermostCall(thread) { enqueueNow(work, on: queue, thread: thread) }
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
        asOutermostCall(thread, work)
    }

    /// One level deeper on this thread, for what one job does to the job
    /// that holds it, or to the jobs it holds: an outcome delivered to the
    /// combinator waiting on it, a cancel handed down to a child, a body
    /// run by the job that names it. Jobs nested a million deep deliver
    /// and cancel through a million such calls; the levels keep them to a
    /// few dozen frames, the rest in a loop. Each call site writes it
    /// out: ``enter()``, the call, ``leave()``; or, when `enter()` returns
    /// `nil`, ``Trampoline/hold(_:)`` of the call, in a closure made there.
    /// (A function taking the call as a closure would convert a stored
    /// closure, or one whose type it does not know, for every call, deep
    /// or not: an allocation each.) A tree of a usual depth never reaches
    /// the limit, and pays a thread-local read and two stores.
    struct Level {
        private let thread: UnsafeMutablePointer<ThreadState>

        /// Enters a level, or returns `nil` when the thread is already
        /// ``nestingLimit`` levels deep: then ``hold(_:)`` the call.
        @inline(__always)
        static func enter() -> Level? {
            let thread = ThreadState.current
            guard thread.pointee.depth < nestingLimit else { return nil }
            thread.pointee.depth += 1
            return Level(thread: thread)
        }

        /// Leaves the level, after the call.
        @inline(__always)
        func leave() {
            thread.pointee.depth -= 1
        }
    }

    /// How many ``Level``s deep a thread goes before it holds calls back:
    /// a few dozen frames each, in a debug build a few kilobytes.
    static let nestingLimit = 16

    /// Makes `work`, a call too deep to make now (``Level``), as soon as
    /// the outermost call of JobKit's on this thread returns, or at once,
    /// in a call of its own, if there is none.
    @inline(never)
    static func hold(_ work: @escaping @Sendable () -> Void) {
        let thread = ThreadState.current
        if thread.pointee.isInsideCall {
            thread.pointee.held.append(HeldWork(queue: nil, work: work))
            return
        }
        asOutermostCall(thread, work)
    }

    /// Makes `call` the thread's outermost call (levels count from 0 in
    /// it), then the work held back meanwhile, in order.
    @inline(__always)
    private static func asOutermostCall(_ thread: UnsafeMutablePointer<ThreadState>, _ call: () -> Void) {
        let depth = thread.pointee.enterCall()
        call()
        drain(thread)
        thread.pointee.leaveCall(restoring: depth)
    }

    /// Runs `release`, which lets go of what a deinit holds (it sets a
    /// stored property to `nil`), one level deeper; or, on a thread already
    /// ``nestingLimit`` such releases deep, returns `false` without running
    /// it: then the deinit hands what it holds to ``holdRelease(_:)``.
    ///
    /// For the deinit of an object that holds jobs (``Inner``, a group's
    /// or a sequence's run): releasing a job nested a
    /// million deep releases a million objects, one inside another's
    /// deinit. This keeps that to a few dozen frames, the rest in a loop.
    /// A deinit releases `job` with `releasing({ job = nil })`, and when
    /// that returns `false`, `holdRelease { [job] in _ = job }`.
    static func releasing(_ release: () -> Void) -> Bool {
        let thread = ThreadState.current
        guard thread.pointee.releaseDepth < nestingLimit else { return false }
        countingRelease(release, thread: thread)
        if thread.pointee.releaseDepth == 0 && !thread.pointee.heldReleases.isEmpty {
            releaseHeld(thread)
        }
        return true
    }

    /// Keeps `held`, a closure that holds what a deinit too deep could not
    /// release, until the outermost ``releasing(_:)`` on this thread, which
    /// releases it, uncalled, when its own release returns.
    static func holdRelease(_ held: @escaping @Sendable () -> Void) {
        ThreadState.current.pointee.heldReleases.append(held)
    }

    /// Runs `release` one level deeper, with the count raised while it
    /// runs. Not optimized, nor inlined: the optimizer does not count a
    /// release as reading memory of ours, and would move it before or after
    /// the count changes, and the deinits it runs would read the wrong
    /// count.
    @inline(never)
    @_optimize(none)
    private static func countingRelease(_ release: () -> Void, thread: UnsafeMutablePointer<ThreadState>) {
        thread.pointee.releaseDepth += 1
        release()
        thread.pointee.releaseDepth -= 1
    }

    /// Releases what deeper releases handed over, one at a time, each
    /// taken out of the list before it goes (its deinits may hand over
    /// more, which this loop releases too).
    @inline(never)
    private static func releaseHeld(_ thread: UnsafeMutablePointer<ThreadState>) {
        while !thread.pointee.heldReleases.isEmpty {
            countingRelease({ _ = thread.pointee.heldReleases.removeLast() }, thread: thread)
        }
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

    /// Runs `body`, the body of the performance `owner`, on this thread;
    /// then the steps ``runInTurn(of:_:)`` kept for it meanwhile, in
    /// order; then the call ``callAfterBody(of:_:)`` kept for it, if its
    /// job completed meanwhile: its handler's call, in the same turn of the
    /// queue rather than in one of its own.
    ///
    /// Only a body that a queue runs in a work item of its own, outside
    /// any call of JobKit's on this thread, keeps calls so: a body run
    /// inline (an `ImmediateQueue`'s, or one held back) leaves its next
    /// step and its handler's call to the line of held work, in
    /// first-in, first-out order with the work the body enqueued.
    @inline(__always)
    static func runBody(of owner: AnyObject, _ body: () -> Void) {
        let thread = ThreadState.current
        // A body run inside another's (a child started in its parent's
        // body) has a frame of its own, inside the other's.
        var frame = BodyFrame(
            owner: thread.pointee.isInsideCall ? nil : identity(of: owner),
            outer: thread.pointee.innermostBody
        )
        withUnsafeMutablePointer(to: &frame) { frame in
            thread.pointee.innermostBody = frame
            body()
            while let step = frame.pointee.nextStep.take() {
                step()
            }
            thread.pointee.innermostBody = frame.pointee.outer
        }
        frame.afterBody?()
    }

    /// Keeps `call`, a completed job's handler call, to make as soon as
    /// the body of `owner` returns, if this thread runs that body now
    /// (``runBody(of:_:)``), whatever bodies it runs inside it.
    /// - Returns: `false` if it does not: the caller enqueues `call`.
    @inline(__always)
    static func callAfterBody(of owner: AnyObject, _ call: @escaping @Sendable () -> Void) -> Bool {
        guard let frame = frameRunning(owner) else { return false }
        frame.pointee.afterBody = call
        return true
    }

    /// Keeps `step`, the next step of the performance `owner` (the job it
    /// goes on as, in its place), to run as soon as the body of `owner`
    /// returns, in the same turn of the queue, if this thread runs that
    /// body now, and fewer than ``stepsInATurn`` steps ran in that turn.
    /// - Returns: `false` if it does not keep it: the caller enqueues
    ///   `step`.
    @inline(__always)
    static func runInTurn(of owner: AnyObject, _ step: @escaping @Sendable () -> Void) -> Bool {
        guard let turn = Turn(of: owner) else { return false }
        turn.keep(step)
        return true
    }

    /// The turn of the queue that runs the body of `owner` on this thread
    /// now, with room for its next step: ``runInTurn(of:_:)`` for a caller
    /// that makes the step only once it knows it is kept, so that the step
    /// is stored as it is made, without a retain and a release.
    struct Turn {
        private let frame: UnsafeMutablePointer<BodyFrame>

        @inline(__always)
        init?(of owner: AnyObject) {
            guard let frame = frameRunning(owner), frame.pointee.nextStep == nil,
                frame.pointee.stepsRun < stepsInATurn
            else { return nil }
            self.frame = frame
        }

        /// Keeps `step`, to run once the body returns.
        @inline(__always)
        func keep(_ step: __owned @escaping @Sendable () -> Void) {
            frame.pointee.stepsRun += 1
            frame.pointee.nextStep = step
        }
    }

    /// How many steps a performance runs in one turn of its queue
    /// (``runInTurn(of:_:)``) before the next goes through the queue,
    /// letting other work run. Four times as many as a sequence runs
    /// (`SequenceRun.inlineBudget`): a loop's step that finishes at once
    /// costs a few hundred nanoseconds, and the hop costs a thread's
    /// waking when the queue's other threads sleep, microseconds (6 µs
    /// measured on a virtual machine of 2 cores, a quarter of a loop's
    /// time at 64 steps a turn, a fifteenth at 256). A turn of 256 such
    /// steps takes about 100 µs.
    static let stepsInATurn = 256

    /// The frame of `owner`'s body, if this thread runs it now.
    @inline(__always)
    private static func frameRunning(_ owner: AnyObject) -> UnsafeMutablePointer<BodyFrame>? {
        let identity = identity(of: owner)
        var frame = ThreadState.current.pointee.innermostBody
        while let current = frame {
            if current.pointee.owner == identity { return current }
            frame = current.pointee.outer
        }
        return nil
    }

    @inline(__always)
    private static func identity(of owner: AnyObject) -> UnsafeRawPointer {
        UnsafeRawPointer(Unmanaged.passUnretained(owner).toOpaque())
    }

    /// A body this thread runs now (``runBody(of:_:)``), on that call's
    /// stack: what is kept for after it.
    fileprivate struct BodyFrame {
        /// The performance whose body this is, if a queue runs it in a work
        /// item of its own: only compared, never dereferenced.
        let owner: UnsafeRawPointer?
        /// The body this one runs inside, if any.
        let outer: UnsafeMutablePointer<BodyFrame>?
        /// The next step of the performance, once a step ended in it.
        var nextStep: (@Sendable () -> Void)? = nil
        /// How many steps ran after the body, in this turn.
        var stepsRun = 0
        /// The handler's call, once the job completed in the body.
        var afterBody: (@Sendable () -> Void)? = nil
    }

    /// Whether this thread is inside one of JobKit's calls: work it
    /// enqueues now waits until that call returns.
    static var isInsideCall: Bool {
        ThreadState.current.pointee.isInsideCall
    }

    /// This thread's ``SnapshotWalk``, kept with its other state.
    static var snapshotWalk: UnsafeMutablePointer<SnapshotWalk> {
        let offset = MemoryLayout<ThreadState>.offset(of: \.snapshotWalk)!
        return (UnsafeMutableRawPointer(ThreadState.current) + offset).assumingMemoryBound(to: SnapshotWalk.self)
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

    fileprivate struct HeldWork {
        /// Where to enqueue `work`; `nil` to run it here.
        let queue: (any JobQueue)?
        let work: @Sendable () -> Void
    }

    /// One thread's state, made the first time the thread enqueues, freed
    /// when it exits. Only that thread touches it, through a pointer (so
    /// without the exclusivity checks of a class's properties).
    fileprivate struct ThreadState {
        var isInsideCall = false
        /// How many ``Level``s deep the thread is, since its outermost call
        /// began.
        var depth = 0
        /// How many ``releasing(_:)`` calls deep the thread is.
        var releaseDepth = 0
        /// What releases too deep handed over to the outermost, in
        /// closures that hold it.
        var heldReleases: [@Sendable () -> Void] = []
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
        /// The snapshot this thread is taking, if any.
        var snapshotWalk = SnapshotWalk()
        /// The innermost body this thread runs now, if any
        /// (``Trampoline/runBody(of:_:)``), on that call's stack.
        var innermostBody: UnsafeMutablePointer<BodyFrame>? = nil

        /// The thread enters its outermost call: nesting counts from 0
        /// in it (work held back runs at its depth).
        /// - Returns: The depth to restore when it leaves.
        @inline(__always)
        mutating func enterCall() -> Int {
            isInsideCall = true
            defer { depth = 0 }
            return depth
        }

        @inline(__always)
        mutating func leaveCall(restoring depth: Int) {
            isInsideCall = false
            self.depth = depth
        }

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
