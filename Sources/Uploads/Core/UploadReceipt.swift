import Foundation
import JobKit

/// What the server answered an upload: its status, its headers and its
/// body.
///
/// Real media APIs answer an upload with what the post must name: an ID in
/// the body, the medium's final URL in `Location`, a version in `ETag`.
/// Every ``Uploader`` reports one receipt per successful upload, and
/// publishing a post builds the post's document from the receipts of its
/// media. A failed upload's receipt is in ``UploadError/httpStatus(_:)``.
///
/// ```swift
/// let receipt = try await Job.uploading(photo, using: uploader).value
/// print(receipt.status, receipt.etag ?? "no ETag", receipt.finalURL)
/// ```
///
/// A receipt keeps the whole body of a successful answer, up to the
/// uploader's bound (``defaultAnswerLimit``, 1 MiB, unless it was given
/// another): a longer answer fails the upload with
/// ``UploadError/invalidAnswer(_:reason:)`` rather than being cut. The
/// receipt of a refusal (``UploadError/httpStatus(_:)``) keeps the start
/// of its body, up to that bound. ``decoded(as:using:)`` reads a JSON
/// body:
///
/// ```swift
/// struct Attachment: Decodable { let id: String }
/// let attachment = try receipt.decoded(as: Attachment.self)
/// ```
public struct UploadReceipt: Sendable, Hashable {
    /// Where the upload went.
    public var destination: URL
    /// The HTTP status; `201` (Created) from uploaders that are not HTTP.
    public var status: Int
    /// The answer's headers, names in lower case (`etag`, `location`).
    public var headers: [String: String]
    /// The answer's body: the whole of it for a success, the start of it
    /// (up to the uploader's bound) for a refusal.
    public var body: Data
    /// The name of the file the upload sent, when the destination does not
    /// say which it was: a ``MultipartFormUploader``'s, whose media all go
    /// to one endpoint. Errors name it.
    public var filename: String?
    /// The error the server named in its answer's body, when the uploader
    /// that read the answer knows its format (a storage's XML `<Error>`
    /// document): errors show its code and message, and
    /// ``UploadError/failure`` reads what it means when the status alone
    /// does not say.
    public var serverError: ServerError?

    /// The most bytes of an answer's body an uploader keeps unless told
    /// otherwise: 1 MiB.
    public static let defaultAnswerLimit = 1 << 20

    /// Creates a receipt.
    /// - Parameters:
    ///   - destination: Where the upload went.
    ///   - status: The HTTP status; `201` by default.
    ///   - headers: The answer's headers; their names are lower-cased.
    ///   - body: The answer's body.
    public init(destination: URL, status: Int = 201, headers: [String: String] = [:], body: Data = Data()) {
        self.destination = destination
        self.status = status
        self.headers = Dictionary(headers.map { ($0.key.lowercased(), $0.value) }, uniquingKeysWith: { $1 })
        self.body = body
    }

    /// The value of the header `name`, whatever its case (in ``headers``
    /// too, which a caller may have changed).
    public func header(_ name: String) -> String? {
        let lowercased = name.lowercased()
        return headers[lowercased] ?? headers.first { $0.key.lowercased() == lowercased }?.value
    }

    /// The answer's `ETag`: the version of the stored medium.
    public var etag: String? { header("ETag") }

    /// The answer's `Location`, resolved against the destination: where
    /// the server says the medium now is.
    public var location: URL? {
        header("Location").flatMap { URL(string: $0, relativeTo: destination)?.absoluteURL }
    }

    /// Where the medium can be found: ``location`` when the server gave
    /// one, the destination otherwise.
    public var finalURL: URL { location ?? destination }

    /// The body as text (invalid UTF-8 replaced).
    public var bodyText: String { String(decoding: body, as: UTF8.self) }

    /// The body, read as JSON into a `T`.
    ///
    /// - Parameters:
    ///   - type: The type to read.
    ///   - decoder: What reads it; a `JSONDecoder` with its defaults by
    ///     default.
    /// - Throws: ``UploadError/invalidAnswer(_:reason:)`` when the body is
    ///   not a `T`, saying where it differs:
    ///   `api/v2/media: the server's answer could not be understood: no "id" at media[0]`.
    public func decoded<T: Decodable>(as type: T.Type = T.self, using decoder: JSONDecoder = JSONDecoder())
        throws(UploadError) -> T
    {
        do {
            return try decoder.decode(T.self, from: body)
        } catch let error as DecodingError {
            throw .invalidAnswer(destination, reason: Self.reason(error, body: body))
        } catch {
            throw .invalidAnswer(destination, reason: error.localizedDescription)
        }
    }

    /// What a decoding error says of the body, in a few words: what was
    /// missing or wrong, and where.
    private static func reason(_ error: DecodingError, body: Data) -> String {
        func place(_ path: [any CodingKey]) -> String {
            guard !path.isEmpty else { return "the top" }
            var text = ""
            for key in path {
                if let index = key.intValue {
                    text += "[\(index)]"
                } else {
                    text += (text.isEmpty ? "" : ".") + key.stringValue
                }
            }
            return text
        }
        /// A type as the JSON would name it: an object, an array, a String.
        func name(_ type: Any.Type) -> String {
            let name = "\(type)"
            if name.hasPrefix("Dictionary<") { return "an object" }
            if name.hasPrefix("Array<") { return "an array" }
            return "a \(name)"
        }
        switch error {
        case .keyNotFound(let key, let context):
            return "no \"\(key.stringValue)\" at \(place(context.codingPath))"
        case .valueNotFound(let type, let context):
            return "\(place(context.codingPath)) is null, not \(name(type))"
        case .typeMismatch(let type, let context):
            return "not \(name(type)) at \(place(context.codingPath))"
        case .dataCorrupted(let context):
            guard !body.isEmpty else { return "the body is empty, not JSON" }
            guard (try? JSONSerialization.jsonObject(with: body, options: .fragmentsAllowed)) != nil else {
                return "not JSON"
            }
            return "\(context.debugDescription) at \(place(context.codingPath))"
        @unknown default:
            return "\(error)"
        }
    }

