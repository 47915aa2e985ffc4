import Foundation
import JobKit

/// One performance of a ``TusUploader``'s upload of one medium: resume the
/// upload its manifest names, or create one; send the bytes the server
/// lacks, one `PATCH` at a time; terminate it when it is cancelled or
/// fails for good.
///
/// It holds tus's requests, each retried by the upload's
/// ``RequestRetries``; what it shares with S3's multipart uploads (the
/// manifest, keeping or discarding on a cancel or a failure, settling) is
/// its ``ResumableLifecycle``'s. A `PATCH` that failed may have left some
/// of its bytes on the server, so the attempt after it asks the server's
/// offset (`HEAD`) before sending: no `PATCH` goes out at an offset the
/// server does not hold.
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

    /// What the requests learnt of the upload on the server.
    private struct State: Sendable {
        /// What the server announced.
        var server = TusClient.Server.core
        /// The bytes the server holds, as its last answer said.
        var offset: Int64 = 0
        /// A request that may have changed the offset failed: the server is
        /// to be asked before the next `PATCH`.
        var uncertain = false
        /// The last answer of the server about the upload.
        var lastAnswer: UploadReceipt?
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
    private let media: Media
    private let size: Int64
    private let filename: String
    private let progress: @Sendable (UploadProgress) -> Void
    private let state = Lock(State())
    /// The upload's manifest is kept under what it names as the upload's
    /// source: the file, or for bytes in memory with an `Idempotency-Key`
    /// (an outbox's post document) a path made of the key. Other bytes,
    /// and upload URLs handed out, which have nothing to remember, keep
    /// none.
    private let lifecycle: ResumableLifecycle<TusManifest>
    private var retries: RequestRetries { lifecycle.retries }

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
        self.media = media
        self.size = size
        filename = media.filename ?? media.defaultFilename
        self.progress = progress
        lifecycle = ResumableLifecycle(
            folder: options.manifestFolder, file: options.createsUploads ? TusManifest.source(of: media) : nil,
            destination: media.destination, retries: retries)
    }

    /// A job that runs the upload.
    var job: Job<UploadReceipt> {
        lifecycle.job(
            identity: { [media] () throws(UploadError) in try FileIdentity.of(media) }, discarding: terminate, start)
    }

    /// Runs the upload of the medium as it is at `identity`, and reports
    /// its outcome to `controller`.
    private func start(_ controller: Job<UploadReceipt>.Controller, _ identity: FileIdentity) {
        let prepared = retries.retrying(HTTPCall(name: "OPTIONS", attempt: server), for: media).then { [self] server in
            state.withLock { $0.server = server }
            return prepare(identity)
        }
        controller.perform(prepared) { [self] outcome in
            switch outcome {
            case .success:
                report(state.withLock { $0.offset })
                next(controller, Refusals(), identity)
            case .failure(let error):
                lifecycle.end(controller, failingWith: error, discarding: terminate)
            }
        }
    }

    // MARK: - Steps

    /// Finds the upload to send to: the upload URL handed out, the one the
    /// manifest names (at the offset its server holds), or a new one.
    private func prepare(_ identity: FileIdentity) -> Job<Void> {
        guard options.createsUploads else {
            lifecycle.resume(media.destination, manifest: nil)
            return retries.retrying(HTTPCall(name: "HEAD", attempt: ask(media.destination)), for: media)
        }
        guard let left = lifecycle.manifestLeft() else { return create(identity) }
        let manifest = left.manifest
        let sameBytes = left.identity == identity && manifest.bytesSHA1 == bytesSHA1
        // An upload of these bytes that finished, the server's copy of them,
        // never terminated here: found when asked to check first, else (or
        // for other bytes) this upload is another.
        if manifest.isFinished, !(retries.attempts.checksStorageFirst && sameBytes) {
            return create(identity)
        }
        lifecycle.resume(manifest.uploadURL, manifest: left)
        if case .file(let file) = media.content, let change = left.identity.change(to: identity, of: file) {
            return .failed(change)
        }
        if !sameBytes {
            // Other bytes under the same key: another upload.
            return startOver(identity)
        }
        if let expires = manifest.expires, expires <= Date().timeIntervalSince1970 {
            return startOver(identity)
        }
        let head = HTTPCall(name: "HEAD", attempt: ask(manifest.uploadURL))
        return retries.retrying(head, for: media).recover { [self] error in
            // Gone, or another upload than this medium's: a new one.
            guard TusClient.isGone(error) || error is OtherLength else { return .failed(error) }
            return startOver(identity)
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
                guard lifecycle.location == nil else { throw OtherLength() }
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

    /// Forgets the upload taken on, which the server no longer has (or
    /// which holds other bytes), and creates a new one.
    private func startOver(_ identity: FileIdentity) -> Job<Void> {
        lifecycle.startOver().then { [self] in
            state.withLock { state in
                state.offset = 0
                state.uncertain = false
            }
            return create(identity)
        }
    }

    /// Creates the upload, with the whole medium in the same request when
    /// it is small and the server offers creation-with-upload, and saves
    /// its manifest.
    private func create(_ identity: FileIdentity) -> Job<Void> {
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
                HTTPCall(name: "create upload", attempt: creation, bytes: body?.count ?? 0), for: media,
                stopping: { [lifecycle] in lifecycle.isCancelled })
        }
        .mapError { TusClient.explaining($0, of: "POST", from: server) }
        .map { [self] created in
            let manifest = lifecycle.newManifest(
                TusManifest(
                    uploadURL: created.uploadURL, expires: created.expires?.timeIntervalSince1970,
                    bytesSHA1: bytesSHA1),
                identity: identity)
            try lifecycle.adopt(created.uploadURL, manifest: manifest, discarding: terminate)
            state.withLock { state in
                state.offset = created.offset ?? 0
                // A body whose answer did not say how much of it was taken.
                state.uncertain = body != nil && created.offset == nil
                state.lastAnswer = created.receipt
            }
        }
    }

    /// Sends the next `PATCH`, or finishes once the server holds the whole
    /// medium; goes on after a refusal that `refusals` still allows.
    private func next(_ controller: Job<UploadReceipt>.Controller, _ refusals: Refusals, _ identity: FileIdentity) {
        let (offset, uncertain) = state.withLock { ($0.offset, $0.uncertain) }
        guard uncertain || offset < size else {
            settle(controller)
            return
        }
        let send = Job<Void> { [self] controller in controller.perform(sendChunk()) { controller.complete(with: $0) } }
        // The chunk from the offset known now: what a probe weighs.
        let bytes = TusUploader.chunk(of: size - offset, chunkSize: options.chunkSize)
        let attempt = retries.retrying(
            HTTPCall(name: "PATCH at \(offset)", attempt: send, bytes: bytes), for: media,
            stopping: { [lifecycle] in lifecycle.isCancelled })
        controller.perform(attempt) { [self] outcome in
            guard case .failure(let error) = outcome else {
                next(controller, Refusals(recreated: refusals.recreated), identity)
                return
            }
            var refusals = refusals
            let status = TusClient.status(of: error)
            if status == 409, refusals.conflicts < 3 {
                // Another offset than the server's: ask it, and go on from
                // its own.
                refusals.conflicts += 1
                retries.forgetFailure()
                next(controller, refusals, identity)
            } else if status == 460, refusals.checksums < 1 {
                // The bytes changed on the way: sent again, once.
                refusals.checksums += 1
                retries.forgetFailure()
                next(controller, refusals, identity)
            } else if TusClient.isGone(error), options.createsUploads, !refusals.recreated {
                // The server no longer has the upload (it expired): a new
                // one, sent from the start.
                refusals.recreated = true
                controller.perform(startOver(identity)) { [self, refusals] outcome in
                    if case .failure(let error) = outcome {
                        lifecycle.end(controller, failingWith: error, discarding: terminate)
                    } else {
                        next(controller, refusals, identity)
                    }
                }
            } else {
                lifecycle.end(controller, failingWith: error, discarding: terminate)
            }
        }
    }

    /// One attempt at the next `PATCH`: asks the server's offset first when
    /// it is uncertain, then sends a chunk from it, if any is left.
    private func sendChunk() -> Job<Void> {
        let uncertain = state.withLock { $0.uncertain }
        guard let uploadURL = lifecycle.handle else { return .failed(CancellationError()) }
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
            let length = TusUploader.chunk(of: size - offset, chunkSize: options.chunkSize)
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
        lifecycle.settle { [self] settled in
            guard settled else {
                controller.fail(with: CancellationError())
                return
            }
            if lifecycle.location != nil {
                options.removeStaleManifests()
            }
            var receipt =
                state.withLock { $0.lastAnswer } ?? UploadReceipt(destination: media.destination, status: 204)
            receipt.filename = filename
            if let uploadURL = lifecycle.handle {
                receipt.headers["location"] = uploadURL.absoluteString
            }
            controller.finish(with: receipt)
        }
    }

    /// A job that terminates the upload at `uploadURL` in one attempt (the
    /// lifecycle's discard), where the server offers termination and the
    /// upload is one this uploader created; `nil` otherwise.
    private func terminate(_ uploadURL: URL) -> Job<Void>? {
        guard options.createsUploads, state.withLock({ $0.server.extensions.contains("termination") }) else {
            return nil
        }
        return client.terminate(uploadURL, destination: media.destination, filename: filename)
    }

    // MARK: - Bytes

    /// The SHA-1 of the medium's bytes in memory, in hex (small: an outbox's
    /// post document), which tells bytes of the same size apart; `nil` for
    /// a file.
    private var bytesSHA1: String? {
        guard case .bytes(let data) = media.content else { return nil }
        return SHA1.digest(of: data).hex
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
}
