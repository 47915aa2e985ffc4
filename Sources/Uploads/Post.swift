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

    /// The post's own upload: a JSON document with its text and the
    /// destinations of its photos and videos.
    ///
    /// - Throws: ``UploadError/missingDestination`` when the post has no
    ///   destination.
    public func document() throws(UploadError) -> Media {
        guard let destination else { throw .missingDestination }
        let document = Document(
            text: text,
            photos: photos.map(\.media.destination.absoluteString),
            videos: videos.map(\.media.destination.absoluteString)
        )
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        // Encoding strings and arrays of strings cannot fail.
        let bytes = (try? encoder.encode(document)) ?? Data()
        return Media(bytes: bytes, destination: destination, contentType: "application/json")
    }

    private struct Document: Encodable {
        let text: String
        let photos: [String]
        let videos: [String]
    }
}
