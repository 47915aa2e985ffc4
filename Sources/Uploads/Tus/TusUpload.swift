import Foundation
import JobKit

/// One performance of a ``TusUploader``'s upload of one medium: resume the
/// upload its manifest names, or create one; send the bytes the server
/// lacks, one `PATCH` at a time; terminate it when it is cancelled or
/// fails for good.
///
/// Each request is retried by the upload's ``RequestRetries``. A `PATCH`
/// that failed may have left some of its bytes on the server, so the
/// attempt after it asks the server's offset (`HEAD`) before sending: no
/// `PATCH` goes out at an offset the server does not hold.
final class TusUpload: Sendable {
    /// How the uploader wants its uploads made.
    struct Options: Sendable {
        /// The bytes of each `PATCH`; 0 for the rest of the file in one.
        var chunkSize: Int64
        /// The largest medium sent in the request that creates its upload,
        /// where the server offers creation-with-upload.
        var creationWithUploadLimit: Int64
        /// Where manifests are kept.
        var manifestFolder: URL
        /// Whether the destination is a creation endpoint (`false`: it is
        /// the upload's URL, handed out in advance).
        var createsUploads: Bool
        /// Whether `PATCH`es carry a SHA-1 checksum where the server takes
        /// one.
        var verifiesBytes: Bool
        /// The upload's `Upload-Metadata`.
        var metadata: [(key: String, value: String)]
        /// Removes the manifests of uploads finished a week ago or more:
        /// once per uploader, the first time one of its uploads finishes.
        var removeStaleManifests: @Sendable () -> Void
    }

    /// The state shared by the steps and the cancel handler.
    private struct State: Sendable {
        /// What the server announced.
        var server = TusClient.Server.core
        /// The upload's URL, once it is known.
        var uploadURL: URL?
        /// The bytes the server holds, as its last answer said.
        var offset: Int64 = 0
        /// A request that may have changed the offset failed: the server is
        /// to be asked before the next `PATCH`.
        var uncertain = false
        /// The last answer of the server about the upload.
        var lastAnswer: UploadReceipt?
        /// The job was cancelled.
        var cancelled = false
        /// Set once the upload is finished or discarded, so that nothing
        /// else terminates it or removes its manifest.
        var settled = false
        /// The upload is one the manifest names as finished: never
        /// terminated, whatever happens to this performance.
        var isFinishedUpload = false
    }

    /// Why the loop of `PATCH`es goes on after a refusal, and how often it
    /// did: a refusal that repeats fails the upload.
    private struct Refusals: Sendable {
        /// `409 Conflict`s in a row: the offset sent was not the server's.
        var conflicts = 0
        /// `460 Checksum Mismatch`es in a row.
        var checksums = 0
        /// The upload was created again after the server lost it.
        var recreated = false
    }

    private let client: TusClient
    private let server: Job<TusClient.Server>
    private let options: Options
    private let retries: RequestRetries
    private let media: Media
    private let size: Int64
    private let filename: String
    /// What the manifest names as the upload's source: the file, or for
    /// bytes in memory with an `Idempotency-Key` (an outbox's post
    /// document) a path made of the key; `nil` for other bytes.
    private let source: URL?
    /// The manifest's place; `nil` without a source, and for upload URLs
    /// handed out, which have nothing to remember.
    private let manifestLocation: URL?
    private let progress: @Sendable (UploadProgress) -> Void
    private let state = Lock(State())

    init(
        client: TusClient,
        server: Job<TusClient.Server>,
        options: Options,
        media: Media,
        size: Int64,
        retries: RequestRetries,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) {
        self.client = client
        self.server = server
        self.options = options
        self.retries = retries
        self.media = media
        self.size = size
        filename = media.filename ?? media.defaultFilename
        source = TusManifest.source(of: media)
        if let source, options.createsUploads {
            manifestLocation = TusManifest.location(
                in: options.manifestFolder, file: source, destination: media.destination)
        } else {
            manifestLocation = nil
        }
        self.progress = progress
    }