    /// How long the server asks the client to wait before trying again,
    /// from its `Retry-After` header: a number of seconds, or an HTTP date
    /// measured from the answer's `Date` header (from now when it has
    /// none). A `429` without one is read from its `X-RateLimit-Reset`
    /// instead, the time its rate limit starts over (Mastodon's: an ISO
    /// 8601 time; others': seconds since 1970, or from now), measured the
    /// same way.
    /// `nil` without a valid header; never negative.
    public var retryAfter: Duration? {
        guard let value = header("Retry-After")?.trimmingCharacters(in: .whitespaces) else {
            guard status == 429, let value = header("X-RateLimit-Reset") else { return nil }
            let now = answered
            return Self.resetDate(value, now: now).map { Self.wait(until: $0, from: now) }
        }
        if let seconds = Int(value) {
            return seconds >= 0 ? .seconds(seconds) : nil
        }
        return HTTPDate.parse(value).map { Self.wait(until: $0, from: answered) }
    }

    /// When the server answered: its `Date` header, or now.
    private var answered: Date { header("Date").flatMap(HTTPDate.parse) ?? Date() }

    /// The time an `X-RateLimit-Reset` names: an ISO 8601 time, with or
    /// without fractions of a second, seconds since 1970, or (below a
    /// billion, a time before 2001) seconds from `now`.
    private static func resetDate(_ value: String, now: Date) -> Date? {
        let value = value.trimmingCharacters(in: .whitespaces)
        if let seconds = Double(value) {
            guard seconds.isFinite, seconds >= 0 else { return nil }
            return seconds < 1e9 ? now.addingTimeInterval(seconds) : Date(timeIntervalSince1970: seconds)
        }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: value) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: value)
    }

    /// From `now` to `date`, in milliseconds; zero when it is past, and
    /// at most a year.
    private static func wait(until date: Date, from now: Date) -> Duration {
        let seconds = min(max(date.timeIntervalSince(now), 0), 365 * 24 * 3600)
        return .milliseconds(Int64((seconds * 1000).rounded()))
    }
}

extension UploadReceipt {
    /// An error a server named in its answer's body: its own code and
    /// message, and what the code means for trying again.
    public struct ServerError: Sendable, Hashable {
        /// The server's name for the error: `SlowDown`, `InvalidPart`.
        public var code: String
        /// The server's sentence about it.
        public var message: String
        /// What the code means for trying again, when the uploader knows
        /// (a storage's `SlowDown` is ``UploadFailure/transient`` even in
        /// an answer whose status is `200`); `nil` leaves it to the
        /// status.
        public var failure: UploadFailure?

        /// Creates the reading of a server's error.
        public init(code: String, message: String, failure: UploadFailure? = nil) {
            self.code = code
            self.message = message
            self.failure = failure
        }
    }
}

/// HTTP dates (RFC 9110 §5.6.7): the preferred IMF-fixdate form,
/// `Sun, 06 Nov 1994 08:49:37 GMT`, and the two obsolete forms a recipient
/// must still accept, `Sunday, 06-Nov-94 08:49:37 GMT` and
/// `Sun Nov  6 08:49:37 1994`.
enum HTTPDate {
    private static let formats = [
        "EEE',' dd MMM yyyy HH':'mm':'ss 'GMT'",
        "EEEE',' dd'-'MMM'-'yy HH':'mm':'ss 'GMT'",
        "EEE MMM d HH':'mm':'ss yyyy",
    ]

    static func parse(_ text: String) -> Date? {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        let squeezed = text.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
        for format in formats {
            formatter.dateFormat = format
            if let date = formatter.date(from: squeezed) { return date }
        }
        return nil
    }
}

extension Job where Success == UploadReceipt {
    /// A job that performs this upload and reads the answer's body, as
    /// JSON, into a `T` (Alamofire's `responseDecodable(of:)`).
    ///
    /// ```swift
    /// struct Attachment: Decodable, Sendable { let id: String }
    /// let attachment = try await Job.uploading(photo, using: uploader).decoding(Attachment.self).value
    /// ```
    ///
    /// - Parameters:
    ///   - type: The type to read.
    ///   - decoder: What reads it, in every performance (set it up before,
    ///     and leave it as it is); a `JSONDecoder` with its defaults by
    ///     default.
    /// - Returns: A job that fails as this one does, and with
    ///   ``UploadError/invalidAnswer(_:reason:)`` when the body is not a `T`
    ///   (``UploadReceipt/decoded(as:using:)``).
    public func decoding<T: Decodable & Sendable>(
        _ type: T.Type, using decoder: JSONDecoder = JSONDecoder()
    ) -> Job<T> {
        map { receipt in try receipt.decoded(as: T.self, using: decoder) }
    }
}
