import Foundation
import JobKit

/// One performance of an ``S3Uploader``'s multipart upload of one file:
/// resume or create the upload, send the parts the storage lacks, complete
/// it; abort it when it is cancelled or fails for good.
///
/// It makes its calls with an ``S3Client``, each retried by the upload's
/// ``RequestRetries``, and knows nothing of the uploader that made it.
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

    /// The state shared by the steps and the cancel handler. The
    /// manifest's writes are decided under its lock, in order, and made
    /// outside it (see ``Handoff``).
    private struct State: Sendable {
        /// The upload's ID once it is known: created, or read from a
        /// manifest.
        var uploadID: String?
        /// The manifest as it is to be on disk, its last write decided.
        var manifest: MultipartManifest?
        /// The job was cancelled.
        var cancelled = false
        /// Set once the upload is finished or discarded, so that nothing
        /// else aborts it or writes its manifest.
        var settled = false
        /// The manifest's next write.
        var write: ManifestWrite?
    }

    /// A change to the manifest's file.
    private enum ManifestWrite: Sendable {
        case save(MultipartManifest)
        /// Removes the manifest if it still names this upload.
        case remove(uploadID: String)
    }

    private let client: S3Client
    private let options: Options
    private let retries: RequestRetries
    private let media: Media
    private let file: URL
    private let manifestLocation: URL
    private let progress: @Sendable (UploadProgress) -> Void
    private let state: Handoff<State, ManifestWrite?>

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
        self.retries = retries
        self.media = media
        self.file = file
        manifestLocation = MultipartManifest.location(
            in: options.manifestFolder, file: file, destination: media.destination)
        self.progress = progress
        let take: @Sendable (inout State) -> ManifestWrite? = { state in
            defer { state.write = nil }
            return state.write
        }
        state = Handoff(State(), take: take) { [manifestLocation] write in
            switch write {
            case .save(let manifest):
                // A manifest that cannot be written costs nothing but
                // this note: on resuming, the storage's own list of parts
                // is what counts.
                try? manifest.save(to: manifestLocation)
            case .remove(let uploadID):
                MultipartManifest.remove(at: manifestLocation, ifItNames: uploadID)
            case nil:
                break
            }
        }
    }

    /// A job that runs the upload.
    var job: Job<UploadReceipt> {
        Job { [self] controller in start(controller) }
    }

    /// Runs the upload and reports its outcome to `controller`.
    private func start(_ controller: Job<UploadReceipt>.Controller) {
        let identity: FileIdentity
        do {
            identity = try FileIdentity.of(file)
        } catch {
            controller.fail(with: error)
            return
        }
        let queue = controller.queue
        let keeps = retries.attempts.keepsStoredPartsWhenCancelled
        controller.onCancel { [self] in
            // The steps in flight are cancelled with the job; the upload, if
            // it has an ID yet, is then discarded in the background, unless
            // it is kept for a later upload to resume with its manifest.
            // (One still being created is discarded once its ID comes back:
            // it holds no part yet.)
            state.update { state in
                state.cancelled = true
                return false
            }
            if !keeps { discard()?.perform(on: queue) { _ in } }
        }
        let upload = prepare(identity).then { [self] plan in
            sendParts(plan, identity).then { [self] etags in complete(plan.uploadID, etags, identity) }
        }
        controller.perform(upload) { [self] outcome in
            switch outcome {
            case .success:
                settle { controller.complete(with: outcome) }
            case .failure(let error)
            where UploadFailure(error) == .cancelled || retries.attempts.retry.isRetryable(error):
                // Cancelled: `onCancel` discards it. Retryable by the policy
                // that retried it: kept, for the next attempt to resume,
                // once the manifest's writes in flight are made.
                state.afterActions { controller.complete(with: outcome) }
            case .failure:
                // For good: discarded before the job fails. Not a child of
                // the job, so that a cancel now cannot stop the abort.
                guard let discard = discard() else {
                    controller.complete(with: outcome)
                    return
                }
                discard.perform(on: queue) { _ in controller.complete(with: outcome) }
            }
        }
    }

    // MARK: - Steps

    /// The upload to send parts to: the one the manifest names, with the
    /// parts the storage holds, or a new one.
    private func prepare(_ identity: FileIdentity) -> Job<Plan> {
        guard let manifest = MultipartManifest.load(from: manifestLocation, file: file, destination: media.destination)
        else { return create(identity) }
        state.update { state in
            state.uploadID = manifest.uploadID
            state.manifest = manifest
            return false
        }
        let began = FileIdentity(size: manifest.fileSize, modified: manifest.fileModified)
        if let change = began.change(to: identity, of: file) {
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
            retries.forgetFailure()
            let goesOn = state.update { state in
                // Cancelled meanwhile: the old upload is being discarded,
                // and no new one is made.
                guard !state.cancelled, !state.settled else { return (false, actOn: false) }
                state.uploadID = nil
                state.manifest = nil
                state.write = .remove(uploadID: manifest.uploadID)
                return (true, actOn: true)
            }
            guard goesOn else { return .failed(CancellationError()) }
            return afterManifestWrites().then { [self] in create(identity) }
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
            stopping: { [self] in state.read(\.cancelled) })
        return Job { [self] controller in
            let queue = controller.queue
            creation.perform(on: queue) { [self] outcome in
                controller.complete(
                    with: Result { try adopt(outcome.get(), identity, partSize: partSize, queue: queue) })
            }
        }
    }

    /// Takes on the upload `uploadID` just created: saves its manifest, or
    /// discards it if the job was cancelled meanwhile.
    private func adopt(
        _ uploadID: String, _ identity: FileIdentity, partSize: Int64, queue: any JobQueue
    ) throws -> Plan {
        let manifest = MultipartManifest(
            file: file.standardizedFileURL.path, destination: media.destination.absoluteString,
            fileSize: identity.size, fileModified: identity.modified, uploadID: uploadID, partSize: partSize)
        // The first manifest is written here, before the upload is taken
        // on: nothing else writes it until then, and a manifest that
        // cannot be written fails the upload, which is then discarded.
        let saved = Result { () throws(UploadError) in try manifest.save(to: manifestLocation) }
        let cancelled = state.update { state in
            guard !state.cancelled else {
                // Cancelled while it was created: discarded here, whatever
                // an earlier discard settled.
                state.settled = true
                state.write = .remove(uploadID: uploadID)
                return (true, actOn: true)
            }
            state.uploadID = uploadID
            if case .success = saved { state.manifest = manifest }
            return (false, actOn: false)
        }
        if cancelled {
            abort(uploadID).perform(on: queue) { _ in }
            throw CancellationError()
        }
        try saved.get()
        return Plan(uploadID: uploadID, parts: Self.parts(size: identity.size, partSize: partSize), stored: [:])
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
        state.update { state in
            guard !state.settled, var manifest = state.manifest else { return false }
            manifest.parts[part] = etag
            state.manifest = manifest
            state.write = .save(manifest)
            return true
        }
    }

    /// The upload is finished: removes its manifest, then runs `then`.
    private func settle(then: @escaping @Sendable () -> Void) {
        state.update { state in
            state.settled = true
            guard let uploadID = state.uploadID else { return false }
            state.write = .remove(uploadID: uploadID)
            return true
        }
        state.afterActions(then)
    }

    /// A job that finishes once the manifest's writes decided so far are
    /// made.
    private func afterManifestWrites() -> Job<Void> {
        Job { [state] controller in state.afterActions { controller.finish() } }
    }

    /// Discards the upload: removes its manifest (so that no later
    /// performance resumes it) and returns a job that aborts it; `nil` when
    /// there is nothing to discard or it was already settled.
    private func discard() -> Job<Void>? {
        let uploadID: String? = state.update { state in
            guard !state.settled, let uploadID = state.uploadID else { return (nil, actOn: false) }
            state.settled = true
            state.write = .remove(uploadID: uploadID)
            return (uploadID, actOn: true)
        }
        return uploadID.map(abort)
    }

    /// A job that aborts `uploadID` once the manifest's writes decided so
    /// far are made, in one attempt, whatever the answer. An abort that
    /// fails leaves the parts to the storage's lifecycle rules.
    private func abort(_ uploadID: String) -> Job<Void> {
        var abort = client.abortMultipartUpload(media.destination, uploadID: uploadID).attempt
        if let limit = retries.attempts.timeout {
            // A failed upload completes once its abort did: never later than
            // the time limit of an attempt.
            abort = abort.timeout(after: limit)
        }
        return afterManifestWrites().then { [abort] in abort.recover { _ in } }
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