    /// A job that runs the upload.
    var job: Job<UploadReceipt> {
        Job { [self] controller in start(controller) }
    }

    /// Runs the upload and reports its outcome to `controller`.
    private func start(_ controller: Job<UploadReceipt>.Controller) {
        let identity: FileIdentity
        do {
            identity = try self.identity()
        } catch {
            controller.fail(with: error)
            return
        }
        let queue = controller.queue
        let keeps = retries.attempts.keepsStoredPartsWhenCancelled
        controller.onCancel { [self] in
            // The request in flight is cancelled with the job; the upload is
            // then terminated in the background, unless it is kept for a
            // later upload to resume with its manifest.
            state.withLock { $0.cancelled = true }
            if !keeps { discard()?.perform(on: queue) { _ in } }
        }
        let prepared = retries.retrying(HTTPCall(name: "OPTIONS", attempt: server), for: media).then { [self] server in
            state.withLock { $0.server = server }
            return prepare(identity)
        }
        controller.perform(prepared) { [self] outcome in
            switch outcome {
            case .success:
                report(state.withLock { $0.offset })
                next(controller, Refusals())
            case .failure(let error):
                end(controller, with: error)
            }
        }
    }

    /// Ends the upload with `error`: keeps it to resume when the error is a
    /// cancel or one that the policy retries; terminates it otherwise.
    private func end(_ controller: Job<UploadReceipt>.Controller, with error: any Error) {
        guard UploadFailure(error) != .cancelled, !retries.attempts.retry.isRetryable(error) else {
            controller.fail(with: error)
            return
        }
        // For good: terminated before the job fails. Not a child of the
        // job, so that a cancel now cannot stop it.
        guard let discard = discard() else {
            controller.fail(with: error)
            return
        }
        discard.perform(on: controller.queue) { _ in controller.fail(with: error) }
    }

    // MARK: - Steps

    /// Finds the upload to send to: the upload URL handed out, the one the
    /// manifest names (at the offset its server holds), or a new one.
    private func prepare(_ identity: FileIdentity) -> Job<Void> {
        guard options.createsUploads else {
            state.withLock { $0.uploadURL = media.destination }
            return retries.retrying(HTTPCall(name: "HEAD", attempt: ask(media.destination)), for: media)
        }
        guard let manifestLocation, let source,
            let manifest = TusManifest.load(from: manifestLocation, file: source, destination: media.destination)
        else { return create() }
        let began = FileIdentity(size: manifest.fileSize, modified: manifest.fileModified)
        let sameBytes = began == identity && manifest.bytesSHA1 == bytesSHA1
        if manifest.finished == true {
            // An upload of these bytes that finished, the server's copy of
            // them, never terminated here: found when asked to check first,
            // else (or for other bytes) this upload is another.
            guard retries.attempts.checksStorageFirst, sameBytes else { return create() }
            state.withLock { $0.isFinishedUpload = true }
        }
        state.withLock { $0.uploadURL = manifest.uploadURL }
        if case .file(let file) = media.content, let change = began.change(to: identity, of: file) {
            return .failed(change)
        }
        if !sameBytes {
            // Other bytes under the same key: another upload.
            return startOver(manifest.uploadURL)
        }
        if let expires = manifest.expires, expires <= Date().timeIntervalSince1970 {
            return startOver(manifest.uploadURL)
        }
        let head = HTTPCall(name: "HEAD", attempt: ask(manifest.uploadURL))
        return retries.retrying(head, for: media).recover { [self] error in
            // Gone, or another upload than this medium's: a new one.
            guard Self.isGone(error) || error is OtherLength else { return .failed(error) }
            return startOver(manifest.uploadURL)
        }
    }

    /// An upload whose length is not the medium's.
    private struct OtherLength: Error {}

