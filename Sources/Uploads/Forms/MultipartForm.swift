import Foundation

/// The framing of a multipart/form-data body (RFC 7578), as the WHATWG
/// HTML standard submits a form: each part opened by the boundary, its
/// headers, a blank line, its content, every line ended by CRLF, and the
/// closing boundary after the last.
///
/// A part's `Content-Disposition` names it, and its file name when it has
/// one; its `Content-Type` follows when it has one (the standard sends
/// none for text fields), as given, then its other headers in the order
/// of their names. A form with no parts is its closing boundary alone, as
/// browsers send it. Names and file names are sent in UTF-8 between quotes, with
/// `"`, CR and LF written `%22`, `%0D` and `%0A`, and nothing else
/// escaped: what browsers send, and what Node's `Request.formData()` and
/// Werkzeug decode. Values are sent as given, in UTF-8.
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

    /// The body of a form of `parts`: the bytes around each part's
    /// content, its text and bytes, and its file (whose size is
    /// `fileSizes[index]`, the part's index) read from disk as it is sent.
    func body(of parts: [FormData.Part], fileSizes: [Int: Int64]) -> [BodySegment] {
        var segments: [BodySegment] = []
        var bytes = Data()
        for (index, part) in parts.enumerated() {
            bytes += head(of: part)
            switch part.content {
            case .text(let text): bytes += Data(text.utf8)
            case .bytes(let data): bytes += data
            case .file(let file):
                guard let size = fileSizes[index] else { preconditionFailure("no size for the file of part \(index)") }
                segments.append(.bytes(bytes))
                segments.append(.file(file, offset: 0, length: size))
                bytes = Data()
            }
            bytes += Data("\r\n".utf8)
        }
        bytes += Data("--\(boundary)--\r\n".utf8)
        segments.append(.bytes(bytes))
        return segments
    }

    /// The bytes before a part's content: its boundary and headers.
    func head(of part: FormData.Part) -> Data {
        var text = "--\(boundary)\r\n"
        text += "Content-Disposition: form-data; name=\"\(Self.escaped(part.name))\""
        if let filename = part.filename {
            text += "; filename=\"\(Self.escaped(filename))\""
        }
        text += "\r\n"
        if let contentType = part.contentType {
            text += "Content-Type: \(contentType)\r\n"
        }
        for (name, value) in part.headers.sorted(by: { $0.key.lowercased() < $1.key.lowercased() }) {
            text += "\(name): \(value)\r\n"
        }
        return Data((text + "\r\n").utf8)
    }

    /// Checks that every part's content type and headers can be sent:
    /// values on one line, header names that are HTTP tokens, each named
    /// once, and neither of the two the form writes itself.
    static func validate(_ parts: [FormData.Part], to destination: URL) throws(UploadError) {
        for (index, part) in parts.enumerated() {
            let which = "part \(index + 1) (\"\(part.name)\")"
            if let contentType = part.contentType, !isOneLine(contentType) {
                throw .invalidForm(destination, reason: "\(which)'s content type has a line break or a NUL")
            }
            var seen: Set<String> = []
            for (name, value) in part.headers.sorted(by: { $0.key < $1.key }) {
                guard !name.isEmpty, name.unicodeScalars.allSatisfy(isTokenCharacter) else {
                    throw .invalidForm(destination, reason: "\(which) has a header named \"\(name)\", not a valid name")
                }
                switch name.lowercased() {
                case "content-disposition":
                    throw .invalidForm(
                        destination,
                        reason: "\(which) sets Content-Disposition, which the form writes from its name and file name")
                case "content-type":
                    throw .invalidForm(
                        destination, reason: "\(which) sets Content-Type in its headers: give it as its content type")
                default:
                    break
                }
                guard seen.insert(name.lowercased()).inserted else {
                    throw .invalidForm(destination, reason: "\(which) has two headers named \(name.lowercased())")
                }
                guard isOneLine(value) else {
                    throw .invalidForm(
                        destination, reason: "\(which)'s header \(name) has a line break or a NUL in its value")
                }
            }
        }
    }

    /// Whether `text` holds no CR, LF or NUL: a header's value.
    private static func isOneLine(_ text: String) -> Bool {
        !text.unicodeScalars.contains { $0 == "\r" || $0 == "\n" || $0 == "\0" }
    }

    /// Whether `scalar` may be part of an HTTP token (RFC 9110 §5.6.2).
    private static func isTokenCharacter(_ scalar: Unicode.Scalar) -> Bool {
        scalar.isASCII
            && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar)
                || "!#$%&'*+-.^_`|~".unicodeScalars.contains(scalar))
    }

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
