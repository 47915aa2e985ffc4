import Foundation

/// Why an ``Outbox`` could not open, keep a record, or do what it was
/// asked.
///
/// Each error's `localizedDescription` is one sentence that names the
/// folder, the file or the post.
public enum OutboxError: Error, Hashable, Sendable {
    /// The outbox's folder cannot be created or written to: nothing was
    /// opened, and nothing in it was changed.
    case folderNotWritable(URL, reason: String)
    /// Another ``Outbox`` has this folder open, in this process or in
    /// another: one folder has one outbox at a time.
    case alreadyOpen(URL)
    /// A record could not be written (a full disk, say). The record as it
    /// was before stays on disk, whole.
    case writeFailed(URL, reason: String)
    /// No post of the outbox has this destination.
    case unknownPost(URL)
    /// The outbox was closed.
    case closed(URL)
    /// The post failed in an earlier launch of the app, for this reason;
    /// ``Outbox/retry(_:)`` starts it again.
    case failedInEarlierLaunch(reason: String)
}

extension OutboxError: LocalizedError {
    /// One sentence: what happened, to which folder, file or post.
    public var errorDescription: String? { description }
}

extension OutboxError: CustomStringConvertible {
    /// One sentence: what happened, to which folder, file or post.
    public var description: String {
        switch self {
        case .folderNotWritable(let folder, let reason):
            "\(folder.path): cannot keep an outbox here: \(reason)"
        case .alreadyOpen(let folder):
            "\(folder.path): another Outbox has this folder open, in this process or in another"
        case .writeFailed(let file, let reason):
            "\(file.path): the outbox's record cannot be written: \(reason)"
        case .unknownPost(let destination):
            "\(UploadError.name(of: destination)): the outbox has no post with this destination"
        case .closed(let folder):
            "\(folder.path): the outbox is closed"
        case .failedInEarlierLaunch(let reason):
            reason
        }
    }
}
