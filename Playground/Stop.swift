import Dispatch
import Foundation
import JobKit
import JobKitTesting

/// How the run is stopped from outside: Ctrl-C (SIGINT), a terminal that
/// closes (SIGHUP) or `kill` (SIGTERM). The first signal cancels the
/// publishing (or closes the outbox), or, before it started, the writing of
/// the sample media; either way the run then cleans up and exits.
final class Stop {
    private struct State: Sendable {
        var signal: Int32?
        /// What the first signal does: cancel the publishing, close the
        /// outbox.
        var action: (@Sendable () -> Void)?
        /// The publishing's tree just before the signal cancelled it.
        var treeWhenStopped: JobSnapshot?
    }

    private let state = LockedValue(State())
    /// Kept for the life of the run: a released source stops listening.
    private let sources: [any DispatchSourceSignal]

    /// Starts listening for the signals.
    init() {
        let state = self.state
        sources = [SIGINT, SIGTERM, SIGHUP].map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler {
                let action = state.withValue { state -> (@Sendable () -> Void)? in
                    guard state.signal == nil else { return nil }
                    state.signal = number
                    return state.action
                }
                action?()
            }
            source.resume()
            return source
        }
    }

    /// The first signal received, if any.
    var received: Int32? { state.value.signal }

    /// Whether a signal asked the run to stop.
    var isRequested: Bool { received != nil }

    /// What the publishing was doing when the signal stopped it: its tree
    /// just before it was cancelled.
    var treeWhenStopped: JobSnapshot? { state.value.treeWhenStopped }

    /// Cancels `publishing` when a signal comes, or at once if one came.
    func cancels(_ publishing: JobHandle) {
        let state = self.state
        calls { Self.stop(publishing, state: state) }
    }

    /// Calls `action` when the first signal comes, or at once if it came.
    func calls(_ action: @escaping @Sendable () -> Void) {
        let stopped = state.withValue { state -> Bool in
            state.action = action
            return state.signal != nil
        }
        if stopped { action() }
    }

    /// Keeps the publishing's tree, then cancels it (which ends its
    /// children, so the tree is taken first).
    private static func stop(_ publishing: JobHandle, state: LockedValue<State>) {
        guard !publishing.isCompleted else { return }
        let tree = publishing.snapshot()
        state.withValue { state in state.treeWhenStopped = state.treeWhenStopped ?? tree }
        publishing.cancel()
    }

    /// How the user sent the signal, for the error line.
    var name: String {
        let number = received ?? SIGINT
        return [SIGINT: "Ctrl-C", SIGTERM: "SIGTERM", SIGHUP: "SIGHUP"][number] ?? "signal \(number)"
    }

    /// The exit status of a run stopped by the signal: 128 + its number.
    var exitStatus: Int32 { 128 + (received ?? SIGINT) }
}
