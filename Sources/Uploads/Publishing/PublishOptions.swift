import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How `Job.publishing(_:using:options:progress:)` uploads a
/// post: how many media at once, which failures to retry, how long each
/// attempt may take, and what the post's document says; and, as an
/// outbox's ``Outbox/Options/publishing``, how an ``Outbox`` uploads each
/// of its posts.
///
/// ```swift
/// let options = PublishOptions(
///     maxConcurrentUploads: 3,
///     retry: RetryPolicy(attempts: 4),
///     uploadTimeout: .seconds(60),
///     onFailedAttempt: { destination, attempt in
///         print("\(destination.lastPathComponent): \(attempt.error.localizedDescription)")
///     })
/// ```
public struct PublishOptions: Sendable {
    /// The most media uploads running at any moment; at least 1. In an
    /// outbox, the most uploads in flight across every post, documents
    /// included.
    public var maxConcurrentUploads: Int
    /// Which failed uploads are tried again, how often, after how long.
    /// Each upload, the post's own included, is retried on its own, by
    /// its uploader and nowhere else (see "Who retries what" in
    /// ``RetryPolicy``): an ``S3Uploader`` retries each request of a
    /// multipart upload with this policy.
    public var retry: RetryPolicy
    /// How long one attempt may take before it is cancelled and fails with
    /// ``UploadError/timedOut(_:after:)`` (which is retried); no limit when
    /// `nil`. An attempt is what the uploader retries: a whole upload, or
    /// for an ``S3Uploader`` one request (a part, say). An ``Outbox`` whose
    /// transfers go by a background session sets no limit: the system
    /// carries them as long as they take.
    public var uploadTimeout: Duration?
    /// Told of every failed attempt of every upload, with the upload's
    /// destination, from the thread the attempt failed on; cancelled
    /// attempts are not reported.
    public var onFailedAttempt: (@Sendable (_ destination: URL, _ attempt: RetryPolicy.FailedAttempt) -> Void)?
    /// Builds the post's document from the receipts of its media (photos
    /// first); ``Post/document(receipts:)`` when `nil`. What it returns is
    /// uploaded as `application/json` to the post's destination; an error
    /// it throws fails the publishing, with the media uploaded and no post.
    ///
    /// For a server that answers each upload with an ID the post must name:
    ///
    /// ```swift
    /// struct Stored: Decodable { let id: String }
    /// var options = PublishOptions()
    /// options.document = { post, receipts in
    ///     let ids = try receipts.map { try JSONDecoder().decode(Stored.self, from: $0.body).id }
    ///     return try JSONEncoder().encode(["text": post.text, "media": ids.joined(separator: ",")])
    /// }
    /// ```
    public var document: DocumentBuilder?
    /// The uploader of the post's document, when it is not the media's:
    /// an API that takes media as forms at one endpoint and the post as
    /// JSON at another (Mastodon's `/api/v2/media` and
    /// `/api/v1/statuses`). `nil` (the default) uploads the document with
    /// the media's uploader.
    public var documentUploader: (any Uploader)?

    /// Builds a post's document from the receipts of its media.
    public typealias DocumentBuilder = @Sendable (_ post: Post, _ receipts: [UploadReceipt]) throws -> Data

    /// Creates options.
    /// - Parameters:
    ///   - maxConcurrentUploads: The most media uploads at once; 4 by
    ///     default.
    ///   - retry: The retry policy; by default up to 3 attempts, for
    ///     transient failures only, with jittered exponential backoff.
    ///   - uploadTimeout: The time limit for one attempt; none by default.
    ///   - onFailedAttempt: Told of every failed attempt; nothing by
    ///     default.
    ///   - document: Builds the post's document; the default document by
    ///     default.
    ///   - documentUploader: Uploads the post's document; the media's
    ///     uploader by default.
    public init(
        maxConcurrentUploads: Int = 4,
        retry: RetryPolicy = RetryPolicy(),
        uploadTimeout: Duration? = nil,
        onFailedAttempt: (@Sendable (_ destination: URL, _ attempt: RetryPolicy.FailedAttempt) -> Void)? = nil,
        document: DocumentBuilder? = nil,
        documentUploader: (any Uploader)? = nil
    ) {
        self.maxConcurrentUploads = maxConcurrentUploads
        self.retry = retry
        self.uploadTimeout = uploadTimeout
        self.onFailedAttempt = onFailedAttempt
        self.document = document
        self.documentUploader = documentUploader
    }
}

extension PublishOptions {
    /// The attempts of the upload to `destination`: these retries and
    /// this time limit, failures told with the destination.
    func attempts(for destination: URL) -> UploadAttempts {
        var attempts = UploadAttempts(retry: retry, timeout: uploadTimeout)
        if let told = onFailedAttempt {
            attempts.onFailedAttempt = { told(destination, $0) }
        }
        return attempts
    }

    /// Checks `post` before its first upload with `uploader`: its
    /// destination, every destination against the uploader that sends to
    /// it (``documentUploader`` for the document's), every medium's bytes;
    /// and finds its destination and its media's sizes. Publishing checks
    /// a post so, and so does an outbox that adds one.
    func check(_ post: Post, uploadingWith uploader: any Uploader) throws(UploadError) -> (
        destination: URL, sizes: [Int64]
    ) {
        guard let destination = post.destination else { throw .missingDestination }
        for media in post.media {
            try uploader.validate(destination: media.destination)
        }
        try (documentUploader ?? uploader).validate(destination: destination)
        let sizes = try post.media.map { media throws(UploadError) in try media.byteCount() }
        return (destination, sizes)
    }

    /// The document of `post`, from the receipts of its media (photos
    /// first): ``document``'s, or ``Post/document(receipts:)``.
    func document(of post: Post, receipts: [UploadReceipt]) throws -> Media {
        guard let build = document else { return try post.document(receipts: receipts) }
        guard let destination = post.destination else { throw UploadError.missingDestination }
        return Media(bytes: try build(post, receipts), destination: destination, contentType: "application/json")
    }

    /// Throws when the options cannot work: fewer than one upload at once
    /// or one attempt, a time limit that is not above zero.
    func validate() throws(InvalidOptionError) {
        try InvalidOptionError.check(
            maxConcurrentUploads >= 1, "maxConcurrentUploads", "must be at least 1, got \(maxConcurrentUploads)")
        try InvalidOptionError.within("retry") { () throws(InvalidOptionError) in try retry.validate() }
        try InvalidOptionError.check(positive: uploadTimeout, "uploadTimeout")
    }
}
