import Foundation
import JobKit

/// One performance of an ``S3Uploader``'s multipart upload of one file:
/// resume or create the upload, send the parts the storage lacks, complete
/// it; abort it when it is cancelled or fails for good.
///
/// It holds S3's requests, each made with an ``S3Client`` and retried by
/// the upload's ``RequestRetries``; what it shares with tus (the manifest,
/// keeping or discarding on a cancel or a failure, settling) is its
/// ``ResumableLifecycle``'s. It knows nothing of the uploader that made it.
final class MultipartUpload: Sendable {
    /// How the uploader wants its multipart uploads made.
    struct Options: Sendable {
        /// The size of each part but the last, unless the file needs more
        /// than ``S3Client/maximumPartCount`` parts of it.
        var partSize: Int64
        /// The most parts sent at once.
        var maxConcurrentParts: Int
        /// Where manifests are kept.
        var manifestFolder: URL
    }

    /// What the parts are and which of them the storage already holds.
    struct Plan: Sendable {
        var uploadID: String
        var parts: [Part]
        /// The ETags of the parts already stored, by part number.
        var stored: [Int: String]
    }

    /// One part: its number (from 1) and its bytes in the file.
    struct Part: Sendable, Hashable {
        var number: Int
        var offset: Int64
        var length: Int64
    }

    private let client: S3Client
    private let options: Options
    private let media: Media
    private let file: URL
    private let progress: @Sendable (UploadProgress) -> Void
    private let lifecycle: ResumableLifecycle<MultipartManifest>
    private var retries: RequestRetries { lifecycle.retries }

    init(
        client: S3Client,
        options: Options,
        media: Media,
        file: URL,
        retries: RequestRetries,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) {
        self.client = client
        self.options = options
        self.media = media
        self.file = file
        self.progress = progress
        lifecycle = ResumableLifecycle(
            folder: options.manifestFolder, file: file, destination: media.destination, retries: retries)
    }

    /// A job that runs the upload.
    var job: Job<UploadReceipt> {
        lifecycle.job(
            identity: { [file] () throws(UploadError) in try FileIdentity.of(file) }, discarding: abort, start)
    }

    /// Runs the upload of the file as it is at `identity`, and reports its
    /// outcome to `controller`.
    private func start(_ controller: Job<UploadReceipt>.Controller, _ identity: FileIdentity) {
        let upload = prepare(identity).then { [self] plan in
            sendParts(plan, identity).then { [self] etags in complete(plan.uploadID, etags, identity) }
        }
        controller.perform(upload) { [self] outcome in
            switch outcome {
            case .success:
                lifecycle.settle { settled in
                    if settled {
                        controller.complete(with: outcome)
                    } else {
                        controller.fail(with: CancellationError())
                    }
                }
            case .failure(let error):
                lifecycle.end(controller, failingWith: error, discarding: abort)
            }
        }
    }

    // MARK: - Steps

    /// The upload to send parts to: the one the manifest names, with the
    /// parts the storage holds, or a new one.
    private func prepare(_ identity: FileIdentity) -> Job<Plan> {
        guard let left = lifecycle.manifestLeft() else { return create(identity) }
        let manifest = left.manifest
        lifecycle.resume(manifest.uploadID, manifest: left)
        if let change = left.identity.change(to: identity, of: file) {
            return .failed(change)
        }
        let parts = Self.parts(size: identity.size, partSize: manifest.partSize)
        return listParts(manifest.uploadID).map { listed in
            var stored: [Int: String] = [:]
            for part in parts where listed[part.number]?.size == part.length {
                stored[part.number] = listed[part.number]?.etag
            }
            return Plan(uploadID: manifest.uploadID, parts: parts, stored: stored)
        }.recover { [self] error in
            // The storage no longer has the upload (it expired, or was
            // aborted): start a new one.
            guard case .httpStatus(let receipt) = error as? UploadError, receipt.status == 404 else {
                return .failed(error)
            }
            return lifecycle.startOver().then { [self] in create(identity) }
        }
    }

