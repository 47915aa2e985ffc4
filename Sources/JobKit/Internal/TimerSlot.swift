/// Holds the delayed work of a `timeout` or a `retry` so that it can be
/// cancelled when the job completes or is cancelled, whichever thread gets
/// there first: the timer and the job race, and this decides under the lock.
///
/// Its states: no timer yet, a timer armed, and closed for good. A timer
/// armed after the slot closed is cancelled at once.
final class TimerSlot: Sendable {
    private enum State: Sendable {
        case empty
        case armed(DelayedWork)
        case closed
    }

    private let state = Lock(State.empty)

    /// Keeps `timer` to cancel it on ``close()``, replacing the previous
    /// one (which has fired); cancels it at once if the slot is closed.
    func arm(_ timer: DelayedWork) {
        let armed = state.withLock { state -> Bool in
            switch state {
            case .empty, .armed:
                state = .armed(timer)
                return true
            case .closed:
                return false
            }
        }
        if !armed { timer.cancel() }
    }

    /// Cancels the armed timer, if any, and every timer armed later.
    func close() {
        let timer = state.withLock { state -> DelayedWork? in
            defer { state = .closed }
            if case .armed(let timer) = state { return timer }
            return nil
        }
        timer?.cancel()
    }
}
