import Foundation
import JobKit

// JobKit's core has no Foundation, so `LocalizedError` is adopted here:
// with Uploads linked, `localizedDescription` of a `JobError` reads as its
// description instead of "The operation could not be completed.".
extension JobError: LocalizedError {
    /// One sentence: what happened.
    public var errorDescription: String? { description }
}
