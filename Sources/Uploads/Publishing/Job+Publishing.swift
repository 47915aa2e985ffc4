import Foundation
import JobKit

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
    ///   destination, or options that cannot work
    ///   (``InvalidOptionError``). The job then fails with that error and
    ///   uploads nothing.
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
        Publishing(post: post, uploader: uploader, options: options, progress: progress).job
    }
}
