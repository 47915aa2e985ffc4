import JobKit

extension TestQueue {
    /// The queue's virtual time as a `Clock`: inject it where production
    /// code takes `any Clock<Duration>` (`ContinuousClock()` in the app),
    /// and its sleeps pass when the test moves the queue's time.
    ///
    /// A sleep ends when ``TestQueue/advance(by:)`` reaches its deadline,
    /// as an item of the queue due at that instant: sleepers wake in the
    /// order of their deadlines, and those with the same deadline in the
    /// queue's ordering. ``TestQueue/run()`` never moves time, so it wakes
    /// no sleeper whose deadline is still ahead. An hour of sleeps takes
    /// as long as the code between them.
    ///
    /// ```swift
    /// let queue = TestQueue()
    /// let clock = queue.clock
    /// let woke = LockedValue<Duration?>(nil)
    /// queue.schedule {
    ///     try await clock.sleep(for: .seconds(3600))
    ///     woke.setValue(queue.now)
    /// }
    /// try queue.run()
    /// #expect(woke.value == nil)  // asleep
    /// try queue.advance(by: .seconds(3600))
    /// #expect(woke.value == .seconds(3600))
    /// ```
    ///
    /// Cancelling a sleeping task ends its sleep at once with
    /// `CancellationError`, and takes the sleep off the queue; a task
    /// cancelled before it sleeps throws without suspending. A deadline
    /// already reached still suspends the task: it goes on as an item due
    /// now, after the work already due. The tolerance is ignored.
    public struct Clock: _Concurrency.Clock {
        /// An instant of a test queue's virtual time.
        public struct Instant: InstantProtocol, CustomStringConvertible {
            /// The time since the queue was created.
            public var offset: Duration

            /// The instant `offset` after the queue was created.
            /// - Parameter offset: The time since the queue was created.
            public init(offset: Duration) {
                self.offset = offset
            }

            /// The instant `duration` later (earlier, if negative).
            /// - Parameter duration: The time to add.
            public func advanced(by duration: Duration) -> Instant {
                Instant(offset: offset + duration)
            }

            /// The time from this instant to `other`, negative if `other`
            /// is earlier.
            /// - Parameter other: The other instant.
            public func duration(to other: Instant) -> Duration {
                other.offset - offset
            }

            /// Whether `lhs` comes before `rhs`.
            public static func < (lhs: Instant, rhs: Instant) -> Bool {
                lhs.offset < rhs.offset
            }

            /// The instant as its offset from the queue's creation:
            /// `TestQueue.Clock.Instant(offset: 3.0 seconds)`.
            public var description: String {
                "TestQueue.Clock.Instant(offset: \(offset))"
            }
        }

        private let queue: TestQueue

        fileprivate init(queue: TestQueue) {
            self.queue = queue
        }

        /// The queue's virtual time: ``TestQueue/now`` as an instant.
        public var now: Instant {
            Instant(offset: queue.now)
        }

        /// The smallest step of the clock: none, since virtual time moves
        /// only when the test moves it.
        public var minimumResolution: Duration {
            .zero
        }

        /// Suspends the calling task until the queue's time reaches
        /// `deadline`.
        ///
        /// - Parameters:
        ///   - deadline: When the sleep ends.
        ///   - tolerance: Ignored: the sleep ends at its deadline exactly.
        /// - Throws: `CancellationError` if the task is cancelled before or
        ///   while it sleeps.
        public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
            let sleep = Sleep(on: queue, until: deadline.offset)
            try await withTaskCancellationHandler {
                try await withUnsafeThrowingContinuation { continuation in
                    sleep.begin(continuation)
                }
            } onCancel: {
                sleep.cancel()
            }
        }
    }

    /// The queue's virtual time as a `Clock`, whose sleeps end when
    /// ``advance(by:)`` reaches them.
    public var clock: Clock {
        Clock(queue: self)
    }
}

/// One sleep on a test queue's clock: the suspended task's continuation
/// and the queue item that wakes it. Whichever comes first, the item or the
/// task's cancellation, resumes the continuation, once; a cancellation
/// takes the item off the queue first.
private final class Sleep: Sendable {
    private enum State {
        /// Before the continuation is stored.
        case starting
        /// Suspended, until the item (stored once it is queued) runs.
        case sleeping(UnsafeContinuation<Void, any Error>, DelayedWork?)
        /// Resumed, or cancelled before its continuation was stored (which
        /// `begin` then resumes with `CancellationError`).
        case ended
    }

    private let state = Lock(State.starting)
    private let queue: TestQueue
    private let deadline: Duration
    /// The queue's note that the task is asleep, if the queue started it:
    /// ended once the sleep ends, woken or cancelled, before the task runs
    /// again.
    private let note: (number: Int, sleep: Int)?

    init(on queue: TestQueue, until deadline: Duration) {
        (self.queue, self.deadline) = (queue, deadline)
        note = queue.noteSleep(until: deadline)
    }

    /// Stores the task's continuation and queues the item that wakes it at
    /// `deadline`, unless the task was cancelled first.
    func begin(_ continuation: UnsafeContinuation<Void, any Error>) {
        let cancelled = state.withLock { state in
            guard case .starting = state else { return true }
            state = .sleeping(continuation, nil)
            return false
        }
        if cancelled {
            continuation.resume(throwing: CancellationError())
            return
        }
        let item = queue.enqueue(at: deadline) { self.wake() }
        let ended = state.withLock { state in
            guard case .sleeping(let continuation, nil) = state else { return true }
            state = .sleeping(continuation, item)
            return false
        }
        // Cancelled while the item was being queued: it must not stay.
        if ended { item.cancel() }
    }

    private func wake() {
        let continuation = state.withLock { state -> UnsafeContinuation<Void, any Error>? in
            guard case .sleeping(let continuation, _) = state else { return nil }
            state = .ended
            return continuation
        }
        guard let continuation else { return }
        note.map(queue.endSleep)
        continuation.resume()
    }

    func cancel() {
        note.map(queue.endSleep)  // at once, and again after a wake: it ends the note once
        let sleeping = state.withLock { state -> (UnsafeContinuation<Void, any Error>, DelayedWork?)? in
            switch state {
            case .starting, .ended:
                state = .ended
                return nil
            case .sleeping(let continuation, let item):
                state = .ended
                return (continuation, item)
            }
        }
        guard let (continuation, item) = sleeping else { return }
        item?.cancel()
        continuation.resume(throwing: CancellationError())
    }
}
