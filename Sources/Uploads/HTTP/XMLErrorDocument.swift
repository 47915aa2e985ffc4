import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

/// The XML error document of object storages, which every HTTP uploader
/// may meet (a presigned URL is one `PUT` away):
/// `<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`,
/// as S3 and the storages that speak its API answer (Cloudflare R2,
/// MinIO, Backblaze B2, Google Cloud Storage's XML API).
///
/// The HTTP client reads it into each answer's receipt
/// (``UploadReceipt/serverError``), so that errors quote its code and
/// message, and its codes that ask for another attempt are transient
/// whatever the status they come with: S3 can answer `200 OK` with an
/// `InternalError`, and `400 Bad Request` with a `RequestTimeout`.
enum XMLErrorDocument {
    /// The codes that ask for another attempt.
    static let transientCodes: Set<String> = ["InternalError", "SlowDown", "ServiceUnavailable", "RequestTimeout"]

    /// The error `body` names, when it is an `<Error>` document with a
    /// `<Code>`; `nil` otherwise.
    static func read(_ body: Data) -> UploadReceipt.ServerError? {
        guard body.firstRange(of: Data("<Error".utf8)) != nil else { return nil }
        let reader = Reader()
        let parser = XMLParser(data: body)
        parser.delegate = reader
        guard parser.parse(), reader.root == "Error", let code = reader.fields["Code"] else { return nil }
        return UploadReceipt.ServerError(
            code: code, message: reader.fields["Message"] ?? "",
            failure: transientCodes.contains(code) ? .transient : nil)
    }

    /// `receipt`, with the error its body names as its
    /// ``UploadReceipt/serverError``.
    static func reading(_ receipt: UploadReceipt) -> UploadReceipt {
        var read = receipt
        read.serverError = read.serverError ?? self.read(receipt.body)
        return read
    }

    /// Keeps the root element's name and the text of its children. Used by
    /// one parser, on the thread that calls `parse()`.
    private final class Reader: NSObject, XMLParserDelegate {
        var root: String?
        var fields: [String: String] = [:]
        private var depth = 0
        private var field: String?
        private var text = ""

        func parser(
            _ parser: XMLParser,
            didStartElement elementName: String,
            namespaceURI: String?,
            qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            depth += 1
            let name = elementName.split(separator: ":").last.map(String.init) ?? elementName
            if depth == 1 { root = name }
            if depth == 2 {
                field = name
                text = ""
            }
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            if depth == 2 { text += string }
        }

        func parser(_ parser: XMLParser, foundCDATA block: Data) {
            if depth == 2 { text += String(decoding: block, as: UTF8.self) }
        }

        func parser(
            _ parser: XMLParser, didEndElement elementName: String, namespaceURI: String?, qualifiedName name: String?
        ) {
            if depth == 2, let field, fields[field] == nil {
                fields[field] = text.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            depth -= 1
        }
    }
}
