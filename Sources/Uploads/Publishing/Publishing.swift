import Foundation
import JobKit

/// One post's publishing: its inputs checked before any upload, its media
/// uploaded at most ``PublishOptions/maxConcurrentUploads`` at a time, then
/// its document built from their receipts and uploaded, every upload
/// retried by the uploader with the options' policy, and the progress of
/// them all merged into one report.
struct Publishing: Sendable {
    let post: Post
    let uploader: any Uploader
    let options: PublishOptions
    let progress: @Sendable (PublishProgress) -> Void

    /// What the checks found: the post's destination, and its media with
    /// their sizes.
    private struct Checked: Sendable {
        var destination: URL
        var media: [Media]
        var sizes: [Int64]
    }

    /// A job that publishes the post, named "publish".
    var job: Job<PublishReceipt> {
        Job { [self] controller in
            let checked: Checked
            do {
                checked = try check()
            } catch {
                controller.fail(with: error)
                return
            }
            controller.perform(publish(checked)) { controller.complete(with: $0) }
        }
        .named("publish")
    }

    /// The media, then the document.
    private func publish(_ checked: Checked) -> Job<PublishReceipt> {
        let media = checked.media
        let merged = ProgressMerger(
            destinations: media.map(\.destination) + [checked.destination], sizes: checked.sizes + [0],
            deliver: progress)
        let uploads = media.indices.map { upload(media[$0], with: uploader, reportingTo: merged, as: $0) }
        return Job<[UploadReceipt]>.collect(uploads, maxConcurrent: options.maxConcurrentUploads)
            .then { [self] receipts in
                let document: Media
                do {
                    document = try options.document(of: post, receipts: receipts)
                } catch {
                    return .failed(error)
                }
                merged.update(media.count, bytesSent: 0, bytesTotal: (try? document.byteCount()) ?? 0)
                return upload(document, with: documentUploader, reportingTo: merged, as: media.count).map {
                    PublishReceipt(media: receipts, post: $0)
                }
            }
    }

    /// The uploader of the post's document: the options', or the media's.
    private var documentUploader: any Uploader { options.documentUploader ?? uploader }

    /// The upload of `media` by `uploader`, retried as the options say,
    /// its progress told to `merged` as transfer `index`.
    private func upload(
        _ media: Media, with uploader: any Uploader, reportingTo merged: ProgressMerger<PublishProgress>, as index: Int
    ) -> Job<UploadReceipt> {
        uploader.upload(media, attempts: options.attempts(for: media.destination)) {
            merged.update(index, bytesSent: $0.bytesSent)
        }
        .map { receipt in
            merged.finish(index)
            return receipt
        }
    }

    /// Checks every input before the first upload: the options, the post's
    /// destination, every destination against the uploader, every
    /// medium's bytes.
    private func check() throws -> Checked {
        try options.validate()
        let (destination, sizes) = try options.check(post, uploadingWith: uploader)
        return Checked(destination: destination, media: post.media, sizes: sizes)
    }
}
