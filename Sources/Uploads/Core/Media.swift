import Foundation

/// The bytes of one upload and where they go: a photo's or a video's image
/// data, or a post's document.
///
/// The bytes are either in memory or in a file on disk. A file is never
/// read whole: uploaders stream it, so a large video costs little memory.
///
/// ```swift
/// let clip = Media(
///     file: URL(fileURLWithPath: "/videos/surf.mov"),
///     destination: URL(string: "https://uploads.example.com/surf.mov")!,
///     contentType: "video/quicktime")
/// let size = try clip.byteCount()
/// ```
public struct Media: Sendable, Hashable {
    /// Where the bytes of a ``Media`` come from.
    public enum Content: Sendable, Hashable {
        /// Bytes in memory.
        case bytes(Data)
        /// A file on disk, read as it is uploaded.
        case file(URL)
    }

    /// The bytes to upload.
    public var content: Content
    /// Where the bytes go. Its meaning is the uploader's: a URL for
    /// `URLSessionUploader`, a path below a root folder for
    /// `DirectoryUploader`.
    public var destination: URL
    /// The MIME type sent with the bytes, such as `image/jpeg`.
    public var contentType: String
    /// The key that names this upload to a server that stores each upload
    /// once (the `Idempotency-Key` header of ``URLSessionUploader``), so
    /// that sending it again, after a lost answer or in the next launch of
    /// the app, does not store it twice; `nil` (the default) lets the
    /// uploader make one per upload. An `Outbox` keeps one per upload in
    /// its journal.
    public var idempotencyKey: String?
    /// The file name the server is told, by uploaders that tell one (the
    /// file part of a ``MultipartFormUploader``'s form); `nil` (the
    /// default) for ``defaultFilename``.
    public var filename: String?
    /// Text fields sent with the bytes by uploaders that send fields (a
    /// ``MultipartFormUploader`` puts them before the file, in this order);
    /// none by default. An `Outbox` keeps them, and ``filename``, in its
    /// journal.
    public var formFields: [FormField] = []

    /// Creates media from bytes in memory.
    public init(bytes: Data, destination: URL, contentType: String) {
        self.content = .bytes(bytes)
        self.destination = destination
        self.contentType = contentType
    }

    /// Creates media from a file on disk, read only when uploaded.
    public init(file: URL, destination: URL, contentType: String) {
        self.content = .file(file)
        self.destination = destination
        self.contentType = contentType
    }

    /// The file name the server is told when ``filename`` is `nil`: the
    /// file's own name, or for bytes in memory the destination's fragment
    /// (`#post.json`, which tells apart destinations that share an
    /// endpoint), else the last component of its path (`file` when it has
    /// none).
    public var defaultFilename: String {
        switch content {
        case .file(let url): url.lastPathComponent
        case .bytes:
            if let fragment = destination.fragment, !fragment.isEmpty {
                fragment
            } else if destination.lastPathComponent.isEmpty || destination.lastPathComponent == "/" {
                "file"
            } else {
                destination.lastPathComponent
            }
        }
    }

    /// The size of the bytes to upload.
    ///
    /// For a file this asks the file system, so it also tells whether the
    /// file can be uploaded at all.
    ///
    /// - Throws: ``UploadError/fileNotFound(_:)`` when the file does not
    ///   exist, ``UploadError/unreadableFile(_:reason:)`` when it cannot be
    ///   read or is not a regular file.
    public func byteCount() throws(UploadError) -> Int64 {
        switch content {
        case .bytes(let data):
            return Int64(data.count)
        case .file(let url):
            return try Media.sizeOfReadableFile(at: url)
        }
    }

    static func sizeOfReadableFile(at url: URL) throws(UploadError) -> Int64 {
        let path = url.path
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: path)
        } catch {
            throw FileManager.default.fileExists(atPath: path)
                ? .unreadableFile(url, reason: error.localizedDescription)
                : .fileNotFound(url)
        }
        guard attributes[.type] as? FileAttributeType == .typeRegular else {
            throw .unreadableFile(url, reason: "not a regular file")
        }
        guard FileManager.default.isReadableFile(atPath: path) else {
            throw .unreadableFile(url, reason: "permission denied")
        }
        return (attributes[.size] as? NSNumber)?.int64Value ?? 0
    }
}
