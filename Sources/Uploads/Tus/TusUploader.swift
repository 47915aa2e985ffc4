import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An uploader to servers that speak tus 1.0 (tus.io's open protocol for
/// resumable uploads: Cloudflare Stream, Vimeo, Supabase Storage, Bunny
/// Stream, tusd), whose uploads resume where they stopped, in this process
/// or in the next one after the app was killed.
///
/// ```swift
/// let uploader = try TusUploader(
///     manifestFolder: applicationSupport.appendingPathComponent("tus"),
///     headers: ["Authorization": "Bearer \(token)"])
/// let video = Video(file: clip, destination: URL(string: "https://tus.example.com/files/")!)
/// let receipt = try await Job.uploading(video, using: uploader).value
/// print(receipt.finalURL)  // the upload's URL
/// ```
///
/// Each medium's destination is the server's creation endpoint, which
/// every medium may share. An upload of a medium:
///
/// - asks the server what it offers (`OPTIONS`, once per endpoint and
///   uploader): its extensions and checksum algorithms;
/// - creates an upload there (`POST` with `Upload-Length` and
///   `Upload-Metadata`: the medium's `filename` and `filetype`, and
///   ``metadata``'s), with the medium itself in the same request when it
///   is no larger than ``creationWithUploadLimit`` and the server offers
///   creation-with-upload;
/// - sends it in `PATCH`es of ``chunkSize`` bytes, each from the offset the
///   server's last answer gave, with its SHA-1 in `Upload-Checksum` where
///   the server takes one (``verifiesBytes``).
///
/// The receipt is the server's answer to the last request, its
/// ``UploadReceipt/location`` the upload's URL.
///
/// Every request is retried on its own, by the policy the upload is handed
/// through ``upload(_:attempts:progress:)`` (by publishing, its
/// ``PublishOptions/retry``); an upload made without one
/// (``upload(_:progress:)``) tries each request once, as every uploader
/// does.
/// A `PATCH` that failed may have left some of its bytes on the server, so
/// the attempt after it asks the server's offset (`HEAD`) first and sends
/// from there: no `PATCH` goes out at an offset the server does not hold.
/// What else the server may answer:
///
/// - `409 Conflict` (another offset than the server's): the offset is
///   asked and the upload goes on from it;
/// - `460 Checksum Mismatch`: the chunk is sent again, once; a second
///   refusal fails the upload;
/// - `404`, `410` or `403` (the server discarded the upload, which
///   expired; some answer `403` for it): a new upload is created and sent
///   from the start, once. So is an upload whose `Upload-Expires` has
///   passed when it resumes.
///
/// An upload resumes from a small manifest kept in ``manifestFolder``: the
/// upload's URL, which only the answer to its creation gave. Uploading the
/// same file to the same destination again asks the server's offset and
/// sends only the rest. Once the upload finished, its manifest is kept,
/// marked finished, for a week: an upload of the file with attempts that
/// check the storage first (``UploadAttempts/checksStorageFirst``, as an
/// ``Outbox``'s for a post it resumes) finds it whole and sends nothing;
/// any other is a new upload. What happens to an upload that does not
/// finish:
///
/// - It failed with an error that the policy that retried it counts as
///   retryable: nothing is discarded, and the manifest is kept for the
///   next attempt to resume.
/// - It was cancelled, or failed for good: the manifest is removed and the
///   upload terminated (`DELETE`) where the server offers termination.
///   (Unless it was cancelled with attempts that keep what is stored,
///   ``UploadAttempts/keepsStoredPartsWhenCancelled``, as an ``Outbox``'s
///   are when it pauses a post: then it is kept, to resume, until
///   ``discardResumableUpload(of:)``.)
///
/// For a server that hands out each upload's URL in advance (Vimeo's
/// `upload_link`, made by the app's backend), set `createsUploads` to
/// `false`: each medium's destination is then its upload's URL, which is
/// asked and sent to, and never created or terminated.
///
/// Media in memory are sent the same way. Those with an `Idempotency-Key`
/// (an ``Outbox``'s post document, whose key lasts across launches) keep a
/// manifest under their key; others resume within one upload only.
public final class TusUploader: ResumableUploader, Sendable {
    /// Where the manifests of uploads in progress are kept.
    public let manifestFolder: URL
    /// The bytes of each `PATCH`; 0 sends the rest of the file in one.
    public let chunkSize: Int64
    /// The largest medium sent in the request that creates its upload,
    /// where the server offers creation-with-upload.
    public let creationWithUploadLimit: Int64
    /// Sent with every request: credentials, usually.
    public let headers: [String: String]
    /// Whether each medium's destination is a creation endpoint (`true`)
    /// or the URL of an upload handed out in advance (`false`).
    public let createsUploads: Bool
    /// Whether each `PATCH` carries the SHA-1 of its bytes where the server
    /// announces the checksum extension with `sha1`; on by default.
    public let verifiesBytes: Bool
    /// The entries of each medium's `Upload-Metadata` besides its
    /// `filename` and `filetype`, which they replace when they name them.
    public let metadata: @Sendable (Media) -> [String: String]
    private let client: TusClient
    /// What each endpoint announced, asked once.
    private let servers = Lock<[URL: TusClient.Server]>([:])
    /// Whether the stale manifests were looked for: once per uploader, so
    /// that a finished upload does not read the whole folder.
    private let staleManifestsRemoved = Lock(false)

    /// Creates an uploader.
    /// - Parameters:
    ///   - manifestFolder: Where uploads keep the manifests they resume
    ///     from: a folder of the app's own that outlives the process, such
    ///     as one in Application Support. Created when needed.
    ///   - chunkSize: The bytes of each `PATCH`; 8 MiB by default. 0 sends
    ///     the rest of the file in one `PATCH`. Some servers want a given
    ///     size: Cloudflare Stream, a multiple of 256 KiB from 5 to
    ///     200 MiB; Supabase Storage, exactly 6 MiB.
    ///   - creationWithUploadLimit: The largest medium sent in the request
    ///     that creates its upload, where the server offers it; 1 MiB by
    ///     default, 0 for none.
    ///   - headers: Sent with every request; none by default.
    ///   - metadata: Each medium's `Upload-Metadata` besides its `filename`
    ///     and `filetype`; none by default.
    ///   - createsUploads: `true` (the default) when each medium's
    ///     destination is a creation endpoint; `false` when it is the URL
    ///     of an upload handed out in advance.
    ///   - verifiesBytes: Whether `PATCH`es carry their SHA-1 where the
    ///     server takes it; `true` by default.
    ///   - configuration: The `URLSession`'s configuration; ephemeral by
    ///     default.
    /// - Throws: ``InvalidOptionError`` when `chunkSize` or
    ///   `creationWithUploadLimit` is negative.
    public init(
        manifestFolder: URL,
        chunkSize: Int64 = 8 * 1024 * 1024,
        creationWithUploadLimit: Int64 = 1024 * 1024,
        headers: [String: String] = [:],
        metadata: @escaping @Sendable (Media) -> [String: String] = { _ in [:] },
        createsUploads: Bool = true,
        verifiesBytes: Bool = true,
        configuration: URLSessionConfiguration = .ephemeral
    ) throws(InvalidOptionError) {
        try InvalidOptionError.check(chunkSize >= 0, "chunkSize", "must not be negative, got \(chunkSize)")
        try InvalidOptionError.check(
            creationWithUploadLimit >= 0, "creationWithUploadLimit",
            "must not be negative, got \(creationWithUploadLimit)")
        self.manifestFolder = manifestFolder
        self.chunkSize = chunkSize
        self.creationWithUploadLimit = creationWithUploadLimit
        self.headers = headers
        self.metadata = metadata
        self.createsUploads = createsUploads
        self.verifiesBytes = verifiesBytes
        client = TusClient(http: InProcessTransport(configuration: configuration), headers: headers)
    }

    /// Checks that `destination` is an `http` or `https` URL with a host.
    public func validate(destination: URL) throws(UploadError) {
        try destination.validateAsHTTPDestination()
    }

    /// One chunk: the most one `PATCH` sends.
    public func bytesInFlight(uploading media: Media, size: Int64) -> Int64 {
        Self.chunk(of: size, chunkSize: chunkSize)
    }

    /// The most one `PATCH` sends of `remaining` bytes: a chunk of
    /// `chunkSize`, or all of them when it is zero.
    static func chunk(of remaining: Int64, chunkSize: Int64) -> Int64 {
        chunkSize > 0 ? min(chunkSize, remaining) : remaining
    }

    /// A job that removes the manifest of an unfinished upload of `media`,
    /// if there is one, and terminates the upload where the server offers
    /// termination, in one attempt; it finishes once done, whatever the
    /// server answered. An upload that finished is left to the server.
    public func discardResumableUpload(of media: Media) -> Job<Void> {
        guard createsUploads, let file = TusManifest.source(of: media) else { return .succeeded }
        let filename = media.filename ?? media.defaultFilename
        return ManifestFile<TusManifest>.discard(in: manifestFolder, file: file, destination: media.destination) {
            [self] found in
            server(for: media.destination, filename: filename, asking: client).then { [client] server in
                guard server.extensions.contains("termination") else { return Job<Void>.succeeded }
                return client.terminate(found.manifest.uploadURL, destination: media.destination, filename: filename)
            }
        }
    }

    /// A job that uploads `media` through tus, each request tried once,
    /// and finishes with the server's last answer, whose location is the
    /// upload's URL. An upload that fails in a way that can pass keeps its
    /// manifest, for the next upload of the file to resume.
    ///
    /// Each performance of the job resumes the upload of the same file and
    /// destination that an earlier one left, if there is one.
    public func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
        uploadTryingEachRequestOnce(media, progress: progress)
    }

    /// A job that uploads `media` as ``upload(_:progress:)`` does, with
    /// each request retried as `attempts` says, and
    /// each attempt of a request limited to its time limit. Publishing
    /// uploads with this, and retries nothing around it.
    public func upload(
        _ media: Media,
        attempts: UploadAttempts,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        uploadRetryingEachRequest(media, attempts: attempts, progress: progress)
    }

    /// The upload of `media` through tus.
    func transfer(
        _ media: Media,
        size: Int64,
        retries: RequestRetries,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        let client = client.carried(by: retries.attempts)
        return TusUpload(
            client: client,
            server: server(
                for: media.destination, filename: media.filename ?? media.defaultFilename, asking: client),
            options: options(for: media), media: media, size: size, retries: retries, progress: progress
        ).job
    }

    /// How the upload of `media` is made.
    private func options(for media: Media) -> TusUpload.Options {
        var entries = ["filename": media.filename ?? media.defaultFilename, "filetype": media.contentType]
        entries.merge(metadata(media)) { $1 }
        let first = ["filename", "filetype"]
        let ordered =
            first.compactMap { key in entries[key].map { (key: key, value: $0) } }
            + entries.filter { !first.contains($0.key) }.sorted { $0.key < $1.key }.map {
                (key: $0.key, value: $0.value)
            }
        return TusUpload.Options(
            chunkSize: chunkSize, creationWithUploadLimit: creationWithUploadLimit, manifestFolder: manifestFolder,
            createsUploads: createsUploads, verifiesBytes: verifiesBytes, metadata: ordered,
            removeStaleManifests: { [self] in
                let first = staleManifestsRemoved.withLock { removed in
                    defer { removed = true }
                    return !removed
                }
                if first { TusManifest.removeStale(in: manifestFolder) }
            })
    }

    /// A job that finishes with what the server at `url` announced: asked
    /// by `client` with `OPTIONS` the first time, from memory after.
    private func server(for url: URL, filename: String, asking client: TusClient) -> Job<TusClient.Server> {
        Job { [self] controller in
            if let known = servers.withLock({ $0[url] }) {
                controller.finish(with: known)
                return
            }
            controller.perform(client.options(url, destination: url, filename: filename)) { [self] outcome in
                if case .success(let server) = outcome {
                    servers.withLock { $0[url] = server }
                }
                controller.complete(with: outcome)
            }
        }
    }
}
