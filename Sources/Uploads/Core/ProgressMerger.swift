import Foundation

/// The progress of several transfers (the parts of a multipart upload, the
/// attempts of one upload, the uploads of a post) merged into one report,
/// delivered outside its lock, one report at a time, never backwards.
///
/// Transfers report from any thread. Each transfer counts the most bytes
/// any of its attempts sent, so a transfer sent again does not move the
/// sum back; a merger that holds back the last byte counts a transfer
/// whole only once it succeeded (``finish(_:)``). Reports are delivered
/// through a ``Handoff``: a slow closure only skips intermediate reports.
/// Each report is made anew from the merger's state, so the closure never
/// holds storage that a later change writes to.
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

    /// What a report is made from. The sums are kept as the transfers
    /// change, so a report costs the same for two parts or ten thousand.
    struct State: Sendable {
        private(set) var transfers: [Transfer]
        /// Bytes sent across the transfers.
        private(set) var bytesSent: Int64
        /// Bytes to send across the transfers.
        private(set) var bytesTotal: Int64
        /// How many transfers have not succeeded.
        private(set) var unfinishedCount: Int
        /// The share done, from 0 to 1: never less than in an earlier
        /// report, and 1 only when every transfer succeeded.
        private(set) var fractionCompleted: Double = 0

        init(totals: [Int64]) {
            transfers = totals.map { Transfer(bytesTotal: $0) }
            bytesSent = 0
            bytesTotal = totals.reduce(0, +)
            unfinishedCount = totals.count
        }

        /// Replaces transfer `index`, and raises the share done to the
        /// bytes sent over the bytes to send, held short of 1 until every
        /// transfer succeeded (so that a transfer whose size is not known
        /// yet cannot make it 1).
        mutating func replace(_ index: Int, with transfer: Transfer) {
            let old = transfers[index]
            transfers[index] = transfer
            bytesSent += transfer.bytesSent - old.bytesSent
            bytesTotal += transfer.bytesTotal - old.bytesTotal
            unfinishedCount += (old.isFinished ? 1 : 0) - (transfer.isFinished ? 1 : 0)
            let share =
                if unfinishedCount == 0 { 1.0 } else if bytesTotal > 1 {
                    Double(min(bytesSent, bytesTotal - 1)) / Double(bytesTotal)
                } else { 0.0 }
            fractionCompleted = max(fractionCompleted, share)
        }
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
        handoff = Handoff(State(totals: totals), take: { report($0) }, act: deliver)
        self.report = report
    }

    /// The report of the state now.
    var current: Report {
        handoff.read(report)
    }

    /// Transfer `index` has sent `bytesSent` bytes in its current attempt,
    /// of `bytesTotal` when given (which replaces its total; a total
    /// smaller than the bytes counted lowers them to it, the one way a
    /// report goes backwards: an uploader whose sizes disagree).
    func update(_ index: Int, bytesSent: Int64, bytesTotal: Int64? = nil) {
        handoff.update { [self] state in
            var transfer = state.transfers[index]
            guard !transfer.isFinished else { return false }
            if let bytesTotal {
                transfer.bytesTotal = bytesTotal
            }
            let most = holdsBackTheLastByte ? max(transfer.bytesTotal - 1, 0) : transfer.bytesTotal
            transfer.bytesSent = min(max(transfer.bytesSent, bytesSent), most)
            guard transfer != state.transfers[index] else { return false }
            state.replace(index, with: transfer)
            return true
        }
    }

    /// The transfers at `indices` succeeded: each counts whole, in one
    /// report.
    func finish(_ indices: some Sequence<Int>) {
        handoff.update { state in
            var changed = false
            for index in indices where !state.transfers[index].isFinished {
                let total = state.transfers[index].bytesTotal
                state.replace(index, with: Transfer(bytesSent: total, bytesTotal: total, isFinished: true))
                changed = true
            }
            return changed
        }
    }

    /// Transfer `index` succeeded: it counts whole.
    func finish(_ index: Int) {
        finish(CollectionOfOne(index))
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
