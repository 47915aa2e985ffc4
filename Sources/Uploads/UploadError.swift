import Foundation

/// Why an upload could not be made.
///
/// Input problems (a missing file, a bad destination, a post with no
/// destination) are found before anything is uploaded.
public enum UploadError: Error, Hashable, Sendable {
    /// The file to upload does not exist.
    case fileNotFound(URL)
    /// The file to upload exists but cannot be read: no permission, or not
    /// a regular file.
    case unreadableFile(URL, reason: String)
    /// The uploader cannot upload to this destination: a URL it cannot
    /// reach, or a path that would land outside a ``DirectoryUploader``'s
    /// root folder.
    case invalidDestination(URL, reason: String)
    /// The post has no destination for its own document.
    case missingDestination
    /// The server answered with a status code outside 200...299.
    /// `body` holds the start of its answer, for the error message.
    case httpStatus(Int, body: String)
    /// The transfer itself failed: the connection dropped, the server's
    /// answer could not be read, or the destination could not be written.
    case transport(String)
    /// A fault injected on purpose by ``FaultInjectingUploader``.
    case injectedFault(URL)
}

extension UploadError: CustomStringConvertible {
    /// A one-line, human-readable account of the error.
    public var description: String {
        switch self {
        case .fileNotFound(let url):
            "file not found: \(url.path)"
        case .unreadableFile(let url, let reason):
            "cannot read \(url.path): \(reason)"
        case .invalidDestination(let url, let reason):
            "invalid destination \(url.absoluteString): \(reason)"
        case .missingDestination:
            "the post has no destination"
        case .httpStatus(let status, let body):
            body.isEmpty ? "server answered \(status)" : "server answered \(status): \(body)"
        case .transport(let reason):
            "upload failed: \(reason)"
        case .injectedFault(let url):
            "injected fault uploading \(url.absoluteString)"
        }
    }
}
