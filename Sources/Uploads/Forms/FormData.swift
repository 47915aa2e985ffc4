import Foundation
import JobKit

/// A multipart/form-data form (RFC 7578) of any number of parts: text
/// fields, bytes with a content type of their own, and files, each with
/// headers of its own if it needs them. Sent in one request by
/// `Job.uploading(_:to:using:progress:)`.
///
/// ```swift
/// var form = FormData()
/// form.append("Dawn over the bay", named: "caption")
/// form.append(metadata, named: "meta", contentType: "application/json")
/// form.append(fileAt: beach, named: "images[]")
/// form.append(fileAt: dunes, named: "images[]", headers: ["Content-Language": "fr"])
/// let receipt = try await Job.uploading(form, to: endpoint, using: MultipartFormUploader()).value
/// ```
///
/// Parts are sent in the order they were appended, and names may repeat;
/// a form with no parts is sent as browsers send it, its closing boundary
/// alone.
/// A file is read from disk as the form is sent, never copied into
/// memory; its size is read when the upload starts, so that the request
/// carries an exact `Content-Length`.
public struct FormData: Sendable, Hashable {
    /// One part of a form: its name, its content, and how it is described.
    public struct Part: Sendable, Hashable {
        /// What a part holds.
        public enum Content: Sendable, Hashable {
            /// Text, sent as UTF-8: a form's field.
            case text(String)
            /// Bytes in memory.
            case bytes(Data)
            /// The contents of a file, read as the form is sent.
            case file(URL)
        }

        /// The part's name: the field's name on the server.
        public var name: String
        /// What the part holds.
        public var content: Content
        /// The file name the server is told, in the part's
        /// `Content-Disposition`; `nil` sends none (a field, or bytes that
        /// are not a file).
        public var filename: String?
        /// The part's `Content-Type`; `nil` sends none, which the server
        /// reads as plain text (RFC 7578).
        public var contentType: String?
        /// More headers of the part, sent after its `Content-Disposition`
        /// and `Content-Type`, in the order of their names. They may name
        /// neither of those two: the form writes them from ``name``,
        /// ``filename`` and ``contentType``.
        public var headers: [String: String]

        /// Creates a part, as given: unlike the `append` methods, it guesses
        /// no file name and no content type (a part with no file name is a
        /// field to most servers, even one that holds a file).
        public init(
            name: String,
            content: Content,
            filename: String? = nil,
            contentType: String? = nil,
            headers: [String: String] = [:]
        ) {
            self.name = name
            self.content = content
            self.filename = filename
            self.contentType = contentType
            self.headers = headers
        }
    }

    /// The parts, in the order they are sent.
    public var parts: [Part]

    /// Creates a form of `parts`; none by default.
    public init(parts: [Part] = []) {
        self.parts = parts
    }

    /// Appends a text field.
    public mutating func append(_ value: String, named name: String) {
        parts.append(Part(name: name, content: .text(value)))
    }

    /// Appends bytes: a file made in memory (with a `filename`), or a value
    /// with a content type of its own, such as a JSON document.
    /// - Parameters:
    ///   - bytes: The part's bytes.
    ///   - name: The part's name.
    ///   - filename: The file name the server is told; none by default.
    ///   - contentType: The part's content type; by default none, or when
    ///     the part has a file name, the one its extension names (as for a
    ///     file), else `application/octet-stream`.
    ///   - headers: More headers of the part; none by default.
    public mutating func append(
        _ bytes: Data,
        named name: String,
        filename: String? = nil,
        contentType: String? = nil,
        headers: [String: String] = [:]
    ) {
        let contentType = contentType ?? filename.map { Self.contentType(ofFileNamed: $0) }
        parts.append(
            Part(name: name, content: .bytes(bytes), filename: filename, contentType: contentType, headers: headers))
    }

    /// Appends the contents of the file at `file`, read as the form is sent.
    /// - Parameters:
    ///   - file: The file.
    ///   - name: The part's name.
    ///   - filename: The file name the server is told; by default, the
    ///     file's own.
    ///   - contentType: The part's content type; by default, the one the
    ///     extension of the file name sent names (`image/jpeg` for `.jpg`,
    ///     `video/mp4` for `.mp4`, and the other common types of photos,
    ///     videos, sound and documents), else the one the file's own
    ///     extension names, else `application/octet-stream`.
    ///   - headers: More headers of the part; none by default.
    public mutating func append(
        fileAt file: URL,
        named name: String,
        filename: String? = nil,
        contentType: String? = nil,
        headers: [String: String] = [:]
    ) {
        let contentType =
            contentType ?? Self.knownContentType(ofFileNamed: filename ?? file.lastPathComponent)
            ?? Self.contentType(ofFileNamed: file.lastPathComponent)
        parts.append(
            Part(
                name: name, content: .file(file), filename: filename ?? file.lastPathComponent,
                contentType: contentType, headers: headers))
    }

