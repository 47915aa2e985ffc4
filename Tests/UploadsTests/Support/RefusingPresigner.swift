import Foundation
import Uploads

/// A presigner for uploaders that are never performed.
struct RefusingPresigner: S3Presigner {
    func presignedURL(for operation: S3Operation, object: URL) async throws -> URL {
        throw URLError(.userAuthenticationRequired)
    }
}
