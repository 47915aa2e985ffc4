import Foundation
import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The Mastodon-compatible server of `Fixtures/mastodon_server.js`, on
/// Node's own `http` module, on 127.0.0.1: Mastodon's documented contract
/// for posting with media, its forms parsed by Node's `Request.formData()`.
/// Started by a test and stopped when the test ends.
final class MastodonFixture: Sendable {
    static let token = "s3cret"

    struct State: Decodable, Sendable {
        struct Medium: Decodable, Sendable {
            let id: String
            let type: String
            let filename: String
            let contentType: String
            let description: String?
            let size: Int
            let sha256: String
            let questions: Int
            let ready: Bool
        }

        struct Status: Decodable, Sendable {
            let id: String
            let url: String
            let text: String
            let mediaIds: [String]
            let idempotencyKey: String?
        }

        struct Request: Decodable, Sendable {
            let method: String
            let path: String
            let status: Int
            let bodyBytes: Int
            let headerBytes: Int
            let idempotencyKey: String?
        }

        let media: [Medium]
        let statuses: [Status]
        let requests: [Request]
        let errors: [[String: String]]
    }

    private let server: FixtureProcess
    var baseURL: URL { server.baseURL }

    /// Starts a server whose videos are ready at their `processingPolls`-th
    /// question, runs `body` with it, and stops it; then fails if Node's
    /// parser refused any request's framing.
    static func with<T>(processingPolls: Int = 2, _ body: (MastodonFixture) async throws -> T) async throws -> T {
        let server = MastodonFixture(
            server: try await startNodeFixture(
                "mastodon_server.js", environment: ["TOKEN": token, "PROCESSING_POLLS": String(processingPolls)]))
        defer { server.stop() }
        let result = try await body(server)
        let errors = try await server.state().errors
        guard errors.isEmpty else { throw FixtureServer.ServerError(message: "malformed requests: \(errors)") }
        return result
    }

    private init(server: FixtureProcess) {
        self.server = server
    }

    func stop() {
        server.stop()
    }

    /// What the server holds and was asked.
    func state() async throws -> State {
        try JSONDecoder().decode(
            State.self, from: try await FixtureServer.send(URLRequest(url: baseURL.appendingPathComponent("_state"))))
    }

    /// What arrived so far: body bytes, requests answered, and whether a
    /// wait for more saw them.
    struct Arrived: Decodable {
        let ok: Bool
        let bytes: Int
        let ended: Int
    }

    /// Waits until `bytes` body bytes have arrived in all and `ended`
    /// requests were answered (up to `seconds`, at most 10); what had.
    func waitFor(bytes: Int, ended: Int, seconds: Int = 10) async throws -> Arrived {
        var components = URLComponents(
            url: baseURL.appendingPathComponent("_wait_for"), resolvingAgainstBaseURL: false)!
        components.queryItems = [
            URLQueryItem(name: "bytes", value: "\(bytes)"), URLQueryItem(name: "ended", value: "\(ended)"),
            URLQueryItem(name: "timeout", value: "\(seconds)"),
        ]
        return try JSONDecoder().decode(
            Arrived.self, from: try await FixtureServer.send(URLRequest(url: components.url!)))
    }

    /// Answers the next `times` requests to `path` with `status`: before
    /// their work, or after it (`afterTheWork`, an answer lost).
    func fail(_ path: String, status: Int, times: Int = 1, afterTheWork: Bool = false) async throws {
        var request = URLRequest(url: baseURL.appendingPathComponent("_control"))
        request.httpMethod = "POST"
        request.httpBody = try JSONSerialization.data(withJSONObject: [
            afterTheWork ? "after" : "fail": ["path": path, "status": status, "times": times]
        ])
        _ = try await FixtureServer.send(request)
    }
}
