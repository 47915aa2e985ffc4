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

    func admitting<Success: Sendable>(_ attempt: Job<Success>, toward url: URL) -> Job<Success> {
        // The gate, not the outbox: it holds the outbox weakly.
        Job { [self] controller in
            guard let outbox else {
                controller.fail(with: CancellationError())
                return
            }
            controller.perform(outbox.admitting(attempt, toward: url)) { controller.complete(with: $0) }
        }
    }
}
