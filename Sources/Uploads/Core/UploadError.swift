import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Why an upload could not be made.
///
/// Input problems (a missing file, a bad destination, a post with no
/// destination) are found before anything is uploaded. Each error's
/// `localizedDescription` is one sentence that names the file or the
/// destination:
///
/// ```swift
/// let error = UploadError.httpStatus(
///     UploadReceipt(destination: URL(string: "https://media.example.com/posts/1/video.mp4")!, status: 413))
/// print(error.localizedDescription)  // posts/1/video.mp4: the server answered 413 Payload Too Large
/// ```
///
/// ``failure`` says what each error means for trying again
/// (``UploadFailure``): a dropped connection or a server answering `503`
/// can pass by itself (``isTransient``), a `404` or a missing file cannot;
/// ``RetryPolicy`` retries only the former.
public enum UploadError: Error, Hashable, Sendable {
    /// The file to upload does not exist.
    case fileNotFound(URL)
    /// The file to upload exists but cannot be read: no permission, or not
    /// a regular file.
    case unreadableFile(URL, reason: String)
    /// The uploader cannot upload to this destination: a URL it cannot
    /// reach, or a path that would land outside a ``DirectoryUploader``'s
    /// root folder.
    case invalidDestination(URL, reason: String)
    /// The post has no destination for its own document.
    case missingDestination
    /// The server answered with a status outside 200...299; the receipt
    /// holds the status, the headers (`Retry-After`, say) and the start of
    /// the answer.
    case httpStatus(UploadReceipt)
    /// The connection to the server failed: it could not be made, it
    /// dropped, or the server's answer could not be read. The `URLError`
    /// is the session's own.
    case network(URL, URLError)
    /// One attempt of the upload took longer than its time limit and was
    /// cancelled.
    case timedOut(URL, after: Duration)
    /// The file could not be written where it goes: a folder that cannot be
    /// created, a full disk, no permission.
    case writeFailed(URL, reason: String)
    /// The file changed (its size or modification date) since its multipart
    /// upload began, so the parts already stored are not parts of it. The
    /// stale upload is aborted: uploading the file again starts afresh.
    case fileChanged(URL, reason: String)
    /// The server's answer to a successful request could not be
    /// understood: no `ETag` for a part, an upload ID missing from its
    /// XML, a body that is not the type it was read as
    /// (``UploadReceipt/decoded(as:using:)``), or one longer than the
    /// uploader keeps (its `answerLimit`).
    case invalidAnswer(URL, reason: String)
    /// The storage says it stored other bytes than those sent: the object's
    /// (or a part's) `ETag`, where it is an MD5, is not the MD5 of the
    /// bytes. A multipart upload is aborted.
    case storedObjectDiffers(URL, reason: String)
    /// The server accepted the medium but had not made it ready within
    /// ``MediaProcessing/timeLimit``; the receipt is its last answer. Not
    /// retried: the server holds the medium, and sending it again would
    /// store it twice.
    case notProcessed(UploadReceipt, after: Duration)
    /// A form (``FormData``) to this destination cannot be sent as given:
    /// a part's header is one the form writes itself, or not a valid
    /// header. Found before any request.
    case invalidForm(URL, reason: String)

    /// Whether the same upload may succeed if tried again later: its
    /// ``failure`` is ``UploadFailure/transient``,
    /// ``UploadFailure/offline`` or ``UploadFailure/pushback(retryAfter:)``.
    /// Every other error is permanent: trying again sends the same bytes to
    /// the same answer.
    public var isTransient: Bool { failure.isTransient }
}

extension UploadError: ClassifiedUploadError {
    /// What this error means for trying again: a connection that failed in
    /// a way that can pass (timed out, lost, refused, a failed DNS look-up)
    /// is transient, one of a device without network offline; a time limit
    /// reached is transient; a `429` or `503` is a pushback with its
    /// `Retry-After`, a `408`, `500`, `502` or `504` transient, and any
    /// other status what the server's error code means, where the uploader
    /// read one (``UploadReceipt/serverError``), or permanent. Every other
    /// case is permanent.
    public var failure: UploadFailure {
        switch self {
        case .httpStatus(let receipt):
            UploadFailure(status: receipt.status, retryAfter: receipt.retryAfter)
                ?? receipt.serverError?.failure ?? .permanent
        case .network(_, let error):
            UploadFailure(networkCode: error.code)
        case .timedOut:
            .transient
        case .fileNotFound, .unreadableFile, .invalidDestination, .missingDestination, .writeFailed, .fileChanged,
            .invalidAnswer, .storedObjectDiffers, .notProcessed, .invalidForm:
            .permanent
        }
    }
}

extension UploadError: LocalizedError {
    /// One sentence: what happened, to which file or destination.
    public var errorDescription: String? { description }
}

