import Foundation

/// One post's record in an outbox's journal: the post, its priority and
/// place in line, where it is, and every receipt the servers gave, so that
/// a later launch of the app sends only what is not stored yet.
///
/// ```json
/// {"destination":"https://example.com/posts/1.json","idempotencyKey":"…","media":[…],
///  "photoCount":2,"priority":"normal","sequence":3,"status":"pending","text":"…","version":1}
/// ```
struct OutboxRecord: Codable, Sendable, Hashable {
    /// The format of the record; a record of another version is set aside.
    static let currentVersion = 1

    /// What the record says of the post; running and waiting are states of
    /// one launch only, recorded as pending.
    enum Status: String, Codable, Sendable {
        case pending
        case paused
        case failed
        case published
    }

    /// A photo or video: what a transfer needs to send it again, or to
    /// rejoin one still in flight (the file and destination name an S3
    /// multipart upload's manifest), and its receipt once stored.
    struct Medium: Codable, Sendable, Hashable {
        /// The file to send.
        var file: URL
        var destination: URL
        var contentType: String
        /// The file's size when the post was added.
        var size: Int64
        /// Whether the file is the outbox's copy of bytes given in memory,
        /// removed once the post is published.
        var isCopy: Bool
        /// Sent with each attempt of the upload, across launches.
        var idempotencyKey: String
        var receipt: Receipt?
        /// The name the server is told, when the app gave one, or when
        /// the file is a copy (whose own name is the outbox's).
        var filename: String?
        /// The media's form fields, when it has any.
        var formFields: [FormField]?

        /// The medium as the app gave it, its bytes read from ``file``.
        var media: Media {
            var media = Media(file: file, destination: destination, contentType: contentType)
            media.filename = filename
            media.formFields = formFields ?? []
            return media
        }
    }

    /// An ``UploadReceipt``, as the journal keeps it.
    struct Receipt: Codable, Sendable, Hashable {
        var destination: URL
        var status: Int
        var headers: [String: String]
        /// The answer's body, in base 64: whole, up to its uploader's
        /// bound (the first 4 KiB, in a journal written before receipts
        /// kept whole answers).
        var body: Data
        var filename: String?

        init(_ receipt: UploadReceipt) {
            destination = receipt.destination
            status = receipt.status
            headers = receipt.headers
            body = receipt.body
            filename = receipt.filename
        }

        var receipt: UploadReceipt {
            var receipt = UploadReceipt(destination: destination, status: status, headers: headers, body: body)
            receipt.filename = filename
            return receipt
        }
    }

    var version = Self.currentVersion
    /// The destination of the post's document: the post's identity.
    var destination: URL
    var text: String
    /// How many of ``media`` are photos; the rest are videos.
    var photoCount: Int
    var media: [Medium]
    var priority: Outbox.Priority
    /// Its place in line among posts of its priority: the first added
    /// first.
    var sequence: Int
    var status: Status
    /// Why it failed, when ``status`` is failed.
    var error: String?
    /// The `Idempotency-Key` of the post's document, the same on every
    /// attempt and across launches.
    var idempotencyKey: String
    /// The receipt of the post's document, once published.
    var postReceipt: Receipt?
    /// The size of the post's document, once published.
    var documentSize: Int64?

    /// The record with the outbox's copies of its media in `copies`: the
    /// folder of the app may have moved since they were written (an iOS
    /// app's container does, when the app is updated).
    func inFolder(_ copies: URL) -> OutboxRecord {
        var record = self
        for index in media.indices where media[index].isCopy {
            record.media[index].file = copies.appendingPathComponent(media[index].file.lastPathComponent)
        }
        return record
    }

    /// The post, its media read from their files.
    var post: Post {
        Post(
            text: text,
            photos: media.prefix(photoCount).map { Photo(media: $0.media) },
            videos: media.dropFirst(photoCount).map { Video(media: $0.media) },
            destination: destination
        )
    }

    /// Where upload `index` goes: medium `index`'s destination, or the
    /// post's for the document (the media's count).
    func destination(of index: Int) -> URL {
        media.indices.contains(index) ? media[index].destination : destination
    }

    /// What names upload `index` in every launch (a background session's
    /// tasks carry it): the post, by the key the record keeps, and medium
    /// `index`, or its document (the media's count).
    func uploadName(of index: Int) -> String {
        media.indices.contains(index) ? "\(idempotencyKey) medium \(index)" : "\(idempotencyKey) document"
    }

    /// The upload of medium `index`, with its idempotency key.
    func upload(_ index: Int) -> Media {
        var upload = media[index].media
        upload.idempotencyKey = media[index].idempotencyKey
        return upload
    }

    /// The receipts of the stored media, in order, when every medium is
    /// stored.
    var receiptsIfComplete: [UploadReceipt]? {
        let receipts = media.compactMap { $0.receipt?.receipt }
        return receipts.count == media.count ? receipts : nil
    }
}
