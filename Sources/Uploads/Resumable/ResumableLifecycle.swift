import Foundation
import JobKit

/// What one performance of a resumable upload does besides its requests,
/// the same for an S3 multipart upload and a tus upload.
///
/// It takes on the upload a manifest names, or the one the protocol
/// creates, keeps the manifest up to date, and ends in one of three ways:
///
/// - **Settled**: the server holds the whole file. The manifest becomes
///   what the protocol says (removed, or marked finished), then the job
///   finishes.
/// - **Kept**: cancelled, or failed with an error that the policy that
///   retried it counts as retryable. The upload and its manifest stay for
///   the next attempt to resume, unless a cancel comes with attempts that
///   do not keep what is stored.
/// - **Discarded**: failed for good, or cancelled without keeping. The
///   manifest is removed (so that no later performance resumes it), then
///   the upload is discarded on the server (S3's abort, tus's termination)
///   in one attempt, on the job's queue. A failure fails the job once that
///   is done; a cancel has completed it already. An upload its manifest
///   names as finished (the server's copy of the file) is never
///   discarded: it stays, and so does its manifest.
///
/// The manifest's writes are decided under one lock, in order, and made
/// outside it, one at a time (see ``Handoff``); a request that must follow
/// them (a discard, the creation of a new upload after a lost one) waits
/// for them.
final class ResumableLifecycle<Manifest: ResumableManifest>: Sendable {
    typealias Handle = Manifest.Handle
    /// A request that discards an upload on the server, in one attempt;
    /// `nil` where the upload cannot be discarded.
    typealias Discard = @Sendable (Handle) -> Job<Void>?

    private struct State: Sendable {
        /// The queue of the performance, once it began.
        var queue: (any JobQueue)?
        /// The upload, once it is known: created, read from a manifest or
        /// handed out.
        var handle: Handle?
        /// The manifest as it is to be on disk, its last write decided;
        /// `nil` for an upload that keeps none.
        var manifest: ManifestFile<Manifest>?
        /// The job was cancelled.
        var cancelled = false
        /// Set once the upload is settled or discarded, so that nothing
        /// else discards it or writes its manifest.
        var settled = false
        /// The manifest's next write.
        var write: Write?
    }

    /// A change to the manifest's file.
    private enum Write: Sendable {
        /// Writes the manifest if the one on disk names the same upload.
        case replace(ManifestFile<Manifest>)
        /// Removes the manifest if it still names this upload.
        case remove(Handle)
    }

    /// The retries of the upload's requests.
    let retries: RequestRetries
    /// Where the manifest is kept; `nil` for an upload that keeps none.
    let location: URL?
    private let file: URL?
    private let destination: URL
    private let state: Handoff<State, Write?>

    /// The lifecycle of an upload of `file` (`nil` for one that keeps no
    /// manifest) to `destination`, whose manifest is kept in `folder`.
    init(folder: URL, file: URL?, destination: URL, retries: RequestRetries) {
        self.retries = retries
        self.file = file
        self.destination = destination
        let location = file.map { ManifestFile<Manifest>.location(in: folder, file: $0, destination: destination) }
        self.location = location
        let take: @Sendable (inout State) -> Write? = { state in
            defer { state.write = nil }
            return state.write
        }
        state = Handoff(State(), take: take) { write in
            guard let location, let write else { return }
            switch write {
            case .replace(let manifest): manifest.replace(at: location)
            case .remove(let handle): ManifestFile<Manifest>.remove(at: location, ifItNames: handle)
            }
        }
    }

    /// Whether the job was cancelled.
    var isCancelled: Bool { state.read(\.cancelled) }

    /// The upload, once it is known.
    var handle: Handle? { state.read(\.handle) }

