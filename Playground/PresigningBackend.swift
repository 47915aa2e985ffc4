import Foundation
import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The app's backend, as the Playground talks to it: an endpoint that
/// answers a `POST` of `{"operation", "key", ...}` with `{"url": ...}`, a
/// presigned URL made with the backend's own credentials.
/// `Tests/UploadsTests/Fixtures/s3_backend.py` is one, in front of moto.
struct PresigningBackend: S3Presigner {
    let endpoint: URL

    /// The backend answered without a URL: said as it is, in the run's
    /// error lines too.
    struct Refused: LocalizedError, CustomStringConvertible {
        let description: String

        var errorDescription: String? { description }
    }

    func presignedURL(for operation: S3Operation, object: URL) async throws -> URL {
        let fields: [String: Any?] = [
            "operation": operation.action, "key": String(object.path.drop { $0 == "/" }),
            "contentType": operation.contentType, "uploadId": operation.uploadID,
            "partNumber": operation.partNumber, "partNumberMarker": operation.partNumberMarker,
            "contentMD5": operation.contentMD5,
        ]
        var request = URLRequest(url: endpoint)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try JSONSerialization.data(withJSONObject: fields.compactMapValues { $0 })
        let (body, response) = try await URLSession.shared.data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200...299).contains(status),
            let answer = try? JSONSerialization.jsonObject(with: body) as? [String: Any],
            let text = answer["url"] as? String, let url = URL(string: text)
        else {
            throw Refused(description: "the presigning backend at \(endpoint) answered \(status) with no URL")
        }
        return url
    }
}
