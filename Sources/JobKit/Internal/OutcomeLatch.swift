import Synchronization

/// A performance's outcome latch: the first outcome wins it, once, and it
/// says for good how the job completed. Lock-free: a job that attaches
/// nothing completes with this one atomic operation.
struct OutcomeLatch: ~Copyable, Sendable {
    /// How a job stands.
    enum Phase: UInt8, AtomicRepresentable, Sendable {
        case pending, completed, cancelled, failed
    }

    private let phase = Atomic<Phase>(.pending)

    /// How the job stands now.
    var current: Phase {
        phase.load(ordering: .acquiring)
    }

    /// Whether an outcome won the latch.
    var isCompleted: Bool {
        current != .pending
    }

    /// Whether the job was cancelled.
    var isCancelled: Bool {
        current == .cancelled
    }

    /// Lets the first outcome through.
    ///
    /// Sequentially consistent, as is ``currentInOrder``: an attachment is
    /// kept only if made before the latch was won, and the winner collects
    /// every attachment made before (``LazyReference``).
    /// - Returns: `true` if this outcome won, and the job is now `phase`.
    func win(_ phase: Phase) -> Bool {
        self.phase.compareExchange(expected: .pending, desired: phase, ordering: .sequentiallyConsistent).exchanged
    }

    /// ``current``, read in the order of ``win(_:)``.
    var currentInOrder: Phase {
        phase.load(ordering: .sequentiallyConsistent)
    }
}
