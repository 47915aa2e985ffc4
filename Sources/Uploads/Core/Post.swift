import Foundation

/// A post: its text, its photos and videos, and where its document goes.
///
/// Publishing a post uploads every photo and video first, then the post's
/// own document: a small JSON file with the text and the destinations of
/// its media, so that whoever reads the post finds media that are already
/// there.
///
/// ```swift
/// let post = Post(
///     text: "Surf's up",
///     photos: [beach, sunset],
///     videos: [surf],
///     destination: URL(string: "https://uploads.example.com/posts/42.json")!)
/// Job.publishing(post, using: uploader).perform { outcome in print(outcome) }
/// ```
public struct Post: Sendable, Hashable {
    /// The text of the post.
    public var text: String
    /// The photos, uploaded before the post.
    public var photos: [Photo]
    /// The videos, uploaded before the post.
    public var videos: [Video]
    /// Where the post's document goes. A post without one cannot be
    /// uploaded: publishing it fails with ``UploadError/missingDestination``
    /// before anything is uploaded.
    public var destination: URL?

    /// Creates a post.
    public init(text: String, photos: [Photo] = [], videos: [Video] = [], destination: URL?) {
        self.text = text
        self.photos = photos
        self.videos = videos
        self.destination = destination
    }

    /// Every photo and video of the post, photos first.
    public var media: [Media] {
        photos.map(\.media) + videos.map(\.media)
    }

    /// The post's own upload: a JSON document with its text and, for each
    /// photo and video, where it can be found and its version.
    ///
    /// Each medium is named by its receipt's ``UploadReceipt/finalURL``
    /// (the server's `Location`, else the destination) and
    /// ``UploadReceipt/etag``, taken from `receipts` in the order of
    /// ``media``. A medium without a receipt is named by its destination.
    ///
    /// ```json
    /// {
    ///   "photos" : [ { "etag" : "\"5d41402a\"", "url" : "https://cdn.example.com/m/81" } ],
    ///   "text" : "Surf's up",
    ///   "videos" : [ ]
    /// }
    /// ```
    ///
    /// - Parameter receipts: What the server answered each medium's
    ///   upload, photos first; none by default.
    /// - Throws: ``UploadError/missingDestination`` when the post has no
    ///   destination.
    public func document(receipts: [UploadReceipt] = []) throws(UploadError) -> Media {
        guard let destination else { throw .missingDestination }
        let named = media.enumerated().map { index, media in
            let receipt = receipts.indices.contains(index) ? receipts[index] : nil
            return Document.Medium(
                url: (receipt?.finalURL ?? media.destination).absoluteString,
                etag: receipt?.etag
            )
        }
        let document = Document(
            text: text,
            photos: Array(named.prefix(photos.count)),
            videos: Array(named.dropFirst(photos.count))
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        // Encoding strings and arrays of strings cannot fail.
        let bytes = (try? encoder.encode(document)) ?? Data()
        return Media(bytes: bytes, destination: destination, contentType: "application/json")
    }

    private struct Document: Encodable {
        struct Medium: Encodable {
            let url: String
            let etag: String?
        }
        let text: String
        let photos: [Medium]
        let videos: [Medium]
    }
}
