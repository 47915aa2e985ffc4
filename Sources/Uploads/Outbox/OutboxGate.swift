import Foundation
import JobKit

/// Performs what an ``Outbox``'s pacer (``OutboxPacer``) decides: admits
/// each request of the outbox's uploads toward its host, and arms and ends
/// the hosts' holds, on the outbox's queue.
final class OutboxGate: RequestGate {
    private let pacer: Lock<OutboxPacer>
    private let queue: any JobQueue
    private let retry: RetryPolicy
    private let pushbackDelay: Duration
    /// Called, outside the lock, with a host's key when it takes requests
    /// again: the outbox starts the uploads it held back.
    private let opened = Lock<(@Sendable (String) -> Void)?>(nil)

    init(options: Outbox.Options, queue: any JobQueue) {
        pacer = Lock(OutboxPacer(options: options))
        self.queue = queue
        retry = options.retry
        pushbackDelay = options.pushbackDelay
    }

    /// Calls `opened` with a host's key whenever it takes requests again.
    func whenOpened(_ opened: @escaping @Sendable (String) -> Void) {
        self.opened.withLock { $0 = opened }
    }

    /// Whether a new upload toward the host `key` names may start.
    func admitsUpload(toward key: String, running: Int) -> Bool {
        pacer.withLock { $0.admitsUpload(toward: key, running: running) }
    }

    /// Whether `url`'s host takes no request now.
    func isHeld(_ url: URL) -> Bool {
        pacer.withLock { $0.isHeld(OutboxPacer.host(of: url)) }
    }

    /// A job that performs `attempt`, one request toward `url`'s host, once
    /// the host admits it, and tells the pacer what its failure means
    /// (``UploadFailure``).
    func admitting<Success: Sendable>(_ attempt: Job<Success>, toward url: URL) -> Job<Success> {
        let key = OutboxPacer.host(of: url)
        return Job { [self] controller in
            let admitted = Lock(false)
            let go: @Sendable (Int) -> Void = { [self] epoch in
                admitted.withLock { $0 = true }
                guard !controller.isCompleted else {
                    return perform(pacer.withLock { $0.ended(key, failure: .cancelled, epoch: epoch) })
                }
                controller.perform(attempt) { [self] outcome in
                    let failure: UploadFailure? =
                        switch outcome {
                        case .success: nil
                        case .failure(let error): UploadFailure(error)
                        }
                    perform(pacer.withLock { $0.ended(key, failure: failure, epoch: epoch) })
                    controller.complete(with: outcome)
                }
            }
            switch pacer.withLock({ $0.admit(key, go) }) {
            case .closed:
                controller.fail(with: CancellationError())
            case .now(let epoch):
                go(epoch)
            case .queued(let ticket):
                controller.onCancel { [self] in
                    if !admitted.withLock({ $0 }) { perform(pacer.withLock { $0.withdraw(key, ticket: ticket) }) }
                }
            }
        }
    }

    /// Ends the holds that runs of transient failures started.
    func networkChanged() {
        perform(pacer.withLock { $0.networkChanged() })
    }

    /// Cancels every hold: the outbox closed.
    func close() {
        perform(pacer.withLock { $0.close() })
    }

    /// Carries out what the pacer decided, outside its lock.
    private func perform(_ actions: OutboxPacer.Actions) {
        for timer in actions.timers { timer.cancel() }
        if let hold = actions.hold { arm(hold) }
        for request in actions.requests { request() }
        for key in actions.opened { opened.withLock { $0 }?(key) }
    }

    /// Ends `hold` after its wait and one drawn below the pushback delay,
    /// drawn outside the lock, since the generator is the app's.
    private func arm(_ hold: OutboxPacer.Hold) {
        let release = queue.enqueue(after: hold.asked + pushbackDelay * retry.jitter()) { [self] in
            perform(pacer.withLock { $0.holdEnded(hold.key, id: hold.id) })
        }
        if !pacer.withLock({ $0.armed(hold, until: release) }) { release.cancel() }
    }
}
