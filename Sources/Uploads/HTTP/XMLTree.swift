import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

/// An XML document read into a tree: the answers an HTTP uploader reads
/// (S3's CreateMultipartUpload, ListParts and CompleteMultipartUpload, an
/// object storage's `<Error>`: ``XMLErrorDocument``).
struct XMLTree: Sendable, Hashable {
    /// The element's name, without a namespace prefix.
    var name: String
    /// The text directly inside the element, trimmed.
    var text: String
    /// The child elements, in order.
    var children: [XMLTree]

    /// The first child named `name`.
    subscript(_ name: String) -> XMLTree? {
        children.first { $0.name == name }
    }

    /// Every child named `name`.
    func all(_ name: String) -> [XMLTree] {
        children.filter { $0.name == name }
    }

    /// Reads a document; `nil` when it is not well-formed XML.
    static func parse(_ data: Data) -> XMLTree? {
        let reader = Reader()
        let parser = XMLParser(data: data)
        parser.delegate = reader
        guard parser.parse(), let root = reader.root else { return nil }
        return root
    }

    /// Builds the tree from the parser's events. Used by one parser, on
    /// the thread that calls `parse()`.
    private final class Reader: NSObject, XMLParserDelegate {
        private var stack: [XMLTree] = []
        var root: XMLTree?

        func parser(
            _ parser: XMLParser,
            didStartElement elementName: String,
            namespaceURI: String?,
            qualifiedName: String?,
            attributes: [String: String] = [:]
        ) {
            let name = elementName.split(separator: ":").last.map(String.init) ?? elementName
            stack.append(XMLTree(name: name, text: "", children: []))
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
