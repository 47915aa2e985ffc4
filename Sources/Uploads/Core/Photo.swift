import Foundation

/// A photo to upload: its image bytes and where they go.
public struct Photo: Sendable, Hashable {
    /// The image's bytes, destination and content type.
    public var media: Media

    /// Creates a photo from image bytes in memory.
    /// - Parameters:
    ///   - bytes: The encoded image.
    ///   - destination: Where the image goes.
    ///   - contentType: Its MIME type; JPEG by default.
    public init(bytes: Data, destination: URL, contentType: String = "image/jpeg") {
        media = Media(bytes: bytes, destination: destination, contentType: contentType)
    }

    /// Creates a photo from an image file, read only when uploaded.
    /// - Parameters:
    ///   - file: The image file.
    ///   - destination: Where the image goes.
    ///   - contentType: Its MIME type; JPEG by default.
    public init(file: URL, destination: URL, contentType: String = "image/jpeg") {
        media = Media(file: file, destination: destination, contentType: contentType)
    }

    /// A photo of `media`, as it was.
    init(media: Media) {
        self.media = media
    }
}
