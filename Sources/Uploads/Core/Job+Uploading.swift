import Foundation
import JobKit

// MARK: - One upload

extension Job where Success == UploadReceipt {
    /// A job that uploads `photo` with `uploader` and finishes with the
    /// server's receipt.
    ///
    /// Its snapshots name it after the file its destination names, with
    /// the bytes sent: "upload photo-1.jpg (running, 1.2 of 2.4 MB sent)".
    ///
    /// - Parameters:
    ///   - photo: The photo.
    ///   - uploader: Where it goes: a server, a folder, memory.
    ///   - attempts: How the upload is retried, by the uploader alone; when
    ///     `nil`, not at all: one attempt, or for an uploader that sends
    ///     several requests (multipart, tus), one attempt at each.
    ///   - progress: Called as bytes go out, one call at a time, from any
    ///     thread, with the most bytes any attempt has sent: never
    ///     backwards, even when the upload is retried.
    public static func uploading(
        _ photo: Photo,
        using uploader: any Uploader,
        attempts: UploadAttempts? = nil,
        progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }
    ) -> Job<UploadReceipt> {
        .upload(photo.media, using: uploader, attempts: attempts, progress: progress)
    }

    /// A job that uploads `video` with `uploader`, streaming it from its
    /// file when it has one, and finishes with the server's receipt.
    ///
    /// Its snapshots name it after the file its destination names, with
    /// the bytes sent: "upload video-2.mp4 (running, 4.2 of 18 MB sent)".
    ///
    /// - Parameters:
    ///   - video: The video.
    ///   - uploader: Where it goes: a server, a folder, memory.
    ///   - attempts: How the upload is retried, by the uploader alone; when
    ///     `nil`, not at all: one attempt, or for an uploader that sends
    ///     several requests (multipart, tus), one attempt at each.
    ///   - progress: Called as bytes go out, one call at a time, from any
    ///     thread, with the most bytes any attempt has sent: never
    ///     backwards, even when the upload is retried.
    public static func uploading(
        _ video: Video,
        using uploader: any Uploader,
        attempts: UploadAttempts? = nil,
        progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }
    ) -> Job<UploadReceipt> {
        .upload(video.media, using: uploader, attempts: attempts, progress: progress)
    }

    /// A job that uploads the post's own document, and not its media.
    ///
    /// The document is ``Post/document(receipts:)`` of `receipts`: pass
    /// the receipts of the media uploads so that it names where the server
    /// put them. To upload the media first and the post only if they all
    /// succeeded, use ``Job/publishing(_:using:options:progress:)``.
    /// A post without a destination fails with
    /// ``UploadError/missingDestination``.
    ///
    /// - Parameters:
    ///   - post: The post.
    ///   - receipts: The receipts of its media, photos first; none by
    ///     default, which names each medium by its destination.
    ///   - uploader: Where it goes: a server, a folder, memory.
    ///   - attempts: How the upload is retried, by the uploader alone; when
    ///     `nil`, not at all.
    ///   - progress: Called as bytes go out, one call at a time, from any
    ///     thread, with the most bytes any attempt has sent: never
    ///     backwards, even when the upload is retried.
    public static func uploading(
        _ post: Post,
        receipts: [UploadReceipt] = [],
        using uploader: any Uploader,
        attempts: UploadAttempts? = nil,
        progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }
    ) -> Job<UploadReceipt> {
        do {
            return .upload(
                try post.document(receipts: receipts), using: uploader, attempts: attempts, progress: progress)
        } catch {
            return .failed(error)
        }
    }

    /// `uploader`'s upload of `media`, named and metered, retried as
    /// `attempts` say, or tried once.
    private static func upload(
        _ media: Media,
        using uploader: any Uploader,
        attempts: UploadAttempts?,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        guard let attempts else {
            return .metered(media, progress: progress) { uploader.upload(media, progress: $0) }
        }
        return uploader.upload(media, attempts: attempts, progress: progress)
    }
}

// MARK: - Names

extension Job where Success == UploadReceipt {
    /// The upload `upload` makes of `media`, named after the file it makes
    /// at its destination ("upload video-2.mp4") and described by the
    /// bytes sent ("4.2 of 18 MB sent"); `upload` is given the progress
    /// closure that counts them.
    ///
    /// `progress` is told the most bytes any performance of the upload has
    /// sent, one report at a time, never backwards.
    static func metered(
        _ media: Media,
        progress: @escaping @Sendable (UploadProgress) -> Void,
        upload: (_ progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt>
    ) -> Job<UploadReceipt> {
        let merger = ProgressMerger(totals: [0], deliver: progress)
        return upload { report in
            merger.update(0, bytesSent: report.bytesSent, bytesTotal: report.bytesTotal)
        }
        .named(media.jobName) {
            // Before the first report, the size is asked for here, when a
            // snapshot is taken, rather than when the job is made.
            let current = merger.current
            guard current.bytesTotal == 0 else { return current.description }
            return UploadProgress(bytesSent: 0, bytesTotal: (try? media.byteCount()) ?? 0).description
        }
    }
}

extension Media {
    /// What a snapshot calls the upload of this media: after the file
    /// name it is given, else its destination's.
    var jobName: String {
        "upload \(filename ?? destination.lastPathComponent)"
    }
}
