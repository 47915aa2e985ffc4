import Foundation

/// The framing of one multipart/form-data body (RFC 7578) around one file,
/// as the WHATWG HTML standard submits a form: the fields, then the file's
/// part, each opened by the boundary, every line ended by CRLF.
///
/// A field's part has no `Content-Type` (the standard says so for text
/// fields); the file's part has the medium's. Names and file names are
/// sent in UTF-8 between quotes, with `"`, CR and LF written `%22`, `%0D`
/// and `%0A`, and nothing else escaped: what browsers send, and what
/// Node's `Request.formData()` and Werkzeug decode. Values are sent as
/// given, in UTF-8.
struct MultipartForm: Sendable, Hashable {
    /// The boundary between parts: `JobKit-` and 128 random bits in hex.
    let boundary: String

    /// A form with a new random boundary.
    init() {
        var generator = SystemRandomNumberGenerator()
        let bits = (generator.next() as UInt64, generator.next() as UInt64)
        boundary = "JobKit-" + Self.hex(bits.0) + Self.hex(bits.1)
    }

    /// A form with `boundary`, for tests.
    init(boundary: String) {
        self.boundary = boundary
    }

    /// The request's `Content-Type`.
    var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    /// The bytes before the file's: each field's part, in order, then the
    /// headers of the file's part.
    func head(fields: [FormField], fileField: String, filename: String, contentType: String) -> Data {
        var text = ""
        for field in fields {
            text += "--\(boundary)\r\n"
            text += "Content-Disposition: form-data; name=\"\(Self.escaped(field.name))\"\r\n\r\n"
            text += field.value + "\r\n"
        }
        text += "--\(boundary)\r\n"
        text += "Content-Disposition: form-data; name=\"\(Self.escaped(fileField))\"; "
        text += "filename=\"\(Self.escaped(filename))\"\r\n"
        text += "Content-Type: \(Self.escaped(contentType))\r\n\r\n"
        return Data(text.utf8)
    }

    /// The bytes after the file's: the end of its part and of the form.
    var tail: Data { Data("\r\n--\(boundary)--\r\n".utf8) }

    /// `text` with `"`, CR and LF written `%22`, `%0D` and `%0A`, as the
    /// HTML standard escapes names and file names in a form.
    static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: { $0 == "\"" || $0 == "\r" || $0 == "\n" }) else { return text }
        var escaped = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": escaped.append(contentsOf: "%22".unicodeScalars)
            case "\r": escaped.append(contentsOf: "%0D".unicodeScalars)
            case "\n": escaped.append(contentsOf: "%0A".unicodeScalars)
            default: escaped.append(scalar)
            }
        }
        return String(escaped)
    }

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }
}
