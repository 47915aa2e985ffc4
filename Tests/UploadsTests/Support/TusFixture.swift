import Foundation
import JobKitTesting
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
            get async {
                isRunningInCI
                    ? true
                    : await python3CanRun(
                        self == .resumableUpload ? "import resumable_upload" : "import tuspyserver, uvicorn")
            }
        }
    }

    static let installCommand = #"pip install "resumable-upload==0.3.0" "tuspyserver==4.4.3" "uvicorn==0.54.0""#

    /// Whether every server can run here, asked once.
    private static let isAvailable = Task.detached {
        for server in Server.allCases where await !server.isAvailable { return false }
        return true
    }

    /// Skips a test or suite where the servers are missing, saying why.
    static let requirement = ConditionTrait.enabled(
        "the tus servers are not installed; install them with: \(installCommand)"
    ) { await isAvailable.value }

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
        /// The `Upload-Length` sent, and the `Location` answered.
        let length: String?
        let location: String?
        /// The body's bytes that reached the proxy.
        let bodyBytes: Int
        let fault: String?
        /// The `Expect` header sent (`100-continue` from a request that
        /// asked the server first).
        let expect: String?

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
    /// The first request of the proxy's that this fixture's test sent.
    private let firstRequest: Int
    var baseURL: URL { process.baseURL }
    /// The creation endpoint.
    var endpoint: URL { URL(string: "/files/", relativeTo: baseURL)!.absoluteURL }

    /// Starts `server` (whose largest upload is `maxSize` bytes, when
    /// given) behind a proxy of its own, runs `body` with it, and stops it.
    static func with<T>(
        _ server: Server, maxSize: Int? = nil, _ body: (TusFixture) async throws -> T
    ) async throws -> T {
        let fixture = try await start(server, environment: maxSize.map { ["TUS_MAX_SIZE": String($0)] } ?? [:])
        defer { fixture.process.stop() }
        return try await body(fixture)
    }

    /// Runs `body` with `server` behind the proxy, one of each server kept
    /// for a suite that runs one test at a time (`.serialized`): started by
    /// the first test that needs it, each test seeing its own requests
    /// only, and no fault armed by another.
    static func withKept<T>(_ server: Server, _ body: (TusFixture) async throws -> T) async throws -> T {
        let kept = try await kept(server)
        try await kept.clearFaults()
        return try await body(
            TusFixture(server: server, process: kept.process, firstRequest: try await kept.requestCount()))
    }

    /// The fixtures kept for the test process, by server.
    private static let keptFixtures = LockedValue<[Server: Task<TusFixture, any Error>]>([:])

    /// The fixture of `server` kept for the test process, started once. It
    /// ends with the test process, which closes its input.
    private static func kept(_ server: Server) async throws -> TusFixture {
        let task = keptFixtures.withValue { kept in
            if let running = kept[server] { return running }
            let starting = Task { try await start(server, environment: [:]) }
            kept[server] = starting
            return starting
        }
        return try await task.value
    }

    /// Starts `server` behind a proxy of its own.
    private static func start(_ server: Server, environment: [String: String]) async throws -> TusFixture {
        let environment = environment.merging(["TUS_SERVER": server.rawValue]) { $1 }
        // The proxy prints its port once the server answers, which takes
        // half a second.
        let started = try await startNodeFixture("tus_proxy.js", environment: environment)
        return TusFixture(server: server, process: started, firstRequest: 0)
    }

    private init(server: Server, process: FixtureProcess, firstRequest: Int) {
        self.server = server
        self.process = process
        self.firstRequest = firstRequest
    }

    /// Forgets the faults armed and not yet met.
    private func clearFaults() async throws {
        var request = URLRequest(url: baseURL.appendingPathComponent("_control"))
        request.httpMethod = "POST"
        request.httpBody = Data(#"{"clear": true}"#.utf8)
        _ = try await FixtureServer.send(request)
    }

    /// How many requests the proxy has recorded, every test's.
    private func requestCount() async throws -> Int {
        try await allRequests().count
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

    /// Holds the request whose body is still arriving once `bytes` body
    /// bytes of this test's requests have reached the proxy: the proxy
    /// stops reading it until ``release()``. Whether one was held within
    /// `seconds` (at most 10); the hold is forgotten if not.
    func hold(afterBytes bytes: Int, seconds: Int = 10) async throws -> Bool {
        struct Held: Decodable { let held: Bool }
        let earlier = try await allRequests().prefix(firstRequest).reduce(0) { $0 + $1.bodyBytes }
        var components = URLComponents(
            url: baseURL.appendingPathComponent("_hold"), resolvingAgainstBaseURL: false)!
        components.queryItems = [
            URLQueryItem(name: "bytes", value: "\(earlier + bytes)"),
            URLQueryItem(name: "timeout", value: "\(seconds)"),
        ]
        let data = try await FixtureServer.send(URLRequest(url: components.url!))
        return try JSONDecoder().decode(Held.self, from: data).held
    }

    /// Drops the connections of every request held, without reading the
    /// rest of its body, once the server holds what it was sent; how many.
    @discardableResult
    func release() async throws -> Int {
        struct Released: Decodable { let released: Int }
        var request = URLRequest(url: baseURL.appendingPathComponent("_release"))
        request.httpMethod = "POST"
        return try JSONDecoder().decode(Released.self, from: try await FixtureServer.send(request)).released
    }

    /// Every request of this test so far, in order, but the resends that
    /// libcurl began and the uploader refused (see
    /// ``Request/isRefusedResend``) unless asked for.
    func requests(refusedResends: Bool = false) async throws -> [Request] {
        try await allRequests().dropFirst(firstRequest).filter { refusedResends || !$0.isRefusedResend }
    }

    /// Every request the proxy recorded, every test's.
    private func allRequests() async throws -> [Request] {
        struct State: Decodable { let requests: [Request] }
        let data = try await FixtureServer.send(URLRequest(url: baseURL.appendingPathComponent("_state")))
        return try JSONDecoder().decode(State.self, from: data).requests
    }

    /// The methods of every request so far, in order.
    func methods() async throws -> [String] {
        try await requests().map(\.method)
    }

    /// The uploads created so far whose stored bytes are not their length:
    /// their locations, or "?" for a creation answered without one.
    func unfinishedUploads() async throws -> [String] {
        var unfinished: [String] = []
        for request in try await requests() where request.method == "POST" && request.status == 201 {
            guard let location = request.location, let url = URL(string: location, relativeTo: baseURL) else {
                unfinished.append("?")
                continue
            }
            if try await stored(url)?.size != request.length.flatMap({ Int($0) }) { unfinished.append(location) }
        }
        return unfinished
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
        return try await HTTP.status(of: request)
    }
}

extension TusFixture {
    /// Waits until a request of `method` was answered, for at most 10
    /// seconds; whether one was.
    func waitFor(_ method: String) async throws -> Bool {
        struct Waited: Decodable { let ok: Bool }
        var components = URLComponents(url: baseURL.appendingPathComponent("_wait"), resolvingAgainstBaseURL: false)!
        components.queryItems = [
            URLQueryItem(name: "method", value: method), URLQueryItem(name: "from", value: String(firstRequest)),
        ]
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
        let location = try await HTTP.answer(to: request).response?.value(forHTTPHeaderField: "Location")
        let found = try #require(location.flatMap { URL(string: $0, relativeTo: baseURL)?.absoluteURL })
        return found
    }
}
