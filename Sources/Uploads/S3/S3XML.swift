import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

/// An XML document of the S3 API, read into a tree: the answers of
/// CreateMultipartUpload, ListParts, CompleteMultipartUpload and S3's
/// `<Error>`, and the body of CompleteMultipartUpload.
struct S3XML: Sendable, Hashable {
    /// The element's name, without a namespace prefix.
    var name: String
    /// The text directly inside the element, trimmed.
    var text: String
    /// The child elements, in order.
    var children: [S3XML]

    /// The first child named `name`.
    subscript(_ name: String) -> S3XML? {
        children.first { $0.name == name }
    }

    /// Every child named `name`.
    func all(_ name: String) -> [S3XML] {
        children.filter { $0.name == name }
    }

    /// Reads a document; `nil` when it is not well-formed XML.
    static func parse(_ data: Data) -> S3XML? {
        let reader = Reader()
        let parser = XMLParser(data: data)
        parser.delegate = reader
        guard parser.parse(), let root = reader.root else { return nil }
        return root
    }

    /// `text` with `&`, `<` and `>` escaped, for an element's content.
    static func escaped(_ text: String) -> String {
        text.replacingOccurrences(of: "&", with: "&amp;")
            .replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;")
    }

    /// The body of CompleteMultipartUpload: each part's number and ETag,
    /// in order.
    static func completeMultipartUpload(_ parts: [(number: Int, etag: String)]) -> Data {
        var xml = #"<?xml version="1.0" encoding="UTF-8"?>"#
        xml += #"<CompleteMultipartUpload xmlns="http://s3.amazonaws.com/doc/2006-03-01/">"#
        for part in parts {
            xml += "<Part><PartNumber>\(part.number)</PartNumber><ETag>\(escaped(part.etag))</ETag></Part>"
        }
        xml += "</CompleteMultipartUpload>"
        return Data(xml.utf8)
    }

    /// S3's error code and message, when `data` is an `<Error>` document.
    static func error(in data: Data) -> (code: String, message: String)? {
        guard data.firstRange(of: Data("<Error".utf8)) != nil, let root = parse(data), root.name == "Error",
            let code = root["Code"]?.text
        else { return nil }
        return (code, root["Message"]?.text ?? "")
    }

    /// `receipt`, with S3's error as its ``UploadReceipt/serverError`` when
    /// its body is an `<Error>` document: the codes that ask for another
    /// attempt (`InternalError`, `SlowDown`, `ServiceUnavailable`,
    /// `RequestTimeout`) are ``UploadFailure/transient`` whatever the status
    /// they come with (S3 can answer `200 OK` with an `InternalError`, and
    /// `400 Bad Request` with a `RequestTimeout`).
    static func reading(_ receipt: UploadReceipt) -> UploadReceipt {
        guard let (code, message) = error(in: receipt.body) else { return receipt }
        var read = receipt
        read.serverError = UploadReceipt.ServerError(
            code: code, message: message, failure: transientCodes.contains(code) ? .transient : nil)
        return read
    }

    /// `error`, with S3's error read into its receipt when it is an
    /// ``UploadError/httpStatus(_:)`` (see ``reading(_:)``).
    static func readingError(_ error: any Error) -> any Error {
        guard case .httpStatus(let receipt) = error as? UploadError else { return error }
        return UploadError.httpStatus(reading(receipt))
    }

    /// The error codes of S3 worth retrying.
    static let transientCodes: Set<String> = ["InternalError", "SlowDown", "ServiceUnavailable", "RequestTimeout"]

    /// Builds the tree from the parser's events. Used by one parser, on
    /// the thread that calls `parse()`.
    private final class Reader: NSObject, XMLParserDelegate {
        private var stack: [S3XML] = []
        var root: S3XML?

        func parser(
            _ parser: XMLParser,
            didStartElement elementName: String,
            namespaceURI: String?,
            qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            let name = elementName.split(separator: ":").last.map(String.init) ?? elementName
            stack.append(S3XML(name: name, text: "", children: []))
        }

        func parser(_ parser: XMLParser, foundCharacters string: String) {
            guard !stack.isEmpty else { return }
            stack[stack.count - 1].text += string
        }

        func parser(_ parser: XMLParser, foundCDATA block: Data) {
            guard !stack.isEmpty else { return }
            stack[stack.count - 1].text += String(decoding: block, as: UTF8.self)
        }

        func parser(
            _ parser: XMLParser,
            didEndElement elementName: String,
            namespaceURI: String?,
            qualifiedName: String?
        ) {
            guard var element = stack.popLast() else { return }
            element.text = element.text.trimmingCharacters(in: .whitespacesAndNewlines)
            if stack.isEmpty {
                root = element
            } else {
                stack[stack.count - 1].children.append(element)
            }
        }
    }
}