    /// The content type a file name's extension names, for the common
    /// types of photos, videos, sound and documents; else
    /// `application/octet-stream`, what browsers send for a type they do
    /// not know.
    static func contentType(ofFileNamed filename: String) -> String {
        knownContentType(ofFileNamed: filename) ?? "application/octet-stream"
    }

    /// The content type a file name's extension names, when it is one of
    /// the common types; `nil` otherwise.
    private static func knownContentType(ofFileNamed filename: String) -> String? {
        guard let dot = filename.lastIndex(of: ".") else { return nil }
        return contentTypes[filename[filename.index(after: dot)...].lowercased()]
    }

    private static let contentTypes = [
        "jpg": "image/jpeg", "jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp",
        "heic": "image/heic", "heif": "image/heif", "avif": "image/avif", "tif": "image/tiff", "tiff": "image/tiff",
        "svg": "image/svg+xml", "mp4": "video/mp4", "m4v": "video/x-m4v", "mov": "video/quicktime",
        "webm": "video/webm", "mp3": "audio/mpeg", "m4a": "audio/mp4", "aac": "audio/aac", "wav": "audio/wav",
        "ogg": "audio/ogg", "pdf": "application/pdf", "json": "application/json", "zip": "application/zip",
        "txt": "text/plain", "csv": "text/csv", "html": "text/html", "xml": "application/xml", "md": "text/markdown",
        "gz": "application/gzip", "bmp": "image/bmp", "mkv": "video/x-matroska", "flac": "audio/flac",
    ]
}

extension Job where Success == UploadReceipt {
    /// A job that sends `form` to `destination` in one request of
    /// `uploader`'s (after its ``MultipartFormUploader/fields``, with its
    /// method and headers) and finishes with the server's receipt.
    ///
    /// Each performance checks the form first: a destination that is not
    /// an `http` or `https` URL fails it with
    /// ``UploadError/invalidDestination(_:reason:)``, a missing or
    /// unreadable file with ``UploadError/fileNotFound(_:)`` or
    /// ``UploadError/unreadableFile(_:reason:)``, a header or a content
    /// type a part cannot carry with ``UploadError/invalidForm(_:reason:)``,
    /// and nothing is sent. Then it streams every file from disk between
    /// the bytes around it, with an exact `Content-Length`. It fails with
    /// ``UploadError/httpStatus(_:)`` for an answer outside 200...299,
    /// whose receipt (and so the error's sentence) names the form's files.
    ///
    /// The job is tried once. Retry it as any job, with
    /// ``Job/retry(_:onFailedAttempt:)``: every performance sends the same
    /// `Idempotency-Key` (unless the uploader is made not to send one), so
    /// a server that honours it keeps a form sent twice once.
    ///
    /// Its snapshots name it after its destination, with the bytes sent:
    /// "upload form to albums/1/photos (running, 1.2 of 2.4 MB sent)", or
    /// "nothing sent yet".
    ///
    /// - Parameters:
    ///   - form: The form.
    ///   - destination: Where it goes.
    ///   - uploader: What sends it.
    ///   - progress: Called as bytes go out, one call at a time, from any
    ///     thread, with the most bytes of the whole form any performance
    ///     has sent: never backwards, even when the job is retried.
    public static func uploading(
        _ form: FormData,
        to destination: URL,
        using uploader: MultipartFormUploader,
        progress: @escaping @Sendable (UploadProgress) -> Void = { _ in }
    ) -> Job<UploadReceipt> {
        let merger = ProgressMerger(totals: [0], deliver: progress)
        return uploader.upload(form, to: destination) { report in
            merger.update(0, bytesSent: report.bytesSent, bytesTotal: report.bytesTotal)
        }
        .named("upload form to \(UploadError.name(of: destination))") {
            let sent = merger.current
            return sent.bytesTotal == 0 ? "nothing sent yet" : sent.description
        }
    }
}
