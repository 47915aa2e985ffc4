import Foundation
import JobKit

// JobKit's core has no Foundation, so `LocalizedError` is adopted here:
// with Uploads linked, `localizedDescription` of a `JobError` reads as its
// description instead of "The operation could not be completed.".
extension JobError: LocalizedError {
    /// One sentence: what happened.
    public var errorDescription: String? { description }
}

// The same for `AllFailedError`, whose errors read as their own
// `localizedDescription`, such as an `UploadError`'s.
extension AllFailedError: LocalizedError {
    /// One line: how many jobs failed, and each error.
    public var errorDescription: String? {
        let count = errors.count == 1 ? "the one job" : "all \(errors.count) jobs"
        return "\(count) failed: " + errors.map(\.localizedDescription).joined(separator: "; ")
    }
}