    /// One attempt at asking the server the offset of the upload at
    /// `uploadURL`, which it then holds. An upload of another length than
    /// the medium's fails with ``OtherLength`` when it is the manifest's
    /// (a new one is made), with ``UploadError/invalidAnswer(_:reason:)``
    /// otherwise.
    private func ask(_ uploadURL: URL) -> Job<Void> {
        client.head(uploadURL, destination: media.destination, filename: filename).map { [self] answer in
            if let length = answer.length, length != size {
                guard manifestLocation == nil else { throw OtherLength() }
                throw UploadError.invalidAnswer(
                    media.destination, reason: "its upload of \(filename) is \(length) bytes long, not \(size)")
            }
            state.withLock { state in
                state.offset = answer.offset
                state.uncertain = false
                state.lastAnswer = answer.receipt
            }
        }
    }

    /// Forgets the upload at `old`, which the server no longer has (or
    /// discards), and creates a new one.
    private func startOver(_ old: URL) -> Job<Void> {
        retries.forgetFailure()
        let goesOn = state.withLock { state in
            guard !state.cancelled, !state.settled else { return false }
            state.uploadURL = nil
            state.offset = 0
            state.uncertain = false
            return true
        }
        guard goesOn else { return .failed(CancellationError()) }
        if let manifestLocation {
            TusManifest.remove(at: manifestLocation, ifItNames: old)
        }
        return create()
    }

    /// Creates the upload, with the whole medium in the same request when
    /// it is small and the server offers creation-with-upload, and saves
    /// its manifest.
    private func create() -> Job<Void> {
        let server = state.withLock { $0.server }
        // Not where what is stored is kept to resume (an outbox's uploads):
        // there the upload's URL is on disk before any byte goes, so that a
        // kill after the server stored the medium, before the app recorded
        // it, leaves an upload the next run finds finished.
        let body: HTTPBody? =
            size <= options.creationWithUploadLimit && server.extensions.contains("creation-with-upload")
                && !retries.attempts.keepsStoredPartsWhenCancelled
            ? self.body(from: 0, length: size) : nil
        let checksum = body.map(checksum) ?? .succeeded(nil)
        return checksum.then { [self] checksum in
            let creation = client.create(
                at: media.destination, length: size, metadata: options.metadata, body: body, checksum: checksum,
                destination: media.destination, filename: filename, progress: { [self] in report($0.bytesSent) })
            return retries.retrying(
                HTTPCall(name: "create upload", attempt: creation), for: media,
                stopping: { [self] in state.withLock { $0.cancelled } })
        }
        .mapError { TusClient.explaining($0, of: "POST", from: server) }
        .map { [self] created in try adopt(created, sentBody: body != nil) }
    }

    /// Takes on the upload just created: saves its manifest, or terminates
    /// it if the job was cancelled meanwhile.
    private func adopt(_ created: TusClient.Created, sentBody: Bool) throws {
        var saved: Result<Void, UploadError> = .success(())
        if let manifestLocation, let source {
            saved = Result {
                () throws(UploadError) in
                let identity = try identity()
                try TusManifest(
                    file: source.standardizedFileURL.path, destination: media.destination.absoluteString,
                    fileSize: identity.size, fileModified: identity.modified, uploadURL: created.uploadURL,
                    expires: created.expires?.timeIntervalSince1970, bytesSHA1: bytesSHA1
                ).save(to: manifestLocation)
            }
        }
        let cancelled = state.withLock { state in
            guard !state.cancelled else { return true }
            state.uploadURL = created.uploadURL
            state.offset = created.offset ?? 0
            // A body whose answer did not say how much of it was taken.
            state.uncertain = sentBody && created.offset == nil
            state.lastAnswer = created.receipt
            return false
        }
        if cancelled {
            // Cancelled while it was created: no discard saw its URL.
            state.withLock { $0.settled = true }
            if let manifestLocation {
                TusManifest.remove(at: manifestLocation, ifItNames: created.uploadURL)
            }
            terminate(created.uploadURL)?.perform(on: DispatchQueue.global()) { _ in }
            throw CancellationError()
        }
        try saved.get()
    }

