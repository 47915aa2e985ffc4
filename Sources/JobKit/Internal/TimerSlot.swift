/// Holds the delayed work of a `timeout`, a `retry`, a `sleep` or a loop
/// (`repeated`, `collectPages`) so that it can be
/// cancelled when the job completes or is cancelled, whichever thread gets
/// there first: the timer and the job race, and this decides under the lock.
///
/// Its states: no timer yet, a timer armed, and closed for good. A timer
/// armed after the slot closed is cancelled at once.
///
/// It is attached to its job, which closes it when cancelled, and says in
/// the job's snapshots which combinator the job is: a timeout or a sleep
/// and its duration, or a retry or a loop, its attempt or step, and the
/// wait before the next one.
final class TimerSlot: JobNode {
    /// The combinator the slot times.
    enum Purpose: Sendable {
        case timeout(Duration)
        case retry(attempts: Int)
        case sleep(Duration)
        /// A `repeated` or a `collectPages`.
        case loop
    }

    private enum Timer: Sendable {
        case empty
        case armed(DelayedWork)
        case closed
    }

    private struct State: Sendable {
        var timer = Timer.empty
        /// A retry's attempt number, or a loop's step number: the one
        /// running, or the one waited for.
        var attempt = 1
        /// The wait before `attempt`, and the error that led to it (a
        /// retry's; a loop's has none).
        var wait: (delay: Duration, error: (any Error)?)?
    }

    let purpose: Purpose
    private let state = Lock(State())

    init(_ purpose: Purpose) {
        self.purpose = purpose
    }

    /// Keeps `timer`, a timeout's or a sleep's, to cancel it on
    /// ``close()``; cancels it at once if the slot is closed.
    func arm(_ timer: DelayedWork) {
        let armed = state.withLock { state -> Bool in
            switch state.timer {
            case .empty, .armed:
                state.timer = .armed(timer)
                return true
            case .closed:
                return false
            }
        }
        if !armed { timer.cancel() }
    }

    /// A retry's wait of `delay` before attempt number `attempt`, after
    /// `error`, or a loop's before its step number `attempt`: `next` runs
    /// on `queue` after it (with no wait, on the queue's next turn). The
    /// wait shows in snapshots, and closing the slot cancels it.
    func wait(
        before attempt: Int,
        delay: Duration,
        after error: (any Error)?,
        on queue: any JobQueue,
        then next: @escaping @Sendable () -> Void
    ) {
        state.withLock { state in
            state.attempt = attempt
            state.wait = (delay, error)
        }
        guard delay > .zero else {
            Trampoline.enqueue(next, on: queue)
            return
        }
        let timer = queue.enqueue(after: delay, next)
        // Made before it is kept: on a concurrent queue it may fire first,
        // and its attempt begin, end and wait again, all before this. Then
        // the slot keeps the newer wait (this one has fired).
        let armed = state.withLock { state -> Bool? in
            switch state.timer {
            case .empty, .armed:
                guard state.attempt == attempt, state.wait != nil else { return nil }
                state.timer = .armed(timer)
                return true
            case .closed:
                return false
            }
        }
        if armed == false { timer.cancel() }
    }

    /// Attempt or step number `attempt` runs: any wait before it is over.
    func begin(_ attempt: Int) {
        state.withLock { state in
            state.attempt = attempt
            state.wait = nil
        }
    }

    /// Cancels the armed timer, if any, and every timer armed later.
    func close() {
        let timer = state.withLock { state -> DelayedWork? in
            defer { state.timer = .closed }
            if case .armed(let timer) = state.timer { return timer }
            return nil
        }
        timer?.cancel()
    }

    func cancelWithOwner() {
        close()
    }

    /// Says the job is a timeout, a sleep, a retry or a loop; a retry or a
    /// loop waiting for its next attempt or step is shown waiting.
    func describe(into owner: inout JobSnapshot) {
        switch purpose {
        case .timeout(let duration):
            owner.kind = .timeout(duration)
        case .sleep(let duration):
            owner.kind = .sleep(duration)
        case .retry(let attempts):
            let (attempt, wait) = state.withLock { ($0.attempt, $0.wait) }
            owner.kind = .retry(attempt: attempt, attempts: attempts)
            if let wait, let error = wait.error, owner.state.isPending {
                owner.state = .waitingToRetry(attempt: attempt, delay: wait.delay, after: error)
            }
        case .loop:
            let (step, wait) = state.withLock { ($0.attempt, $0.wait) }
            owner.kind = .loop(step: step)
            if let wait, owner.state.isPending {
                owner.state = .waitingToRepeat(step: step, delay: wait.delay)
            }
        }
    }
}
