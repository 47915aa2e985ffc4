import Foundation

/// The progress of several transfers (the parts of a multipart upload, the
/// uploads of a post, the attempts of one upload) merged into one report,
/// delivered outside its lock, one report at a time, never backwards.
///
/// Transfers report from any thread. Each transfer counts the most bytes
/// any of its attempts sent, so a transfer sent again does not move the
/// sum back; a merger that holds back the last byte counts a transfer
/// whole only once it succeeded (``finish(_:bytesTotal:)``). Reports are delivered
/// through a ``Handoff``: a slow closure only skips intermediate reports.
/// Each report is made anew from the merger's state, and shares no storage
/// with it.
final class ProgressMerger<Report: Sendable>: Sendable {
    /// One transfer's share of the progress.
    struct Transfer: Sendable, Hashable {
        /// The most bytes any attempt sent (less than ``bytesTotal`` until
        /// the transfer succeeded, when the merger holds back the last
        /// byte).
        var bytesSent: Int64 = 0
        /// The bytes to send.
        var bytesTotal: Int64
        /// Whether the transfer succeeded.
        var isFinished = false
    }

    /// What a report is made from.
    struct State: Sendable {
        var transfers: [Transfer]
        /// The share done, from 0 to 1: never less than in an earlier
        /// report, and 1 only when every transfer succeeded.
        var fractionCompleted: Double = 0

        /// Bytes sent across the transfers.
        var bytesSent: Int64 { transfers.reduce(0) { $0 + $1.bytesSent } }
        /// Bytes to send across the transfers.
        var bytesTotal: Int64 { transfers.reduce(0) { $0 + $1.bytesTotal } }
    }

    private let handoff: Handoff<State, Report>
    private let report: @Sendable (State) -> Report
    private let holdsBackTheLastByte: Bool

    /// A merger of transfers of `totals` bytes (a total not known yet is 0,
    /// and set by ``update(_:bytesSent:bytesTotal:)``) whose reports,
    /// made by `report`, go to `deliver`; when `holdsBackTheLastByte`, a
    /// transfer counts whole only once it succeeded.
    init(
        totals: [Int64],
        holdsBackTheLastByte: Bool = false,
        report: @escaping @Sendable (State) -> Report,
        deliver: @escaping @Sendable (Report) -> Void
    ) {
        self.holdsBackTheLastByte = holdsBackTheLastByte
        handoff = Handoff(
            State(transfers: totals.map { Transfer(bytesTotal: $0) }),
            take: { report($0) },
            act: deliver)
        self.report = report
    }

    /// The report of the state now.
    var current: Report {
        handoff.read(report)
    }

    /// Transfer `index` has sent `bytesSent` bytes in its current attempt,
    /// of `bytesTotal` when given (which replaces its total).
    func update(_ index: Int, bytesSent: Int64, bytesTotal: Int64? = nil) {
        handoff.update { [self] state in
            var transfer = state.transfers[index]
            guard !transfer.isFinished else { return false }
            var changed = false
            if let bytesTotal, bytesTotal != transfer.bytesTotal {
                transfer.bytesTotal = bytesTotal
                transfer.bytesSent = min(transfer.bytesSent, mostBeforeSuccess(of: transfer))
                changed = true
            }
            let sent = min(max(transfer.bytesSent, bytesSent), mostBeforeSuccess(of: transfer))
            if sent > transfer.bytesSent {
                transfer.bytesSent = sent
                changed = true
            }
            guard changed else { return false }
            state.transfers[index] = transfer
            Self.advanceFraction(&state)
            return true
        }
    }

    /// The transfers at `indices` succeeded: each counts whole, in one
    /// report.
    func finish(_ indices: some Sequence<Int>) {
        handoff.update { state in
            var changed = false
            for index in indices where !state.transfers[index].isFinished {
                state.transfers[index].bytesSent = state.transfers[index].bytesTotal
                state.transfers[index].isFinished = true
                changed = true
            }
            guard changed else { return false }
            Self.advanceFraction(&state)
            return true
        }
    }

    /// Transfer `index` succeeded: it counts whole, `bytesTotal` when
    /// given (which replaces its total).
    func finish(_ index: Int, bytesTotal: Int64? = nil) {
        handoff.update { state in
            guard !state.transfers[index].isFinished else { return false }
            let total = bytesTotal ?? state.transfers[index].bytesTotal
            state.transfers[index] = Transfer(bytesSent: total, bytesTotal: total, isFinished: true)
            Self.advanceFraction(&state)
            return true
        }
    }

    private func mostBeforeSuccess(of transfer: Transfer) -> Int64 {
        holdsBackTheLastByte ? max(transfer.bytesTotal - 1, 0) : transfer.bytesTotal
    }

    /// Raises the share done to the bytes sent over the bytes to send, held
    /// short of 1 until every transfer succeeded (so that a transfer whose
    /// size is not known yet cannot make it 1).
    private static func advanceFraction(_ state: inout State) {
        let share: Double
        if state.transfers.allSatisfy(\.isFinished) {
            share = 1
        } else {
            let total = state.bytesTotal
            share = total > 1 ? Double(min(state.bytesSent, total - 1)) / Double(total) : 0
        }
        state.fractionCompleted = max(state.fractionCompleted, share)
    }
}

extension ProgressMerger where Report == UploadProgress {
    /// A merger whose report is the bytes sent and to send across the
    /// transfers.
    convenience init(totals: [Int64], deliver: @escaping @Sendable (UploadProgress) -> Void) {
        self.init(
            totals: totals, report: { UploadProgress(bytesSent: $0.bytesSent, bytesTotal: $0.bytesTotal) },
            deliver: deliver)
    }
}

extension ProgressMerger where Report == PublishProgress {
    /// A merger of a post's uploads to `destinations`, of `sizes` bytes,
    /// whose report names each upload, and counts each whole only once it
    /// succeeded.
    convenience init(
        destinations: [URL],
        sizes: [Int64],
        deliver: @escaping @Sendable (PublishProgress) -> Void
    ) {
        self.init(
            totals: sizes,
            holdsBackTheLastByte: true,
            report: { state in
                var progress = PublishProgress(
                    uploads: zip(destinations, state.transfers).map { destination, transfer in
                        PublishProgress.Upload(
                            destination: destination, bytesSent: transfer.bytesSent,
                            bytesTotal: transfer.bytesTotal, isFinished: transfer.isFinished)
                    })
                progress.fractionCompleted = state.fractionCompleted
                return progress
            },
            deliver: deliver)
    }
}
