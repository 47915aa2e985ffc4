import Foundation

/// The XML documents an S3 upload sends: the body of
/// CompleteMultipartUpload. (Its answers are read as an ``XMLTree``.)
enum S3XML {
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
}
