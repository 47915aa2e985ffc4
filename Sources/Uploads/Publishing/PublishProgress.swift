import Foundation

/// How far publishing a post has come: each upload's bytes, and the sum.
///
/// The totals are weighted by bytes: a 40 MB video counts a hundred times
/// more than a 400 kB photo. Progress never goes backwards, even when an
/// upload is retried from its start, and reaches 100% only when the post
/// itself has been uploaded. The post's document is built from the media's
/// receipts, so its size counts only from then on.
public struct PublishProgress: Sendable, Hashable {
    /// One upload of the post: a photo, a video or the post's document.
    public struct Upload: Sendable, Hashable {
        /// Where this upload goes.
        public var destination: URL
        /// Bytes sent so far; the most any attempt has sent, and less than
        /// ``bytesTotal`` until the upload succeeded.
        public var bytesSent: Int64
        /// Bytes to send in all; 0 for the post's document until it is
        /// built.
        public var bytesTotal: Int64
        /// Whether the upload succeeded.
        public var isFinished: Bool
    }

    /// Every upload: the photos, then the videos, then the post's document.
    public var uploads: [Upload]

    /// The share done, from 0 to 1, weighted by bytes: never less than in
    /// an earlier report, and 1 only when every upload succeeded.
    public internal(set) var fractionCompleted: Double = 0

    /// Bytes sent so far, across all uploads.
    public var bytesSent: Int64 { uploads.reduce(0) { $0 + $1.bytesSent } }

    /// Bytes to send in all.
    public var bytesTotal: Int64 { uploads.reduce(0) { $0 + $1.bytesTotal } }

    /// How many uploads have succeeded.
    public var finishedCount: Int { uploads.reduce(0) { $0 + ($1.isFinished ? 1 : 0) } }

    /// Whether every upload, the post's own included, succeeded.
    public var isFinished: Bool { uploads.allSatisfy(\.isFinished) }
}
