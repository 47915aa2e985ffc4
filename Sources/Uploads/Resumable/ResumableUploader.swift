import JobKit

/// An uploader whose uploads resume (``S3Uploader``'s multipart uploads,
/// ``TusUploader``): each request of an upload is retried on its own, by
/// the upload's ``RequestRetries``, so that a failed request costs only
/// itself, and the upload's failure is told to its attempts once, at its
/// end.
protocol ResumableUploader: Uploader {
    /// A job that uploads `media`, of `size` bytes, each request retried by
    /// `retries`.
    func transfer(
        _ media: Media,
        size: Int64,
        retries: RequestRetries,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt>
}

extension ResumableUploader {
    /// The upload of ``Uploader/upload(_:progress:)``: each request tried
    /// once.
    func uploadTryingEachRequestOnce(
        _ media: Media,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        transfer(media, attempts: UploadAttempts(retry: .never), progress: progress)
    }

    /// The upload of ``Uploader/upload(_:attempts:progress:)``: each
    /// request retried as `attempts` says, its progress metered.
    func uploadRetryingEachRequest(
        _ media: Media,
        attempts: UploadAttempts,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        .metered(media, progress: progress) { transfer(media, attempts: attempts, progress: $0) }
    }

    /// A job that uploads `media` once it and `attempts` are checked; its
    /// failure told to `attempts` once, with no wait.
    private func transfer(
        _ media: Media,
        attempts: UploadAttempts,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        Job { [self] controller in
            let retries = RequestRetries(attempts)
            let size: Int64
            do {
                try attempts.validate()
                size = try checkedSize(of: media)
            } catch {
                retries.reportFailure(error)
                controller.fail(with: error)
                return
            }
            controller.perform(transfer(media, size: size, retries: retries, progress: progress)) { outcome in
                if case .failure(let error) = outcome, !controller.isCompleted {
                    retries.reportFailure(error)
                }
                controller.complete(with: outcome)
            }
        }
    }
}