    /// Creates the upload and saves its manifest.
    ///
    /// The request is not cancelled with the job: an upload the storage
    /// creates is then known, and discarded, rather than left behind. (It
    /// is no longer retried once the job is cancelled. A time limit on an
    /// attempt still cancels it, as a lost connection would end it: an
    /// upload created then is left to the bucket's lifecycle rules.)
    private func create(_ identity: FileIdentity) -> Job<Plan> {
        let partSize = max(options.partSize, Self.ceilingDivision(identity.size, S3Client.maximumPartCount))
        let creation = retries.retrying(
            client.createMultipartUpload(media.destination, contentType: media.contentType), for: media,
            stopping: { [lifecycle] in lifecycle.isCancelled })
        return Job { [self] controller in
            creation.perform(on: controller.queue) { [self] outcome in
                controller.complete(
                    with: Result {
                        let uploadID = try outcome.get()
                        let manifest = lifecycle.newManifest(
                            MultipartManifest(uploadID: uploadID, partSize: partSize), identity: identity)
                        try lifecycle.adopt(uploadID, manifest: manifest, discarding: abort)
                        return Plan(
                            uploadID: uploadID, parts: Self.parts(size: identity.size, partSize: partSize), stored: [:])
                    })
            }
        }
    }

    /// Every part the storage holds of `uploadID`, page after page, each
    /// page retried on its own.
    private func listParts(_ uploadID: String, after marker: Int? = nil) -> Job<[Int: S3Client.StoredPart]> {
        retries.retrying(client.listParts(media.destination, uploadID: uploadID, after: marker), for: media)
            .then { [self] page in
                guard let next = page.nextMarker else { return .succeeded(page.parts) }
                return listParts(uploadID, after: next).map { page.parts.merging($0) { first, _ in first } }
            }
    }

    /// Sends the parts the storage lacks, each with its MD5, found a few
    /// parts ahead (see ``AheadDigests``); finishes with every part's ETag.
    /// Progress counts the parts the storage holds whole, from the start.
    private func sendParts(_ plan: Plan, _ identity: FileIdentity) -> Job<[Int: String]> {
        let merged = ProgressMerger(totals: plan.parts.map(\.length), deliver: progress)
        merged.finish(plan.parts.indices.filter { plan.stored[plan.parts[$0].number] != nil })
        let missing = plan.parts.indices.filter { plan.stored[plan.parts[$0].number] == nil }
        let bodies = missing.map { index in
            HTTPBody.file(file, offset: plan.parts[index].offset, length: plan.parts[index].length)
        }
        let md5s = client.md5s(of: bodies, window: options.maxConcurrentParts)
        let sends = missing.indices.map { position in
            let index = missing[position]
            let part = plan.parts[index]
            let body = bodies[position]
            return md5s[position].then { [self] md5 in
                let send = client.uploadPart(
                    media.destination, uploadID: plan.uploadID, number: part.number, body: body, md5: md5,
                    progress: { merged.update(index, bytesSent: $0.bytesSent) }
                )
                return retries.retrying(send, for: media)
            }
            .mapError { [file] error in identity.explaining(error, of: file) }
            .map { [self] etag in
                record(part: part.number, etag: etag)
                return etag
            }
        }
        return Job.collect(sends, maxConcurrent: options.maxConcurrentParts).map { etags in
            var all = plan.stored
            for (index, etag) in zip(missing, etags) {
                all[plan.parts[index].number] = etag
            }
            return all
        }
    }

    /// Joins the parts into the object, unless the file changed since the
    /// upload began: its parts may then hold bytes of two versions.
    private func complete(_ uploadID: String, _ etags: [Int: String], _ identity: FileIdentity) -> Job<UploadReceipt> {
        Job<Void> { [file] controller in
            if let change = identity.change(of: file) {
                controller.fail(with: change)
            } else {
                controller.finish()
            }
        }
        .then { [self] in
            retries.retrying(
                client.completeMultipartUpload(media.destination, uploadID: uploadID, etags: etags), for: media)
        }
    }

    // MARK: - Bookkeeping

    /// Notes in the manifest that `part` is stored, with its ETag.
    private func record(part: Int, etag: String) {
        lifecycle.update { $0.parts[part] = etag }
    }

    /// A job that aborts `uploadID`, in one attempt: the lifecycle's
    /// discard.
    private func abort(_ uploadID: String) -> Job<Void> {
        client.abortMultipartUpload(media.destination, uploadID: uploadID).attempt
    }

    // MARK: - Arithmetic

    /// The parts of a file of `size` bytes in parts of `partSize`.
    static func parts(size: Int64, partSize: Int64) -> [Part] {
        let count = max(Int(ceilingDivision(size, Int(partSize))), 1)
        return (0..<count).map { index in
            let offset = Int64(index) * partSize
            return Part(number: index + 1, offset: offset, length: min(partSize, size - offset))
        }
    }

    static func ceilingDivision(_ dividend: Int64, _ divisor: Int) -> Int64 {
        (dividend + Int64(divisor) - 1) / Int64(divisor)
    }
}
