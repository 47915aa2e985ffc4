import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The tests' requests to their fixtures, through the shared session.
enum HTTP {
    /// The answer to `request`: its body and its response.
    static func answer(to request: URLRequest) async throws -> (body: Data, response: HTTPURLResponse?) {
        try await withCheckedThrowingContinuation { continuation in
            URLSession.shared.dataTask(with: request) { data, response, error in
                if let error {
                    continuation.resume(throwing: error)
                } else {
                    continuation.resume(returning: (data ?? Data(), response as? HTTPURLResponse))
                }
            }.resume()
        }
    }

    /// The status `request` is answered with, whatever it is.
    static func status(of request: URLRequest) async throws -> Int {
        try await answer(to: request).response?.statusCode ?? 0
    }

    /// The body of the answer to `request`; an error for a status outside
    /// 200...299.
    static func data(for request: URLRequest) async throws -> Data {
        let (body, response) = try await answer(to: request)
        if let status = response?.statusCode, !(200...299).contains(status) {
            throw URLError(.badServerResponse)
        }
        return body
    }
}
