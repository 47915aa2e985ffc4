/// The work object a bridged callback API returned, for
/// `Job.bridgingCancellable(_:)`.
///
/// The job can be cancelled before the API returned its work object (while
/// the API call is still running on another thread); the cancel is then
/// remembered and delivered as soon as the object arrives.
final class BridgedWork: Sendable {
    private enum Phase: Sendable {
        case starting
        case cancelledWhileStarting
        case running(WorkBox)
        case cancelled
    }

    /// The work object, which may not be declared `Sendable`.
    ///
    /// Unchecked, and not because of the lock (``Lock`` protects
    /// non-`Sendable` values too): the object is made on the thread that
    /// starts the job and cancelled from the thread that cancels it, so it
    /// does cross threads. What makes that safe is ``CancellableWork``'s
    /// contract: `cancel()`, the only method JobKit calls, is safe from any
    /// thread. The box is stored and taken out under `phase`'s lock only.
    private struct WorkBox: @unchecked Sendable {
        let work: any CancellableWork
    }

    private let phase = Lock<Phase>(.starting)

    /// Keeps the work object the API returned, or cancels it at once if
    /// the job was cancelled meanwhile.
    func didStart(_ work: any CancellableWork) {
        let cancelNow = phase.withLock { phase -> Bool in
            switch phase {
            case .starting:
                phase = .running(WorkBox(work: work))
                return false
            case .cancelledWhileStarting:
                phase = .cancelled
                return true
            case .running, .cancelled:
                preconditionFailure("Internal inconsistency: bridged work started twice")
            }
        }
        if cancelNow { work.cancel() }
    }

    /// Cancels the work object, now if it exists, or as soon as it arrives.
    func cancel() {
        let box = phase.withLock { phase -> WorkBox? in
            switch phase {
            case .starting:
                phase = .cancelledWhileStarting
                return nil
            case .running(let box):
                phase = .cancelled
                return box
            case .cancelledWhileStarting, .cancelled:
                return nil
            }
        }
        box?.work.cancel()
    }
}
