import Foundation

/// A video to upload: its bytes (usually a file, streamed as it is
/// uploaded) and where they go.
public struct Video: Sendable, Hashable {
    /// The video's bytes, destination and content type.
    public var media: Media

    /// Creates a video from a file, read only as it is uploaded.
    /// - Parameters:
    ///   - file: The video file.
    ///   - destination: Where the video goes.
    ///   - contentType: Its MIME type; MP4 by default.
    public init(file: URL, destination: URL, contentType: String = "video/mp4") {
        media = Media(file: file, destination: destination, contentType: contentType)
    }

    /// Creates a video from bytes in memory.
    /// - Parameters:
    ///   - bytes: The encoded video.
    ///   - destination: Where the video goes.
    ///   - contentType: Its MIME type; MP4 by default.
    public init(bytes: Data, destination: URL, contentType: String = "video/mp4") {
        media = Media(bytes: bytes, destination: destination, contentType: contentType)
    }

    /// A video of `media`, as it was.
    init(media: Media) {
        self.media = media
    }
}
