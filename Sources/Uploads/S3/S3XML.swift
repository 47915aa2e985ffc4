import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

/// An XML document of the S3 API, read into a tree: the answers of
/// CreateMultipartUpload, ListParts and CompleteMultipartUpload, and the
/// body of CompleteMultipartUpload. (Its `<Error>` is read for every HTTP
/// uploader: ``XMLErrorDocument``.)
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
