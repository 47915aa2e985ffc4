import Foundation
import JobKit

// MARK: - One upload

extension Job where Success == Void {
    /// A job that uploads `photo` with `uploader`.
    ///
    /// - Parameters:
    ///   - photo: The photo.
    ///   - uploader: Where it goes: a server, a folder, memory.
    ///   - progress: Called as bytes go out, from any thread.
    public static func uploading(
        _ photo: Photo,
        using uploader: any Uploader,
        progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }
    ) -> Job<Void> {
        uploader.upload(photo.media, progress: progress)
    }

    /// A job that uploads `video` with `uploader`, streaming it from its
    /// file when it has one.
    ///
    /// - Parameters:
    ///   - video: The video.
    ///   - uploader: Where it goes: a server, a folder, memory.
    ///   - progress: Called as bytes go out, from any thread.
    public static func uploading(
        _ video: Video,
        using uploader: any Uploader,
        progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }
    ) -> Job<Void> {
        uploader.upload(video.media, progress: progress)
    }

    /// A job that uploads the post's own document (its text and the
    /// destinations of its media), and not its media.
    ///
    /// To upload the media first and the post only if they all succeeded,
    /// use ``publishing(_:using:options:progress:)``. A post without a
    /// destination fails with `UploadError.missingDestination`.
    ///
    /// - Parameters:
    ///   - post: The post.
    ///   - uploader: Where it goes: a server, a folder, memory.
    ///   - progress: Called as bytes go out, from any thread.
    public static func uploading(
        _ post: Post,
        using uploader: any Uploader,
        progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }
    ) -> Job<Void> {
        do {
            return uploader.upload(try post.document(), progress: progress)
        } catch {
            return .failed(error)
        }
    }
}

// MARK: - Publishing

extension Job where Success == Void {
    /// A job that publishes `post`: uploads every photo and video, at most
    /// `options.maxConcurrentUploads` at once, then the post's document.
    ///
    /// The job is
    /// `Job.sequence([.group(media, maxConcurrent: n), .uploading(post, using: uploader)])`,
    /// with each upload retried and timed out as `options` say. So:
    ///
    /// - The post is uploaded once, and only after every media upload
    ///   succeeded.
    /// - The first media upload that fails (after its retries) fails the
    ///   publishing with its error, cancels the uploads in flight, and no
    ///   later upload starts.
    /// - Cancelling the job cancels every upload in flight.
    /// - Bad input is found before the first upload: a missing or unreadable
    ///   file, a destination the uploader refuses, a post without a
    ///   destination, or options below 1. The job then fails with that
    ///   error and uploads nothing.
    ///
    /// ```swift
    /// Job.publishing(post, using: uploader, options: PublishOptions(attempts: 3)) { progress in
    ///     print("\(Int(progress.fractionCompleted * 100))%")
    /// }
    /// .perform { outcome in print(outcome) }
    /// ```
    ///
    /// - Parameters:
    ///   - post: The post and its media.
    ///   - uploader: Where they go.
    ///   - options: Concurrency, retries and the time limit per upload.
    ///   - progress: Called with the progress of the whole post, weighted by
    ///     bytes, whenever it moves forward: one call at a time, from any
    ///     thread, never backwards, reaching 100% only on success.
    /// - Returns: A job that finishes when the post is published.
    public static func publishing(
        _ post: Post,
        using uploader: any Uploader,
        options: PublishOptions = PublishOptions(),
        progress: @escaping @Sendable (PublishProgress) -> Void = { _ in }
    ) -> Job<Void> {
        Job { controller in
            let parts: [Media]
            let sizes: [Int64]
            do {
                parts = try checkedParts(of: post, using: uploader, options: options)
                sizes = try parts.map { media throws(UploadError) in try media.byteCount() }
            } catch {
                controller.fail(with: error)
                return
            }
            let tracker = PublishProgressTracker(
                destinations: parts.map(\.destination),
                sizes: sizes,
                report: progress
            )
            let uploads = parts.indices.map { index in
                options.applied(
                    to: uploader.upload(parts[index]) { tracker.update(index, bytesSent: $0.bytesSent) }
                )
                .map { tracker.finish(index) }
            }
            let publishing = Job.sequence([
                .group(Array(uploads.dropLast()), maxConcurrent: options.maxConcurrentUploads),
                uploads[uploads.count - 1],
            ])
            controller.perform(publishing) { controller.complete(with: $0) }
        }
    }

    /// The post's media then its document, once every input is checked.
    private static func checkedParts(
        of post: Post,
        using uploader: any Uploader,
        options: PublishOptions
    ) throws -> [Media] {
        guard options.maxConcurrentUploads >= 1 else {
            throw JobError.invalidArgument(
                "maxConcurrentUploads must be at least 1, got \(options.maxConcurrentUploads)"
            )
        }
        guard options.attempts >= 1 else {
            throw JobError.invalidArgument("attempts must be at least 1, got \(options.attempts)")
        }
        let parts = post.media + [try post.document()]
        for media in parts {
            try uploader.validate(destination: media.destination)
        }
        return parts
    }
}