extension UploadError: CustomStringConvertible {
    /// One sentence: what happened, to which file or destination.
    public var description: String {
        switch self {
        case .fileNotFound(let file):
            "\(file.path): no such file"
        case .unreadableFile(let file, let reason):
            "\(file.path): cannot be read: \(reason)"
        case .invalidDestination(let destination, let reason):
            "\(Self.name(of: destination)): not a destination this uploader accepts: \(reason)"
        case .missingDestination:
            "the post has no destination for its document"
        case .httpStatus(let receipt):
            "\(Self.name(of: receipt)): the server answered \(Self.statusLine(receipt.status))"
                + (receipt.serverError.map { " (\($0.code): \($0.message))" }
                    ?? Self.excerpt(of: Self.jsonError(in: receipt.body) ?? receipt.bodyText))
        case .network(let destination, let error):
            "\(Self.name(of: destination)): \(URLErrorName.sentence(for: error.code))"
        case .timedOut(let destination, let limit):
            "\(Self.name(of: destination)): timed out after \(Self.seconds(limit))"
        case .writeFailed(let file, let reason):
            "\(file.path): cannot be written: \(reason)"
        case .fileChanged(let file, let reason):
            "\(file.path): changed during its upload: \(reason)"
        case .invalidAnswer(let destination, let reason):
            "\(Self.name(of: destination)): the server's answer could not be understood: \(reason)"
        case .notProcessed(let receipt, let limit):
            "\(Self.name(of: receipt)): still being processed after \(Self.seconds(limit))"
        case .storedObjectDiffers(let destination, let reason):
            "\(Self.name(of: destination)): the stored object differs from what was sent: \(reason)"
        case .invalidForm(let destination, let reason):
            "\(Self.name(of: destination)): the form cannot be sent: \(reason)"
        }
    }

    /// How a destination is named in a message: the path of a web URL
    /// (never its query, where presigned URLs keep their signature), the
    /// whole path of a file URL.
    /// How the upload an answer is to is named: its file, when the
    /// receipt names one (a form's, whose media all go to one endpoint),
    /// then its destination: `beach.jpg → api/v2/media`.
    static func name(of receipt: UploadReceipt) -> String {
        (receipt.filename.map { "\(oneLine($0)) → " } ?? "") + name(of: receipt.destination)
    }

    static func name(of destination: URL) -> String {
        if destination.isFileURL { return destination.path }
        let path = destination.path.drop(while: { $0 == "/" })
        return path.isEmpty ? (destination.host ?? destination.absoluteString) : String(path)
    }

    static func statusLine(_ status: Int) -> String {
        reasonPhrases[status].map { "\(status) \($0)" } ?? "\(status)"
    }

    /// The message of an answer that is a JSON object with a string
    /// `error` (Mastodon's API and many others) or `message` (Discord's,
    /// GitHub's).
    static func jsonError(in body: Data) -> String? {
        guard body.first == UInt8(ascii: "{"),
            let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any]
        else { return nil }
        return object["error"] as? String ?? object["message"] as? String
    }

    /// `text` on one line: its line breaks as spaces, trimmed.
    private static func oneLine(_ text: String) -> String {
        text.split(whereSeparator: \.isNewline).joined(separator: " ").trimmingCharacters(in: .whitespaces)
    }

    /// The start of a server's answer, on one line, or nothing.
    private static func excerpt(of body: String) -> String {
        let line = oneLine(body)
        guard !line.isEmpty else { return "" }
        return " (\"" + (line.count > 80 ? line.prefix(79) + "…" : line) + "\")"
    }

    /// `30 s`, `1.5 s`, `250 ms`.
    static func seconds(_ duration: Duration) -> String {
        let (seconds, attoseconds) = duration.components
        let value = Double(seconds) + Double(attoseconds) / 1e18
        if value < 1 { return "\(Int((value * 1000).rounded())) ms" }
        return value == value.rounded() ? "\(Int(value)) s" : String(format: "%.1f s", value)
    }

    private static let reasonPhrases: [Int: String] = [
        400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found", 405: "Method Not Allowed",
        408: "Request Timeout", 409: "Conflict", 410: "Gone", 411: "Length Required", 412: "Precondition Failed",
        413: "Payload Too Large", 415: "Unsupported Media Type", 422: "Unprocessable Content",
        429: "Too Many Requests", 500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway",
        503: "Service Unavailable", 504: "Gateway Timeout", 507: "Insufficient Storage",
    ]
}

/// Short names and sentences for the `URLError` codes an upload meets.
enum URLErrorName {
    static func sentence(for code: URLError.Code) -> String {
        let (what, name) = known[code] ?? ("the connection failed", "code \(code.rawValue)")
        return "\(what) (URLError.\(name))"
    }

    private static let known: [URLError.Code: (String, String)] = [
        .timedOut: ("the server did not answer in time", "timedOut"),
        .networkConnectionLost: ("the connection was lost", "networkConnectionLost"),
        .cannotConnectToHost: ("could not connect to the server", "cannotConnectToHost"),
        .cannotFindHost: ("no server has that name", "cannotFindHost"),
        .dnsLookupFailed: ("the server's name could not be looked up", "dnsLookupFailed"),
        .notConnectedToInternet: ("there is no network connection", "notConnectedToInternet"),
        .badServerResponse: ("the server's answer could not be read", "badServerResponse"),
        .secureConnectionFailed: ("a secure connection could not be made", "secureConnectionFailed"),
        .serverCertificateUntrusted: ("the server's certificate is not trusted", "serverCertificateUntrusted"),
        .badURL: ("the URL is malformed", "badURL"),
        .unsupportedURL: ("the URL's scheme is not supported", "unsupportedURL"),
        .cancelled: ("the request was cancelled", "cancelled"),
        .cannotOpenFile: ("the file to send could not be opened", "cannotOpenFile"),
        .dataLengthExceedsMaximum: ("the upload is larger than allowed", "dataLengthExceedsMaximum"),
    ]
}
