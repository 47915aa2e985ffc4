import Foundation
import JobKit
import Uploads

/// Forwards uploads to another uploader and tells about every failed
/// attempt, so that retries show in the Playground's output.
struct FailureReportingUploader: Uploader {
    let base: any Uploader
    let report: @Sendable (Media, any Error) -> Void

    func validate(destination: URL) throws(UploadError) {
        try base.validate(destination: destination)
    }

    func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<Void> {
        base.upload(media, progress: progress).mapError { error in
            if !(error is CancellationError) { report(media, error) }
            return error
        }
    }
}
