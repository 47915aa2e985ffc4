import Foundation
import JobKit

/// Something that uploads one payload to one destination: an HTTP server
/// (``URLSessionUploader``), a folder on disk (``DirectoryUploader``), or
/// memory (`InMemoryUploader`, in UploadsTesting).
///
/// An uploader hands out a `Job` per upload, so every upload gets JobKit's
/// guarantees for free: it is lazy, completes exactly once, can be
/// cancelled, retried and timed out, and runs on the queue it is performed
/// on, which tests replace with a `TestQueue`.
///
/// To write one, check the media in the job's body before sending any byte
/// (a missing file fails with ``UploadError/fileNotFound(_:)``), report
/// progress as bytes go out, finish once the destination has the whole
/// payload with a receipt of what it answered, and stop the transfer in
/// the controller's `onCancel`. Fail with an ``UploadError``, or an error
/// of the app's own that says what it means (``ClassifiedUploadError``),
/// so that only the failures that can pass are retried. Retries
/// re-perform the same job: an uploader that `POST`s should send the same
/// `Idempotency-Key` on each performance of one job (a key made when
/// `upload(_:progress:)` is called), as ``URLSessionUploader`` does, so
/// that a retry after a lost answer is not stored twice.
///
/// An uploader that sends several requests per upload and retries each on
/// its own (a multipart or a tus upload) also implements
/// ``upload(_:attempts:progress:)``: publishing hands it its retries there,
/// and retries nothing around it. An uploader that wraps another forwards
/// both methods, ``bytesInFlight(uploading:size:)`` and
/// ``discardResumableUpload(of:)``.
public protocol Uploader: Sendable {
    /// A job that uploads `media` to its destination, in one attempt: each
    /// request it sends is sent once. Retries are handed to an upload
    /// through ``upload(_:attempts:progress:)``.
    ///
    /// - Parameters:
    ///   - media: What to upload and where.
    ///   - progress: Called as bytes go out, from any thread, with the
    ///     bytes sent so far of this attempt.
    /// - Returns: A job that finishes with the server's receipt once the
    ///   destination holds the whole payload, and fails with an
    ///   ``UploadError`` otherwise.
    func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt>

    /// A job that uploads `media` to its destination, retried as
    /// `attempts` says and nowhere else, and named after it ("upload
    /// video-2.mp4", with the bytes sent) in snapshots.
    ///
    /// By default, each attempt is a performance of
    /// ``upload(_:progress:)``, retried whole
    /// (``UploadAttempts/retrying(_:for:)``). An uploader that retries the
    /// requests of an upload on its own wraps each of them in
    /// ``UploadAttempts/retrying(_:for:)`` instead.
    ///
    /// - Parameters:
    ///   - media: What to upload and where.
    ///   - attempts: The one owner of the upload's retries.
    ///   - progress: Called as bytes go out, from any thread. The default
    ///     implementation and this module's uploaders call it one call at
    ///     a time, with the most bytes any attempt has sent: never
    ///     backwards, even when the upload is retried.
    func upload(
        _ media: Media,
        attempts: UploadAttempts,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt>

    /// Checks, without uploading anything, that this uploader can upload to
    /// `destination`.
    ///
    /// Publishing a post checks every destination before its first upload,
    /// so a bad one fails the post with nothing uploaded.
    /// - Throws: ``UploadError/invalidDestination(_:reason:)``.
    func validate(destination: URL) throws(UploadError)

    /// The most bytes an upload of `media`, `size` bytes long, has in
    /// flight at once: what an ``Outbox`` counts against its
    /// ``Outbox/Options/maxBytesInFlight``.
    ///
    /// By default the whole size, as for one request; an uploader that
    /// sends parts counts a part for each part it sends at once.
    func bytesInFlight(uploading media: Media, size: Int64) -> Int64

    /// A job that discards what an unfinished, resumable upload of `media`
    /// kept for a later upload to resume (a multipart upload: its manifest,
    /// and the upload itself, aborted), and finishes once done, whatever
    /// the storage answered. An ``Outbox`` calls it when it removes a post.
    ///
    /// By default there is nothing to discard.
    func discardResumableUpload(of media: Media) -> Job<Void>
}

extension Uploader {
    /// Accepts every destination.
    public func validate(destination: URL) throws(UploadError) {}

    /// Nothing to discard: finishes at once.
    public func discardResumableUpload(of media: Media) -> Job<Void> {
        .succeeded
    }

    /// The whole size: one request sends it all.
    public func bytesInFlight(uploading media: Media, size: Int64) -> Int64 {
        size
    }

    /// Retries ``upload(_:progress:)`` whole, as `attempts` says, named
    /// after the media.
    public func upload(
        _ media: Media,
        attempts: UploadAttempts,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        attempts.retrying(.metered(media, progress: progress) { upload(media, progress: $0) }, for: media)
    }

    /// The size of `media`, once its destination and its bytes are known
    /// to be uploadable: what an upload checks before its first request.
    func checkedSize(of media: Media) throws(UploadError) -> Int64 {
        try validate(destination: media.destination)
        return try media.byteCount()
    }

    /// A job that uploads `media` to its destination, without progress
    /// reports.
    public func upload(_ media: Media) -> Job<UploadReceipt> {
        upload(media, progress: { _ in })
    }

    /// A job that uploads `media` to its destination, retried as
    /// `attempts` says, without progress reports.
    public func upload(_ media: Media, attempts: UploadAttempts) -> Job<UploadReceipt> {
        upload(media, attempts: attempts, progress: { _ in })
    }
}

/// How much of one upload has been sent.
public struct UploadProgress: Sendable, Hashable {
    /// Bytes sent so far.
    public var bytesSent: Int64
    /// Bytes to send in all.
    public var bytesTotal: Int64

    /// Creates a progress report.
    public init(bytesSent: Int64, bytesTotal: Int64) {
        self.bytesSent = bytesSent
        self.bytesTotal = bytesTotal
    }

    /// The share sent, from 0 to 1; 1 for an empty payload.
    public var fractionCompleted: Double {
        bytesTotal > 0 ? min(Double(bytesSent) / Double(bytesTotal), 1) : 1
    }
}

extension UploadProgress: CustomStringConvertible {
    /// The bytes sent, in the unit of the total: "4.2 of 18 MB sent",
    /// "0 of 512 bytes sent".
    public var description: String {
        let (unit, name): (Int64, String) =
            switch bytesTotal {
            case ..<1_000: (1, "bytes")
            case ..<1_000_000: (1_000, "kB")
            case ..<1_000_000_000: (1_000_000, "MB")
            default: (1_000_000_000, "GB")
            }
        return "\(Self.amount(bytesSent, in: unit)) of \(Self.amount(bytesTotal, in: unit)) \(name) sent"
    }

    /// `count` in `unit`s: one decimal below 10 ("4.2"), none above or
    /// when it is a whole number ("18", "4").
    private static func amount(_ count: Int64, in unit: Int64) -> String {
        let count = max(count, 0)
        let tenths = (count / unit) * 10 + ((count % unit) * 10 + unit / 2) / unit
        if tenths >= 100 { return "\((count / unit) + ((count % unit) * 2 >= unit ? 1 : 0))" }
        return tenths % 10 == 0 ? "\(tenths / 10)" : "\(tenths / 10).\(tenths % 10)"
    }
}
