import Foundation

/// How far publishing a post has come: each upload's bytes, and the sum.
///
/// The totals are weighted by bytes: a 40 MB video counts a hundred times
/// more than a 400 kB photo. Progress never goes backwards, even when an
/// upload is retried from its start, and reaches 100% only when the post
/// itself has been uploaded.
public struct PublishProgress: Sendable, Hashable {
    /// One upload of the post: a photo, a video or the post's document.
    public struct Upload: Sendable, Hashable {
        /// Where this upload goes.
        public var destination: URL
        /// Bytes sent so far; the most any attempt has sent, and less than
        /// ``bytesTotal`` until the upload succeeded.
        public var bytesSent: Int64
        /// Bytes to send in all.
        public var bytesTotal: Int64
        /// Whether the upload succeeded.
        public var isFinished: Bool
    }

    /// Every upload: the photos, then the videos, then the post's document.
    public var uploads: [Upload]

    /// Bytes sent so far, across all uploads.
    public var bytesSent: Int64 { uploads.reduce(0) { $0 + $1.bytesSent } }

    /// Bytes to send in all.
    public var bytesTotal: Int64 { uploads.reduce(0) { $0 + $1.bytesTotal } }

    /// How many uploads have succeeded.
    public var finishedCount: Int { uploads.reduce(0) { $0 + ($1.isFinished ? 1 : 0) } }

    /// Whether every upload, the post's own included, succeeded.
    public var isFinished: Bool { uploads.allSatisfy(\.isFinished) }

    /// The share done, from 0 to 1, weighted by bytes. It is 1 only when
    /// every upload succeeded.
    public var fractionCompleted: Double {
        if isFinished { return 1 }
        let total = bytesTotal
        guard total > 0 else { return 0 }
        return min(Double(bytesSent) / Double(total), 1)
    }
}