    /// Sends the next `PATCH`, or finishes once the server holds the whole
    /// medium; goes on after a refusal that `refusals` still allows.
    private func next(_ controller: Job<UploadReceipt>.Controller, _ refusals: Refusals) {
        let (offset, uncertain) = state.withLock { ($0.offset, $0.uncertain) }
        guard uncertain || offset < size else {
            settle(controller)
            return
        }
        let send = Job<Void> { [self] controller in controller.perform(sendChunk()) { controller.complete(with: $0) } }
        let attempt = retries.retrying(
            HTTPCall(name: "PATCH at \(offset)", attempt: send), for: media,
            stopping: { [self] in state.withLock { $0.cancelled } })
        controller.perform(attempt) { [self] outcome in
            guard case .failure(let error) = outcome else {
                next(controller, Refusals(recreated: refusals.recreated))
                return
            }
            var refusals = refusals
            let status = (error as? UploadError).flatMap(Self.status)
            if status == 409, refusals.conflicts < 3 {
                // Another offset than the server's: ask it, and go on from
                // its own.
                refusals.conflicts += 1
                retries.forgetFailure()
                next(controller, refusals)
            } else if status == 460, refusals.checksums < 1 {
                // The bytes changed on the way: sent again, once.
                refusals.checksums += 1
                retries.forgetFailure()
                next(controller, refusals)
            } else if Self.isGone(error), options.createsUploads, !refusals.recreated {
                // The server no longer has the upload (it expired): a new
                // one, sent from the start.
                refusals.recreated = true
                let old = state.withLock { $0.uploadURL }
                let created = old.map(startOver) ?? create()
                controller.perform(created) { [self, refusals] outcome in
                    if case .failure(let error) = outcome {
                        end(controller, with: error)
                    } else {
                        next(controller, refusals)
                    }
                }
            } else {
                end(controller, with: error)
            }
        }
    }

    /// One attempt at the next `PATCH`: asks the server's offset first when
    /// it is uncertain, then sends a chunk from it, if any is left.
    private func sendChunk() -> Job<Void> {
        let (uploadURL, uncertain) = state.withLock { ($0.uploadURL, $0.uncertain) }
        guard let uploadURL else { return .failed(CancellationError()) }
        let asked: Job<Void> =
            uncertain
            ? ask(uploadURL).mapError { [self] error in
                error is OtherLength
                    ? UploadError.invalidAnswer(
                        media.destination, reason: "its upload of \(filename) changed length on the server")
                    : error
            }
            : .succeeded
        return asked.then { [self] in
            let offset = state.withLock { $0.offset }
            guard offset < size else { return .succeeded }
            let length = options.chunkSize > 0 ? min(options.chunkSize, size - offset) : size - offset
            let body = body(from: offset, length: length)
            return checksum(body).then { [self] checksum in
                // Until its answer says, the server may hold any part of it.
                state.withLock { $0.uncertain = true }
                return client.patch(
                    uploadURL, offset: offset, body: body, checksum: checksum, destination: media.destination,
                    filename: filename, progress: { [self] in report(offset + $0.bytesSent) })
            }.map { [self] answer in
                state.withLock { state in
                    state.offset = answer.offset
                    state.uncertain = false
                    state.lastAnswer = answer.receipt
                }
            }
        }
    }

    // MARK: - Bookkeeping

    /// The upload is finished: marks its manifest finished (and removes
    /// stale ones), then completes `controller` with the last answer,
    /// naming the upload's URL.
    private func settle(_ controller: Job<UploadReceipt>.Controller) {
        let settled = state.withLock { state -> (uploadURL: URL?, answer: UploadReceipt?)? in
            // Cancelled as the last answer came: the discard that the cancel
            // made stands.
            guard !state.settled, !state.cancelled else { return nil }
            state.settled = true
            return (state.uploadURL, state.lastAnswer)
        }
        guard let (uploadURL, answer) = settled else {
            controller.fail(with: CancellationError())
            return
        }
        if let manifestLocation, let uploadURL, let source,
            var manifest = TusManifest.load(from: manifestLocation, file: source, destination: media.destination),
            manifest.uploadURL == uploadURL
        {
            // Kept, so that an upload that checks the storage first finds it
            // stored: after a kill before the app recorded the receipt, the
            // outbox's next run sends nothing of it. Not saved: asked again.
            manifest.finished = true
            try? manifest.save(to: manifestLocation)
            options.removeStaleManifests()
        }
        var receipt = answer ?? UploadReceipt(destination: media.destination, status: 204)
        receipt.filename = filename
        if let uploadURL {
            receipt.headers["location"] = uploadURL.absoluteString
        }
        controller.finish(with: receipt)
    }

