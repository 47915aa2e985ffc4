import Foundation
import JobKit

/// Admits each request of an ``Outbox``'s uploads toward its host, as the
/// outbox's pacer (``OutboxPacer``) decides: its uploads go to each host as
/// one client.
///
/// It holds the outbox weakly: an upload's requests do not keep an outbox
/// the app let go of, whose close cancels them.
struct OutboxGate: RequestGate {
    weak var outbox: Outbox?

    /// A job that performs `attempt`, one request toward `url`'s host
    /// sending `bytes`, once the pacer admits it, and tells the pacer what
    /// its failure means (``UploadFailure``).
    func admitting<Success: Sendable>(_ attempt: Job<Success>, toward url: URL, bytes: Int64) -> Job<Success> {
        let key = OutboxPacer.host(of: url)
        // The gate, not the outbox: it holds the outbox weakly.
        return Job { [self] controller in
            // Strong while it asks the pacer only: the closures below look
            // the outbox up again.
            guard let asking = outbox else {
                controller.fail(with: CancellationError())
                return
            }
            let admitted = Lock(false)
            let go: @Sendable (Int) -> Void = { [self] epoch in
                admitted.withLock { $0 = true }
                guard outbox != nil else {
                    controller.fail(with: CancellationError())
                    return
                }
                guard !controller.isCompleted else { return ended(key, failure: .cancelled, epoch: epoch) }
                controller.perform(attempt) { [self] outcome in
                    let failure: UploadFailure? =
                        switch outcome {
                        case .success: nil
                        case .failure(let error): UploadFailure(error)
                        }
                    ended(key, failure: failure, epoch: epoch)
                    controller.complete(with: outcome)
                }
            }
            switch asking.changing({ $0.admit(key, bytes: bytes, go) }) {
            case .closed:
                controller.fail(with: CancellationError())
            case .now(let epoch):
                go(epoch)
            case .queued(let ticket):
                controller.onCancel { [self] in
                    guard let outbox, !admitted.withLock({ $0 }) else { return }
                    outbox.perform(outbox.changing { $0.withdraw(key, ticket: ticket) })
                }
            }
        }
    }

    /// Whether a request toward `url`'s host, sent now, asks the server
    /// first, as the pacer says (``OutboxPacer/asksFirst(_:)``).
    func asksFirst(toward url: URL) -> Bool {
        guard let outbox else { return false }
        return outbox.machine.read { $0.pacer.asksFirst(OutboxPacer.host(of: url)) }
    }

    /// Tells the pacer that a request toward `url`'s host that asked first
    /// was let send its body (``OutboxPacer/continued(_:)``).
    func continued(toward url: URL) {
        guard let outbox else { return }
        outbox.perform(outbox.changing { $0.requestContinued(OutboxPacer.host(of: url)) })
    }

    /// How long the pacer holds `url`'s host now, if it does
    /// (``OutboxPacer/holdLength(_:)``): a request retried toward it waits
    /// in the pacer, which lets it go when the hold ends.
    func holdLength(toward url: URL) -> Duration? {
        guard let outbox else { return nil }
        return outbox.machine.read { $0.pacer.holdLength(OutboxPacer.host(of: url)) }
    }

    /// Tells the pacer that a request toward `key`, admitted in `epoch`,
    /// ended as `failure` says (`nil`: it succeeded).
    private func ended(_ key: String, failure: UploadFailure?, epoch: Int) {
        guard let outbox else { return }
        outbox.perform(outbox.changing { $0.requestEnded(key, failure: failure, epoch: epoch) })
    }
}