    /// A job that takes the file's `identity` (failing at once with its
    /// error, when the file cannot be read), begins the lifecycle, then
    /// runs `body` with its controller and the identity: one performance
    /// of the upload.
    func job<Success>(
        identity: @escaping @Sendable () throws(UploadError) -> FileIdentity,
        discarding request: @escaping Discard,
        _ body: @escaping @Sendable (Job<Success>.Controller, FileIdentity) -> Void
    ) -> Job<Success> {
        Job { [self] controller in
            let found: FileIdentity
            do {
                found = try identity()
            } catch {
                controller.fail(with: error)
                return
            }
            begin(controller, discarding: request)
            body(controller, found)
        }
    }

    /// Begins the performance `controller` reports: a cancel discards the
    /// upload with `request`, unless its attempts keep what is stored.
    private func begin<Success>(_ controller: Job<Success>.Controller, discarding request: @escaping Discard) {
        let keeps = retries.attempts.keepsStoredPartsWhenCancelled
        state.update { state in
            state.queue = controller.queue
            return false
        }
        controller.onCancel { [self] in
            // The requests in flight are cancelled with the job; the upload,
            // if it is known yet, is then discarded in the background. (One
            // still being created is discarded once it is: see `adopt`.)
            state.update { state in
                state.cancelled = true
                return false
            }
            if !keeps { perform(discard(request)) }
        }
    }

    // MARK: - Taking an upload on

    /// The manifest an earlier performance left for this file and
    /// destination, if there is one.
    func manifestLeft() -> ManifestFile<Manifest>? {
        guard let location, let file else { return nil }
        return ManifestFile.load(from: location, file: file, destination: destination)
    }

    /// The manifest of a new upload that `manifest` names, of the file as
    /// it is at `identity`; `nil` for an upload that keeps none.
    func newManifest(_ manifest: Manifest, identity: FileIdentity) -> ManifestFile<Manifest>? {
        guard location != nil, let file else { return nil }
        return ManifestFile(file: file, destination: destination, identity: identity, manifest: manifest)
    }

    /// Takes on the upload `handle`: the one `manifest` names, or one
    /// handed out in advance (no manifest).
    func resume(_ handle: Handle, manifest: ManifestFile<Manifest>?) {
        state.update { state in
            state.handle = handle
            state.manifest = manifest
            return false
        }
    }

    /// A job that forgets the upload taken on, which the server no longer
    /// has (or which holds other bytes), once its manifest is removed:
    /// the protocol then creates a new one. It fails with
    /// `CancellationError` when the job was cancelled meanwhile: no new one
    /// is made (and the old one is discarded, unless the attempts keep
    /// what is stored).
    func startOver() -> Job<Void> {
        retries.forgetFailure()
        let goesOn = state.update { state in
            guard !state.cancelled, !state.settled else { return (false, actOn: false) }
            guard let old = state.handle else { return (true, actOn: false) }
            state.handle = nil
            state.manifest = nil
            state.write = .remove(old)
            return (true, actOn: true)
        }
        guard goesOn else { return .failed(CancellationError()) }
        return afterManifestWrites()
    }

    /// Takes on the upload `handle` just created, its manifest `manifest`
    /// (`nil` for one that keeps none) written first: nothing else writes
    /// it until then. When the job was cancelled meanwhile, no discard saw
    /// the upload: it is discarded with `request`, and this throws
    /// `CancellationError`. A manifest that cannot be written throws its
    /// error once the upload is taken on: the upload fails, and is then
    /// discarded.
    func adopt(_ handle: Handle, manifest: ManifestFile<Manifest>?, discarding request: @escaping Discard) throws {
        var saved: Result<Void, UploadError> = .success(())
        if let manifest, let location {
            saved = Result { () throws(UploadError) in try manifest.save(to: location) }
        }
        let cancelled = state.update { state in
            guard !state.cancelled else {
                // Discarded here, whatever an earlier discard settled.
                state.settled = true
                state.write = .remove(handle)
                return (true, actOn: true)
            }
            state.handle = handle
            if case .success = saved { state.manifest = manifest }
            return (false, actOn: false)
        }
        if cancelled {
            perform(discarding(handle, with: request))
            throw CancellationError()
        }
        try saved.get()
    }

