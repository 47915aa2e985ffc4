/// What the servers answered a published post: a receipt per photo and
/// video, and the post's own.
///
/// ```swift
/// let published = try await Job.publishing(post, using: uploader).value
/// for receipt in published.media { print(receipt.finalURL, receipt.etag ?? "") }
/// ```
public struct PublishReceipt: Sendable, Hashable {
    /// The receipts of the media, in the order of ``Post/media``: the
    /// photos, then the videos.
    public var media: [UploadReceipt]
    /// The receipt of the post's document.
    public var post: UploadReceipt

    /// Creates a receipt of a published post.
    public init(media: [UploadReceipt], post: UploadReceipt) {
        self.media = media
        self.post = post
    }
}