    /// Discards the upload: removes its manifest (so that no later
    /// performance resumes it) and returns a job that terminates it; `nil`
    /// when there is nothing to discard or it was already settled.
    private func discard() -> Job<Void>? {
        let discarded = state.withLock { state -> (uploadURL: URL, isFinished: Bool)? in
            guard !state.settled, let uploadURL = state.uploadURL else { return nil }
            state.settled = true
            return (uploadURL, state.isFinishedUpload)
        }
        guard let (uploadURL, isFinished) = discarded else { return nil }
        // A finished upload is the server's copy of the medium: its manifest
        // stays, and the upload too.
        if isFinished { return nil }
        if let manifestLocation {
            TusManifest.remove(at: manifestLocation, ifItNames: uploadURL)
        }
        return terminate(uploadURL)
    }

    /// A job that terminates the upload at `uploadURL` in one attempt,
    /// whatever the answer, where the server offers termination and the
    /// upload is one this uploader created; `nil` otherwise.
    private func terminate(_ uploadURL: URL) -> Job<Void>? {
        guard options.createsUploads, state.withLock({ $0.server.extensions.contains("termination") }) else {
            return nil
        }
        var terminate = client.terminate(uploadURL, destination: media.destination, filename: filename)
        if let limit = retries.attempts.timeout {
            terminate = terminate.timeout(after: limit)
        }
        return terminate.recover { _ in }
    }

    // MARK: - Bytes

    /// The SHA-1 of the medium's bytes in memory, in hex (small: an outbox's
    /// post document), which tells bytes of the same size apart; `nil` for
    /// a file.
    private var bytesSHA1: String? {
        guard case .bytes(let data) = media.content else { return nil }
        return SHA1.digest(of: data).hex
    }

    /// The size and modification date of the medium's file, or the size of
    /// its bytes in memory.
    private func identity() throws(UploadError) -> FileIdentity {
        switch media.content {
        case .file(let file): try FileIdentity.of(file)
        case .bytes(let data): FileIdentity(size: Int64(data.count), modified: 0)
        }
    }

    /// `length` bytes of the medium from `offset`.
    private func body(from offset: Int64, length: Int64) -> HTTPBody {
        switch media.content {
        case .file(let file): .file(file, offset: offset, length: length)
        case .bytes(let data): .data(data.subdata(in: Int(offset)..<Int(offset + length)))
        }
    }

    /// A job that finds the SHA-1 of `body` in base64 off the caller's
    /// thread, or `nil` when the server takes none or bytes are not
    /// verified.
    private func checksum(_ body: HTTPBody) -> Job<String?> {
        guard options.verifiesBytes, state.withLock({ $0.server.checksSHA1 }) else { return .succeeded(nil) }
        return Job { controller in
            DispatchQueue.global(qos: .utility).async {
                controller.complete(
                    with: Result { () throws(UploadError) in try body.digest(SHA1.self) }
                        .map { $0.base64EncodedString() })
            }
        }
    }

    /// Reports `bytes` sent of the medium.
    private func report(_ bytes: Int64) {
        progress(UploadProgress(bytesSent: bytes, bytesTotal: size))
    }

    // MARK: - Answers

    /// The status of an ``UploadError/httpStatus(_:)``.
    private static func status(_ error: UploadError) -> Int? {
        guard case .httpStatus(let receipt) = error else { return nil }
        return receipt.status
    }

    /// Whether `error` says the server no longer has the upload: `404`,
    /// `410`, or `403` (which some servers answer for an upload they
    /// discarded).
    private static func isGone(_ error: any Error) -> Bool {
        guard let status = (error as? UploadError).flatMap(status) else { return false }
        return status == 404 || status == 410 || status == 403
    }
}