    /// Changes the manifest (a part stored), and writes it once the writes
    /// decided before are made; nothing once the upload is settled or
    /// keeps no manifest.
    func update(_ change: (inout Manifest) -> Void) {
        state.update { state in
            guard !state.settled, var manifest = state.manifest else { return false }
            change(&manifest.manifest)
            state.manifest = manifest
            state.write = .replace(manifest)
            return true
        }
    }

    // MARK: - Ending

    /// The server holds the whole file: the manifest becomes what
    /// ``ResumableManifest/onceFinished()`` says, then `body` runs with
    /// `true`. It runs at once with `false` when the upload was settled
    /// already (a discard stands), or the job was cancelled as the last
    /// answer came and the server keeps finished uploads: the cancel then
    /// stands, and its manifest is left as it was.
    func settle(then body: @escaping @Sendable (_ settled: Bool) -> Void) {
        let settled = state.update { state in
            guard !state.settled, !(state.cancelled && Manifest.serverKeepsFinishedUploads) else {
                return (false, actOn: false)
            }
            state.settled = true
            if var manifest = state.manifest, let finished = manifest.manifest.onceFinished() {
                manifest.manifest = finished
                state.write = .replace(manifest)
            } else if let handle = state.handle {
                state.write = .remove(handle)
            } else {
                return (true, actOn: false)
            }
            return (true, actOn: true)
        }
        if settled {
            state.afterActions { body(true) }
        } else {
            body(false)
        }
    }

    /// Fails `controller` with `error`: once the manifest's writes are
    /// made when the upload is kept (a cancel, or an error the policy
    /// retries), once it is discarded with `request` otherwise. The discard
    /// is not a child of the job, so that a cancel now cannot stop it.
    func end<Success>(
        _ controller: Job<Success>.Controller, failingWith error: any Error, discarding request: @escaping Discard
    ) {
        guard UploadFailure(error) != .cancelled, !retries.attempts.retry.isRetryable(error) else {
            state.afterActions { controller.fail(with: error) }
            return
        }
        discard(request).perform(on: controller.queue) { _ in controller.fail(with: error) }
    }

    /// A job that discards the upload: removes its manifest, then discards
    /// it on the server with `request`. It only waits for the manifest's
    /// writes when there is nothing to discard, the upload was settled
    /// already, or it is a finished upload, the server's copy of the file,
    /// whose manifest stays.
    private func discard(_ request: Discard) -> Job<Void> {
        let handle: Handle? = state.update { state in
            guard !state.settled, let handle = state.handle else { return (nil, actOn: false) }
            state.settled = true
            guard state.manifest?.manifest.isFinished != true else { return (nil, actOn: false) }
            state.write = .remove(handle)
            return (handle, actOn: true)
        }
        guard let handle else { return afterManifestWrites() }
        return discarding(handle, with: request)
    }

    /// A job that discards `handle` on the server with `request` once the
    /// manifest's writes decided so far are made, in one attempt within
    /// the attempts' time limit, whatever the answer: one that fails leaves
    /// the upload to the server's own expiry.
    private func discarding(_ handle: Handle, with request: Discard) -> Job<Void> {
        guard var discard = request(handle) else { return afterManifestWrites() }
        if let limit = retries.attempts.timeout {
            discard = discard.timeout(after: limit)
        }
        return afterManifestWrites().then { [discard] in discard.recover { _ in } }
    }

    /// A job that finishes once the manifest's writes decided so far are
    /// made.
    private func afterManifestWrites() -> Job<Void> {
        Job { [state] controller in state.afterActions { controller.finish() } }
    }

    /// Performs `job` on the performance's queue, as no child of it.
    private func perform(_ job: Job<Void>) {
        guard let queue = state.read(\.queue) else { return }
        job.perform(on: queue) { _ in }
    }
}
