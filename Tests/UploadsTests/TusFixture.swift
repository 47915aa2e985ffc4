import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A tus server nobody here wrote, from PyPI (`resumable-upload` or
/// `tuspyserver`), behind the counting proxy of `Fixtures/tus_proxy.js`, on
/// 127.0.0.1: every request recorded, and faults of the network armed on
/// demand. Started by a test and stopped when the test ends.
final class TusFixture: Sendable {
    /// The servers, by their names on PyPI.
    enum Server: String, CaseIterable, Sendable, CustomTestStringConvertible {
        case resumableUpload = "resumable-upload"
        case tuspyserver

        var testDescription: String { rawValue }

        /// Whether it can run here. Always `true` under CI, where a missing
        /// server must fail the tests, not skip them.
        var isAvailable: Bool {
            isRunningInCI
                || python3CanRun(self == .resumableUpload ? "import resumable_upload" : "import tuspyserver, uvicorn")
        }
    }

    static let installCommand = #"pip install "resumable-upload==0.3.0" "tuspyserver==4.4.3" "uvicorn==0.54.0""#

    /// Why the tus tests are skipped where the servers are missing.
    static let skipReason: Comment = "the tus servers are not installed; install them with: \(installCommand)"

    /// Whether every server can run here.
    static let isAvailable = Server.allCases.allSatisfy(\.isAvailable)

    /// One request as the proxy saw it.
    struct Request: Decodable, Sendable {
        let method: String
        let path: String
        let status: Int
        /// The `Upload-Offset` sent, and the one answered.
        let offset: String?
        let answerOffset: String?
        /// The `Upload-Checksum`, `Upload-Metadata` and `Authorization`
        /// sent.
        let checksum: String?
        let metadata: String?
        let authorization: String?
        /// The body's bytes that reached the proxy.
        let bodyBytes: Int
        let fault: String?

        /// A `PATCH` that FoundationNetworking's libcurl began again by
        /// itself on a new connection, after the one it reused died, and
        /// that the uploader refused a body: its headers and no byte (the
        /// uploader sends no empty `PATCH`), answered `409` or not at all.
        var isRefusedResend: Bool { method == "PATCH" && bodyBytes == 0 && fault == nil }
    }

    /// An upload as the server stored it.
    struct Stored: Decodable, Sendable, Equatable {
        let size: Int
        let sha256: String
    }

    let server: Server
    private let process: FixtureProcess
    var baseURL: URL { process.baseURL }
    /// The creation endpoint.
    var endpoint: URL { URL(string: "/files/", relativeTo: baseURL)!.absoluteURL }

    /// Starts `server` (whose largest upload is `maxSize` bytes, when
    /// given) behind the proxy, runs `body` with it, and stops it.
    static func with<T>(
        _ server: Server, maxSize: Int? = nil, _ body: (TusFixture) async throws -> T
    ) async throws -> T {
        let fixture = try await TusFixture(server: server, maxSize: maxSize)
        defer { fixture.process.stop() }
        return try await body(fixture)
    }

    private init(server: Server, maxSize: Int?) async throws {
        self.server = server
        var environment = ["TUS_SERVER": server.rawValue]
        if let maxSize { environment["TUS_MAX_SIZE"] = String(maxSize) }
        // The proxy prints its port once the server answers: off Swift's
        // cooperative threads, which the wait would hold.
        let started = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { [environment] in
                continuation.resume(
                    returning: Result { try startNodeFixture("tus_proxy.js", environment: environment) })
            }
        }
        process = try started.get()
    }

    /// Arms `fault` ("cut", "corrupt", "duplicate" or "lose") for the
    /// `nth` request of `method` from now; a cut after `after` bytes.
    func arm(_ fault: String, _ method: String, nth: Int = 1, after: Int = 0) async throws {
        var request = URLRequest(url: baseURL.appendingPathComponent("_control"))
        request.httpMethod = "POST"
        request.httpBody = try JSONSerialization.data(withJSONObject: [
            "fault": fault, "method": method, "nth": nth, "after": after,
        ])
        _ = try await FixtureServer.send(request)
    }

    /// Every request so far, in order, but the resends that libcurl began
    /// and the uploader refused (see ``Request/isRefusedResend``) unless
    /// asked for.
    func requests(refusedResends: Bool = false) async throws -> [Request] {
        struct State: Decodable { let requests: [Request] }
        let data = try await FixtureServer.send(URLRequest(url: baseURL.appendingPathComponent("_state")))
        return try JSONDecoder().decode(State.self, from: data).requests.filter {
            refusedResends || !$0.isRefusedResend
        }
    }

    /// The methods of every request so far, in order.
    func methods() async throws -> [String] {
        try await requests().map(\.method)
    }

    /// What the server stored of the upload at `uploadURL`; `nil` when it
    /// has no finished upload there.
    func stored(_ uploadURL: URL) async throws -> Stored? {
        var components = URLComponents(url: baseURL.appendingPathComponent("_stored"), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "path", value: uploadURL.path)]
        let data = try await FixtureServer.send(URLRequest(url: components.url!))
        return try? JSONDecoder().decode(Stored.self, from: data)
    }

    /// Sends `method` to `url` as a tus client would, out of band; the
    /// answer's status.
    func send(_ method: String, to url: URL, headers: [String: String] = [:]) async throws -> Int {
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.setValue("1.0.0", forHTTPHeaderField: "Tus-Resumable")
        for (name, value) in headers {
            request.setValue(value, forHTTPHeaderField: name)
        }
        return try await withCheckedThrowingContinuation { continuation in
            URLSession.shared.dataTask(with: request) { _, response, error in
                if let error {
                    continuation.resume(throwing: error)
                } else {
                    continuation.resume(returning: (response as? HTTPURLResponse)?.statusCode ?? 0)
                }
            }.resume()
        }
    }
}

extension TusFixture {
    /// Waits until a request of `method` was answered, for at most 10
    /// seconds; whether one was.
    func waitFor(_ method: String) async throws -> Bool {
        struct Waited: Decodable { let ok: Bool }
        var components = URLComponents(url: baseURL.appendingPathComponent("_wait"), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "method", value: method)]
        return try JSONDecoder().decode(
            Waited.self, from: try await FixtureServer.send(URLRequest(url: components.url!))
        )
        .ok
    }
}

extension TusFixture {
    /// Creates an upload of `length` bytes out of band, as an app's backend
    /// would; its URL.
    func createUpload(length: Int) async throws -> URL {
        var request = URLRequest(url: endpoint)
        request.httpMethod = "POST"
        request.setValue("1.0.0", forHTTPHeaderField: "Tus-Resumable")
        request.setValue(String(length), forHTTPHeaderField: "Upload-Length")
        request.setValue(
            "filename \(Data("clip.mp4".utf8).base64EncodedString())", forHTTPHeaderField: "Upload-Metadata")
        let location: String? = try await withCheckedThrowingContinuation { continuation in
            URLSession.shared.dataTask(with: request) { _, response, error in
                if let error {
                    continuation.resume(throwing: error)
                } else {
                    continuation.resume(
                        returning: (response as? HTTPURLResponse)?.value(forHTTPHeaderField: "Location"))
                }
            }.resume()
        }
        let found = try #require(location.flatMap { URL(string: $0, relativeTo: baseURL)?.absoluteURL })
        return found
    }
}
