import Foundation
import JobKit
import Uploads

/// An uploader that reports progress from many threads at once.
struct ThreadedProgressUploader: Uploader {
    let steps: Int

    func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
        Job { controller in
            let total = (try? media.byteCount()) ?? 0
            DispatchQueue.concurrentPerform(iterations: steps) { step in
                progress(UploadProgress(bytesSent: total * Int64(step) / Int64(steps), bytesTotal: total))
            }
            controller.finish(with: UploadReceipt(destination: media.destination))
        }
    }
}
