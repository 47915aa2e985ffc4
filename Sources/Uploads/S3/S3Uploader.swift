import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An uploader to S3-compatible object storage (Amazon S3, Cloudflare R2,
/// MinIO, Google Cloud Storage's XML API) through presigned URLs, with
/// resumable multipart uploads for large files.
///
/// The app never holds a credential: every request goes to a URL that an
/// ``S3Presigner`` (usually the app's backend) signs for it.
///
/// ```swift
/// let uploader = try S3Uploader(
///     presigner: Presigner(api: api),
///     manifestFolder: applicationSupport.appendingPathComponent("uploads"))
/// let receipt = try await Job.uploading(video, using: uploader).value
/// print(receipt.etag ?? "", receipt.finalURL)
/// ```
///
/// A file of ``multipartThreshold`` bytes or more goes up as a multipart
/// upload: its parts, ``partSize`` bytes each but the last, are sent at
/// most ``maxConcurrentParts`` at a time, each streamed from the file with a
/// `Content-Length` and retried on its own, so only the parts that failed
/// are sent again; then one request joins them. Smaller media, and media in
/// memory, go up in one `PUT`. The receipt carries the object's `ETag` and
/// its location.
///
/// Every request is retried on its own, by the policy the upload is handed
/// through ``upload(_:attempts:progress:)`` (by publishing, its
/// ``PublishOptions/retry``; by `Job.uploading(video, using: uploader,
/// attempts:)`, yours); an upload made without one
/// (``upload(_:progress:)``) tries each request once, as every uploader
/// does. Its jobs retry inside: hand them a policy rather than wrapping
/// them in `retry(_:)`, which would send each failing request again as
/// many times over.
///
/// A multipart upload can resume, in this process or in the next one after
/// the app was killed: its state is kept in a small manifest in
/// ``manifestFolder``, replaced atomically as parts finish. Uploading the
/// same file to the same destination again asks the storage which parts it
/// already holds and sends only the others. What happens to an upload that
/// does not finish:
///
/// - It failed with an error that the policy that retried it counts as
///   retryable (the network went away, and the retries ran out): nothing is discarded,
///   and the manifest is kept for the next attempt to resume.
/// - It was cancelled, or failed for good (a refused URL, a part list the
///   storage rejects, a file that changed since the upload began): the
///   manifest is removed and the upload aborted, which discards its parts.
///   (Unless it was cancelled with attempts that keep its stored parts,
///   ``UploadAttempts/keepsStoredPartsWhenCancelled``, as an ``Outbox``'s
///   are when it pauses a post: then it is kept, to resume, until
///   ``discardResumableUpload(of:)``.)
///   An upload still being created when the job is cancelled is aborted
///   once the storage answers with its ID. An abort that fails leaves the
///   parts to the bucket's lifecycle rules (S3's
///   `AbortIncompleteMultipartUpload`).
///
/// Every request with a body carries the body's MD5 as `Content-MD5`,
/// found by reading each part a few parts ahead of its send: the storage
/// refuses bytes changed on the way (`400 BadDigest`), which is not
/// retried, and a multipart upload is then aborted. The storage's `ETag` for a part or an
/// object is then checked where it is an MD5 (S3's is, but for objects
/// encrypted with KMS keys or the customer's, which its answer says): a
/// part's against its MD5, a multipart object's against the MD5 of its
/// parts' MD5s. A mismatch fails with
/// ``UploadError/storedObjectDiffers(_:reason:)`` and aborts the multipart
/// upload; an object stored by one `PUT` stays as stored. A file changed
/// on disk while it was sent fails with
/// ``UploadError/fileChanged(_:reason:)``, and no object is made of two
/// versions of it.
///
/// Progress counts bytes across all parts, parts already stored included,
/// and never goes backwards, not even when a part is sent again.
///
/// The time limit of an attempt (``UploadAttempts/timeout``, publishing's
/// ``PublishOptions/uploadTimeout``) applies to each request: a stalled
/// part fails transiently and is sent again. A time limit on the whole
/// upload (`timeout(after:)`) cancels it when it runs out, which aborts it:
/// give a large video a generous one, or none.
public final class S3Uploader: ResumableUploader, Sendable {
    /// S3's smallest part, except the last: 5 MiB.
    public static let minimumPartSize = S3Client.minimumPartSize
    /// S3's largest number of parts in one upload.
    public static let maximumPartCount = S3Client.maximumPartCount

    /// Signs each request.
    public let presigner: any S3Presigner
    /// Where the manifests of multipart uploads in progress are kept.
    public let manifestFolder: URL
    /// The smallest file sent as a multipart upload.
    public let multipartThreshold: Int64
    /// The size of each part but the last.
    public let partSize: Int64
    /// The most parts sent at once.
    public let maxConcurrentParts: Int
    /// Whether each request with a body carries its `Content-MD5` and the
    /// storage's MD5 `ETag`s are checked; on by default.
    ///
    /// Turn it off only for a storage that refuses `Content-MD5`, or whose
    /// `ETag`s look like MD5s without being them: bytes are then sent
    /// unchecked, and no part is read before it is sent.
    public var verifiesBytes: Bool { client.verifiesBytes }
    private let client: S3Client

    /// Creates an uploader.
    /// - Parameters:
    ///   - presigner: Signs each request; the app's backend, usually.
    ///   - manifestFolder: Where multipart uploads keep the manifests they
    ///     resume from: a folder of the app's own that outlives the
    ///     process, such as one in Application Support. Created when
    ///     needed.
    ///   - multipartThreshold: The smallest file sent as a multipart upload;
    ///     8 MiB by default.
    ///   - partSize: The size of each part but the last, at least
    ///     ``minimumPartSize``; 8 MiB by default. For a file so large that
    ///     it would need more than ``maximumPartCount`` parts, it is raised
    ///     to the size that fits.
    ///   - maxConcurrentParts: The most parts sent at once, at least 1; 4
    ///     by default.
    ///   - verifiesBytes: Whether requests carry `Content-MD5` and the
    ///     storage's `ETag`s are checked; `true` by default (see
    ///     ``verifiesBytes``).
    ///   - configuration: The `URLSession`'s configuration; ephemeral by
    ///     default.
    /// - Throws: ``InvalidOptionError`` when `multipartThreshold` is
    ///   negative, `partSize` below ``minimumPartSize`` or
    ///   `maxConcurrentParts` below 1.
    public init(
        presigner: some S3Presigner,
        manifestFolder: URL,
        multipartThreshold: Int64 = 8 * 1024 * 1024,
        partSize: Int64 = 8 * 1024 * 1024,
        maxConcurrentParts: Int = 4,
        verifiesBytes: Bool = true,
        configuration: URLSessionConfiguration = .ephemeral
    ) throws(InvalidOptionError) {
        try InvalidOptionError.check(
            multipartThreshold >= 0, "multipartThreshold", "must not be negative, got \(multipartThreshold)")
        try InvalidOptionError.check(
            partSize >= Self.minimumPartSize, "partSize",
            "must be at least \(Self.minimumPartSize) bytes (5 MiB, S3's smallest part), got \(partSize)")
        try InvalidOptionError.check(
            maxConcurrentParts >= 1, "maxConcurrentParts", "must be at least 1, got \(maxConcurrentParts)")
        self.presigner = presigner
        self.manifestFolder = manifestFolder
        self.multipartThreshold = multipartThreshold
        self.partSize = partSize
        self.maxConcurrentParts = maxConcurrentParts
        client = S3Client(
            presigner: presigner, http: InProcessTransport(configuration: configuration), verifiesBytes: verifiesBytes)
    }

    /// Checks that `destination` names an object: a URL with a path, which
    /// the presigner maps to the object's key.
    public func validate(destination: URL) throws(UploadError) {
        guard destination.path.contains(where: { $0 != "/" }) else {
            throw .invalidDestination(destination, reason: "it names no object (its path is empty)")
        }
    }

    /// A job that removes the manifest of an unfinished multipart upload of
    /// `media`, if there is one, and aborts the upload, in one attempt;
    /// it finishes once done, whatever the storage answered (an abort that
    /// fails leaves the parts to the bucket's lifecycle rules).
    public func discardResumableUpload(of media: Media) -> Job<Void> {
        guard case .file(let file) = media.content else { return .succeeded }
        return ManifestFile<MultipartManifest>.discard(
            in: manifestFolder, file: file, destination: media.destination
        ) { [client] found in
            client.abortMultipartUpload(media.destination, uploadID: found.manifest.uploadID).attempt
        }
    }

    /// A part for each part sent at once, for a file sent as a multipart
    /// upload; the whole size for one `PUT`.
    public func bytesInFlight(uploading media: Media, size: Int64) -> Int64 {
        guard case .file = media.content, size >= multipartThreshold else { return size }
        // The part size a multipart upload of this size uses.
        let part = max(partSize, MultipartUpload.ceilingDivision(size, Self.maximumPartCount))
        return min(Int64(maxConcurrentParts) * part, size)
    }

    /// A job that uploads `media` to the object its destination names, as
    /// one `PUT` or as a multipart upload, each request tried once, and
    /// finishes with a receipt carrying the object's `ETag` and location.
    /// A multipart upload that fails in a way that can pass keeps its
    /// manifest, for the next upload of the file to resume.
    ///
    /// Each performance of the job resumes the multipart upload of the same
    /// file and destination that an earlier one left, if there is one.
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

    /// The upload of `media`, as one `PUT` or as a multipart upload, unless
    /// the storage holds it already and the attempts ask to check first.
    func transfer(
        _ media: Media,
        size: Int64,
        retries: RequestRetries,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        let client = client.carried(by: retries.attempts)
        let upload: Job<UploadReceipt> =
            if case .file(let file) = media.content, size >= multipartThreshold {
                MultipartUpload(
                    client: client, options: multipartOptions, media: media, file: file, retries: retries,
                    progress: progress
                ).job
            } else {
                putObject(media, size: size, client: client, retries: retries, progress: progress)
            }
        guard retries.attempts.checksStorageFirst else { return upload }
        return storedObject(media, size: size, client: client, timeout: retries.attempts.timeout).then { stored in
            guard let stored else { return upload }
            progress(UploadProgress(bytesSent: size, bytesTotal: size))
            return .succeeded(stored)
        }
    }

    /// A job that finishes with the receipt of the object `media` would
    /// make, when the storage already holds it: an object at its
    /// destination whose `ETag` is the one `media`'s bytes make (their MD5,
    /// or for a multipart upload the MD5 of its parts' MD5s and their
    /// count); `nil` when it holds none, another, or cannot tell (a
    /// multipart upload in progress, `ETag`s that are not MD5s, a failed
    /// question), in one attempt, within `timeout`. The bytes are hashed
    /// only for an object of their size whose `ETag` has the shape theirs
    /// would. `client` asks.
    private func storedObject(
        _ media: Media, size: Int64, client: S3Client, timeout: Duration?
    ) -> Job<UploadReceipt?> {
        guard client.verifiesBytes else { return .succeeded(nil) }
        let bodies: [HTTPBody]
        let isMultipart: Bool
        switch media.content {
        case .bytes(let data):
            bodies = [.data(data)]
            isMultipart = false
        case .file(let file) where size < multipartThreshold:
            bodies = [.file(file, offset: 0, length: size)]
            isMultipart = false
        case .file(let file):
            // A multipart upload with a manifest is resumed as it is.
            let location = ManifestFile<MultipartManifest>.location(
                in: manifestFolder, file: file, destination: media.destination)
            if ManifestFile<MultipartManifest>.load(from: location, file: file, destination: media.destination) != nil {
                return .succeeded(nil)
            }
            let partSize = max(partSize, MultipartUpload.ceilingDivision(size, Self.maximumPartCount))
            bodies = MultipartUpload.parts(size: size, partSize: partSize).map {
                .file(file, offset: $0.offset, length: $0.length)
            }
            isMultipart = true
        }
        var question = client.headObject(media.destination).attempt
        if let timeout {
            question = question.timeout(after: timeout)
        }
        return question.then { [client] answer -> Job<UploadReceipt?> in
            guard let answer, let etag = answer.receipt.etag,
                answer.receipt.header("Content-Length").flatMap({ Int64($0) }) == size
            else { return .succeeded(nil) }
            let digits = etag.trimmingCharacters(in: CharacterSet(charactersIn: "\"")).lowercased()
            let shape = digits.split(separator: "-", omittingEmptySubsequences: false)
            guard shape.first?.count == 32, shape.count == (isMultipart ? 2 : 1),
                !isMultipart || shape.last == "\(bodies.count)"[...]
            else { return .succeeded(nil) }
            // Hashed only when an object is there, a part at a time.
            return Job.collect(client.md5s(of: bodies, window: 1)).map { md5s in
                let digests = md5s.compactMap { $0 }
                let expected =
                    isMultipart
                    ? S3Client.multipartETag(
                        of: Dictionary(uniqueKeysWithValues: digests.enumerated().map { ($0 + 1, $1.hex) }))
                    : digests.first?.hex
                let found = digits
                guard let expected, found == expected else { return nil }
                return try S3Client.storedObject(in: answer, of: media.destination, md5: nil)
            }
        }.recover { _ in .succeeded(nil) }
    }

    /// How multipart uploads are made.
    private var multipartOptions: MultipartUpload.Options {
        MultipartUpload.Options(
            partSize: partSize, maxConcurrentParts: maxConcurrentParts, manifestFolder: manifestFolder)
    }

    /// One `PUT` of the whole media, by `client`.
    private func putObject(
        _ media: Media,
        size: Int64,
        client: S3Client,
        retries: RequestRetries,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        let body: HTTPBody
        // The file as it was before its bytes were hashed, to tell a file
        // changed on disk from bytes changed on the way.
        let file: (url: URL, identity: FileIdentity)?
        switch media.content {
        case .bytes(let data):
            body = .data(data)
            file = nil
        case .file(let url):
            body = .file(url, offset: 0, length: size)
            file = (try? FileIdentity.of(url)).map { (url, $0) }
        }
        return client.md5s(of: [body], window: 1)[0].then { [client] md5 in
            let put = client.putObject(
                media.destination, contentType: media.contentType, body: body, md5: md5, progress: progress)
            return retries.retrying(put, for: media)
        }
        .mapError { error in file.map { $0.identity.explaining(error, of: $0.url) } ?? error }
    }
}
