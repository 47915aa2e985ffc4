import Foundation

/// One request to S3-compatible object storage that an ``S3Uploader``
/// needs a presigned URL for.
///
/// Each case is one S3 API call on one object: the app's backend signs it
/// with its credentials (in boto3, `generate_presigned_url` with the client
/// method in parentheses below; in the AWS SDKs, their presigners) and the
/// app sends it without ever holding a credential.
///
/// A request with a body carries the body's MD5 as its `Content-MD5`
/// (``contentMD5``), so that the storage refuses bytes changed on the way
/// (S3 answers `400 BadDigest`).
public enum S3Operation: Sendable, Hashable {
    /// `PutObject` (`put_object`): one `PUT` of a whole small object, whose
    /// MD5 is `contentMD5` (`nil` when the uploader does not verify bytes).
    case putObject(contentType: String, contentMD5: String?)
    /// `CreateMultipartUpload` (`create_multipart_upload`): a `POST` that
    /// starts a multipart upload and answers its upload ID.
    case createMultipartUpload(contentType: String)
    /// `UploadPart` (`upload_part`): a `PUT` of part `partNumber` (from 1)
    /// of the upload `uploadID`, whose MD5 is `contentMD5` (`nil` when the
    /// uploader does not verify bytes).
    case uploadPart(uploadID: String, partNumber: Int, contentMD5: String?)
    /// `CompleteMultipartUpload` (`complete_multipart_upload`): a `POST`
    /// that joins the parts into the object; the list of parts it sends
    /// has the MD5 `contentMD5` (`nil` when the uploader does not verify
    /// bytes).
    case completeMultipartUpload(uploadID: String, contentMD5: String?)
    /// `AbortMultipartUpload` (`abort_multipart_upload`): a `DELETE` that
    /// discards the upload and its parts.
    case abortMultipartUpload(uploadID: String)
    /// `ListParts` (`list_parts`): a `GET` of the parts the storage holds,
    /// from after `partNumberMarker` (`PartNumberMarker`) when it is not
    /// `nil`.
    case listParts(uploadID: String, partNumberMarker: Int?)
    /// `HeadObject` (`head_object`): a `HEAD` that asks whether the object
    /// exists, and its `ETag`. An upload asks it first only when told to
    /// (``UploadAttempts/checksStorageFirst``, which an ``Outbox`` sets for
    /// a post it resumes); a presigner that cannot sign it may throw, and
    /// the upload then sends the media.
    case headObject

    /// The S3 API action: `PutObject`, `CreateMultipartUpload`,
    /// `UploadPart`, `CompleteMultipartUpload`, `AbortMultipartUpload`,
    /// `ListParts` or `HeadObject`.
    public var action: String {
        switch self {
        case .putObject: "PutObject"
        case .createMultipartUpload: "CreateMultipartUpload"
        case .uploadPart: "UploadPart"
        case .completeMultipartUpload: "CompleteMultipartUpload"
        case .abortMultipartUpload: "AbortMultipartUpload"
        case .listParts: "ListParts"
        case .headObject: "HeadObject"
        }
    }

    /// The content type the object is stored with, for `PutObject` and
    /// `CreateMultipartUpload`.
    public var contentType: String? {
        switch self {
        case .putObject(let type, _), .createMultipartUpload(let type): type
        default: nil
        }
    }

    /// The MD5 of the request's body, base64-encoded, which the request
    /// sends as its `Content-MD5` header: for `PutObject`, `UploadPart` and
    /// `CompleteMultipartUpload`, unless the uploader's
    /// ``S3Uploader/verifiesBytes`` is off.
    ///
    /// The storage refuses a body that does not match it. A backend that
    /// signs the request's headers can sign it too (boto3: `ContentMD5` in
    /// `Params` of `put_object` and `upload_part`); the request carries it
    /// either way.
    public var contentMD5: String? {
        switch self {
        case .putObject(_, let md5), .uploadPart(_, _, let md5), .completeMultipartUpload(_, let md5): md5
        default: nil
        }
    }

    /// The multipart upload's ID, for every action but `PutObject` and
    /// `CreateMultipartUpload`.
    public var uploadID: String? {
        switch self {
        case .uploadPart(let id, _, _), .completeMultipartUpload(let id, _), .abortMultipartUpload(let id),
            .listParts(let id, _):
            id
        default: nil
        }
    }

    /// The part's number, for `UploadPart`.
    public var partNumber: Int? {
        if case .uploadPart(_, let number, _) = self { number } else { nil }
    }

    /// Where the list starts after, for `ListParts` after its first page.
    public var partNumberMarker: Int? {
        if case .listParts(_, let marker) = self { marker } else { nil }
    }

    /// The HTTP method the URL is signed for.
    public var httpMethod: String {
        switch self {
        case .putObject, .uploadPart: "PUT"
        case .createMultipartUpload, .completeMultipartUpload: "POST"
        case .abortMultipartUpload: "DELETE"
        case .listParts: "GET"
        case .headObject: "HEAD"
        }
    }

    /// What a snapshot calls the request: "part 2", "complete upload".
    var jobName: String {
        switch self {
        case .putObject: "put object"
        case .createMultipartUpload: "create upload"
        case .uploadPart(_, let number, _): "part \(number)"
        case .completeMultipartUpload: "complete upload"
        case .abortMultipartUpload: "abort upload"
        case .listParts: "list parts"
        case .headObject: "ask whether it is stored"
        }
    }
}

/// Hands out presigned URLs for uploads to S3-compatible object storage:
/// the part of an ``S3Uploader`` that the app implements, usually by
/// asking its own backend, which holds the credentials.
///
/// ```swift
/// struct Presigner: S3Presigner {
///     let api: any MediaAPI  // the app's client of its own backend
///
///     func presignedURL(for operation: S3Operation, object: URL) async throws -> URL {
///         try await api.presign(
///             operation.action, key: object.path, uploadID: operation.uploadID, partNumber: operation.partNumber)
///     }
/// }
/// ```
///
/// The URL is asked for right before each request and each retry, so it
/// can expire soon. A URL for ``S3Operation/putObject(contentType:contentMD5:)`` or
/// ``S3Operation/createMultipartUpload(contentType:)`` may bind the
/// content type: the request sends that `Content-Type`.
///
/// A request that is cancelled (or timed out) while it waits for its URL
/// completes at once, without cancelling the task that asks for it: the
/// answer, when it comes, is dropped. Cancelling a task that awaits
/// `URLSession.data(for:)` can deadlock FoundationNetworking on Linux
/// when the answer is arriving (swift-corelibs-foundation#5412, fixed after
/// Swift 6.3), which would stop that session for good; a presign call is
/// short, so it is left to end.
public protocol S3Presigner: Sendable {
    /// A URL that performs `operation` on the object that `object` names.
    ///
    /// - Parameters:
    ///   - operation: The S3 call, with its upload ID and part number.
    ///   - object: The media's destination, as given to ``Media``: it is the
    ///     presigner's to map to a bucket and key (its path, say).
    /// - Throws: Whatever stops it from signing. The request fails with it,
    ///   and is tried again if the policy that retries the request
    ///   (publishing's ``PublishOptions/retry``, or the attempts the upload
    ///   is handed) counts it as retryable (a `URLError` that can
    ///   pass is, by default). A multipart upload that fails with an error
    ///   that policy does not retry is aborted; throw a retryable one when
    ///   the backend is only unreachable.
    func presignedURL(for operation: S3Operation, object: URL) async throws -> URL
}
