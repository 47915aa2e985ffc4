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
    ///     `nil`, as the uploader does by itself: not at all, or for an
    ///     ``S3Uploader``, each request as its ``S3Uploader/retry`` says.
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
    ///     `nil`, as the uploader does by itself: not at all, or for an
    ///     ``S3Uploader``, each request as its ``S3Uploader/retry`` says.
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
    ///     `nil`, as the uploader does by itself.
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
    /// `attempts` say or as the uploader does by itself.
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
    /// What a snapshot calls the upload of this media.
    var jobName: String {
        "upload \(destination.lastPathComponent)"
    }
}

// MARK: - Publishing

extension Job where Success == PublishReceipt {
    /// A job that publishes `post`: uploads every photo and video, at most
    /// `options.maxConcurrentUploads` at once, then the post's document
    /// built from their receipts, and finishes with every receipt.
    ///
    /// The media are collected with
    /// `Job.collect(media, maxConcurrent: n)`, then the document is built
    /// and uploaded, each upload retried and timed out as `options` say.
    /// So:
    ///
    /// - The post is uploaded once, and only after every media upload
    ///   succeeded.
    /// - The first media upload that fails (after the retries its error
    ///   deserves) fails the publishing with its error, cancels the uploads
    ///   in flight, and no later upload starts.
    /// - Cancelling the job cancels every upload in flight.
    /// - Bad input is found before the first upload: a missing or unreadable
    ///   file, a destination the uploader refuses, a post without a
    ///   destination, or options below 1. The job then fails with that
    ///   error and uploads nothing.
    ///
    /// Its snapshots and stall reports (`JobHandle.stallReport()`) name
    /// it "publish", and each upload after the file its destination names,
    /// with the bytes it sent:
    ///
    /// ```text
    /// publish ▸ group 2/9 ▸ retry 1/3 ▸ upload video-2.mp4 (running, 4.2 of 18 MB sent)
    /// ```
    ///
    /// (With an ``S3Uploader``, which retries each request, the retries are
    /// inside, with the request: `publish ▸ group 2/9 ▸ upload video-2.mp4
    /// (…) ▸ group 1/3 ▸ retry 2/3 ▸ part 2 (running)`.)
    ///
    /// To tell posts apart, name the job again (`.named("publish
    /// beach-day")`): the outer name wins.
    ///
    /// The document is ``Post/document(receipts:)`` by default: the text,
    /// and each medium's final URL and `ETag`. For a server that answers
    /// each upload with an ID to name instead, give the options your own
    /// ``PublishOptions/document``.
    ///
    /// ```swift
    /// let options = PublishOptions(retry: RetryPolicy(attempts: 3))
    /// let published = try await Job.publishing(post, using: uploader, options: options) { progress in
    ///     print("\(Int(progress.fractionCompleted * 100))%")
    /// }.value
    /// print(published.post.finalURL, published.media.map(\.etag))
    /// ```
    ///
    /// - Parameters:
    ///   - post: The post and its media.
    ///   - uploader: Where they go.
    ///   - options: Concurrency, retries and the time limit per attempt
    ///     (see ``PublishOptions/uploadTimeout``).
    ///   - progress: Called with the progress of the whole post, weighted by
    ///     bytes, whenever it moves forward: one call at a time, from any
    ///     thread, never backwards, reaching 100% only on success.
    /// - Returns: A job that finishes with the receipts when the post is
    ///   published.
    public static func publishing(
        _ post: Post,
        using uploader: any Uploader,
        options: PublishOptions = PublishOptions(),
        progress: @escaping @Sendable (PublishProgress) -> Void = { _ in }
    ) -> Job<PublishReceipt> {
        Job { controller in
            let media: [Media]
            let sizes: [Int64]
            let destination: URL
            do {
                destination = try checkedDestination(of: post, using: uploader, options: options)
                media = post.media
                sizes = try media.map { media throws(UploadError) in try media.byteCount() }
            } catch {
                controller.fail(with: error)
                return
            }
            let merged = ProgressMerger(
                destinations: media.map(\.destination) + [destination], sizes: sizes + [0], deliver: progress)
            @Sendable func upload(_ part: Media, at index: Int) -> Job<UploadReceipt> {
                uploader.upload(part, attempts: options.attempts(for: part.destination)) {
                    merged.update(index, bytesSent: $0.bytesSent)
                }
                .map { receipt in
                    merged.finish(index)
                    return receipt
                }
            }
            let uploads = media.indices.map { upload(media[$0], at: $0) }
            let publishing = Job<[UploadReceipt]>.collect(uploads, maxConcurrent: options.maxConcurrentUploads)
                .then { receipts -> Job<PublishReceipt> in
                    let part: Media
                    do {
                        if let document = options.document {
                            let bytes = try document(post, receipts)
                            part = Media(bytes: bytes, destination: destination, contentType: "application/json")
                        } else {
                            part = try post.document(receipts: receipts)
                        }
                    } catch {
                        return .failed(error)
                    }
                    merged.update(media.count, bytesSent: 0, bytesTotal: (try? part.byteCount()) ?? 0)
                    return upload(part, at: media.count).map { PublishReceipt(media: receipts, post: $0) }
                }
            controller.perform(publishing) { controller.complete(with: $0) }
        }
        .named("publish")
    }

    /// The post's destination, once every input is checked.
    private static func checkedDestination(
        of post: Post,
        using uploader: any Uploader,
        options: PublishOptions
    ) throws -> URL {
        guard options.maxConcurrentUploads >= 1 else {
            throw JobError.invalidArgument(
                "maxConcurrentUploads must be at least 1, got \(options.maxConcurrentUploads)"
            )
        }
        guard options.retry.attempts >= 1 else {
            throw JobError.invalidArgument("retry.attempts must be at least 1, got \(options.retry.attempts)")
        }
        if let limit = options.uploadTimeout, limit <= .zero {
            throw JobError.invalidArgument("uploadTimeout must be above zero, got \(limit)")
        }
        guard let destination = post.destination else { throw UploadError.missingDestination }
        for media in post.media + [try post.document()] {
            try uploader.validate(destination: media.destination)
        }
        return destination
    }
}
