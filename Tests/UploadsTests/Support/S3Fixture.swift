import Foundation
import JobKitTesting
import Testing
import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// moto's S3 server, a widely used implementation of the S3 API that we did
/// not write, behind the counting, fault-injecting proxy and the presigning
/// "app backend" of `Fixtures/s3_backend.py`, on 127.0.0.1.
///
/// Each test has one to itself, emptied first: backends are started as
/// tests need them and kept for the next test, which starting moto again
/// (a second of Python's time) would cost. One with a request still in
/// flight is stopped rather than kept. (A value: copies share the backend,
/// each with the generation its test began at.) The backends exit with
/// the test process: each stops when its standard input closes.
struct S3Fixture: Sendable {
    /// The command that installs what these tests need.
    static let installCommand = #"pip install "moto[server]==5.2.1""#

    /// Whether moto can run here, asked once. Always `true` under CI, where
    /// a missing moto must fail the tests, not skip them.
    private static let isAvailable = Task.detached {
        isRunningInCI ? true : await python3CanRun("import boto3, moto.server")
    }

    /// Skips a test or suite where moto is missing, saying why.
    static let requirement = ConditionTrait.enabled(
        "moto's S3 server is not installed; install it with: \(installCommand)"
    ) { await isAvailable.value }

    /// One request the proxy received.
    struct Request: Decodable, Sendable {
        let method: String
        let operation: String
        /// The object's key.
        let key: String?
        let partNumber: Int?
        let uploadId: String?
        /// Body bytes received.
        let bytes: Int
        /// The status answered; 0 for a dropped connection, `nil` while in
        /// flight.
        let status: Int?
        let chunked: Bool
        let contentLength: Int?
        /// The request's Content-MD5 header.
        let contentMD5: String?
        /// The request's `Expect` header (`100-continue` from a request
        /// that asked the server first).
        let expect: String?
        /// The MD5 of the body received, base64-encoded, once it arrived
        /// whole.
        let bodyMD5: String?
    }

    /// An object as the storage holds it.
    struct Object: Decodable, Sendable {
        let exists: Bool
        let size: Int?
        let sha256: String?
        let etag: String?
    }

    struct Upload: Decodable, Sendable {
        let key: String
        let uploadId: String
    }

    private let server: FixtureProcess
    var baseURL: URL { server.baseURL }
    /// How many times the backend was emptied when this test took it: its
    /// presigner names it, and the backend refuses to presign for an
    /// earlier one (an earlier test's uploader, sending late).
    private(set) var generation = 0

    /// Runs `body` with a backend of its own, emptied: a transfer, which a
    /// memory measurement does not run beside (``TransferGate/sharing(_:)``).
    static func with<T>(_ body: (S3Fixture) async throws -> T) async throws -> T {
        try await TransferGate.sharing { try await withoutGate(body) }
    }

    /// ``with(_:)`` for a test that holds the ``TransferGate`` already.
    static func withoutGate<T>(_ body: (S3Fixture) async throws -> T) async throws -> T {
        let fixture = try await take()
        defer { idle.withValue { $0.append(fixture) } }
        return try await body(fixture)
    }

    /// The backends no test has now.
    private static let idle = LockedValue<[S3Fixture]>([])

    /// An idle backend, emptied, or a new one.
    private static func take() async throws -> S3Fixture {
        while let fixture = idle.withValue({ $0.popLast() }) {
            if let cleaned = try? await fixture.clean() { return cleaned }
            // A request still in flight, or a backend gone.
            fixture.stop()
        }
        return try await start()
    }

    /// Starts `s3_backend.py` and waits for its `READY <port>` line, for
    /// at most 60 seconds (moto takes a second or two to import).
    private static func start() async throws -> S3Fixture {
        S3Fixture(server: try await startPythonFixture("s3_backend.py", seconds: 60, installCommand: installCommand))
    }

    private init(server: FixtureProcess) {
        self.server = server
    }

    func stop() {
        server.stop()
    }

    /// A presigner that asks this backend, as an app asks its own, for
    /// this test's ``generation``.
    var presigner: FixturePresigner {
        FixturePresigner(endpoint: baseURL.appendingPathComponent("presign"), generation: generation)
    }

    /// Sets how the proxy answers, replacing earlier rules.
    func setRules(_ rules: [[String: any Sendable]]) async throws {
        _ = try await send("_control/rules", method: "POST", json: rules)
    }

    /// Every request the proxy received so far, in order.
    func requests() async throws -> [Request] {
        try JSONDecoder().decode([Request].self, from: try await send("_control/requests"))
    }

    /// Forgets the requests received so far and the rules.
    func reset() async throws {
        _ = try await send("_control/reset", method: "POST")
    }

    /// Empties the storage too, as for a new test: a bucket that holds an
    /// earlier post's objects answers an upload that asks first that they
    /// are stored. Returns the backend as the new test has it: its
    /// presigner's URLs are the new test's. A request in flight (an
    /// earlier test's, sent late) is waited for up to `wait` seconds, then
    /// the backend refuses.
    @discardableResult
    func clean(waitingUpTo wait: Int = 0) async throws -> S3Fixture {
        struct Cleaned: Decodable { let generation: Int }
        var cleaned = self
        cleaned.generation = try JSONDecoder().decode(
            Cleaned.self, from: try await send("_control/clean", method: "POST", query: ["wait": "\(wait)"])
        ).generation
        return cleaned
    }

    /// The object stored under `key`.
    func object(_ key: String) async throws -> Object {
        try JSONDecoder().decode(Object.self, from: try await send("_control/object", query: ["key": key]))
    }

    /// The multipart uploads in progress.
    func uploads() async throws -> [Upload] {
        struct Uploads: Decodable { let uploads: [Upload] }
        return try JSONDecoder().decode(Uploads.self, from: try await send("_control/uploads")).uploads
    }

    /// The numbers of the parts the storage holds of `upload`, in order.
    func parts(of upload: Upload) async throws -> [Int] {
        struct Part: Decodable { let partNumber: Int }
        struct Parts: Decodable { let parts: [Part] }
        let data = try await send("_control/parts", query: ["key": upload.key, "uploadId": upload.uploadId])
        return try JSONDecoder().decode(Parts.self, from: data).parts.map(\.partNumber).sorted()
    }

    /// Waits until `count` requests of `operation` (of any, when `nil`)
    /// were answered, or with `received`, had arrived, and `bytes` body
    /// bytes had arrived in all (at most `timeout` seconds); whether they
    /// were.
    func wait(
        for operation: String?, count: Int = 1, received: Bool = false, bytes: Int = 0, timeout: Int = 30
    ) async throws -> Bool {
        struct Waited: Decodable { let ok: Bool }
        var query = ["count": "\(count)", "timeout": "\(timeout)", "bytes": "\(bytes)"]
        query["operation"] = operation
        if received { query["received"] = "1" }
        let data = try await send("_control/wait", query: query)
        return try JSONDecoder().decode(Waited.self, from: data).ok
    }

    /// Holds the request whose body is still arriving once `bytes` body
    /// bytes have arrived in all: the proxy stops reading it until
    /// ``release()``. Whether one was held within `timeout` seconds; the
    /// hold is forgotten if not.
    func hold(afterBytes bytes: Int, timeout: Int = 10) async throws -> Bool {
        struct Held: Decodable { let held: Bool }
        let data = try await send("_control/hold", query: ["bytes": "\(bytes)", "timeout": "\(timeout)"])
        return try JSONDecoder().decode(Held.self, from: data).held
    }

    /// Resets the connection of every request held mid-body, without
    /// reading the rest of it (recorded as answered with status 0), and lets
    /// those that a rule's `hold` keeps go on, once each is answered; how
    /// many.
    @discardableResult
    func release() async throws -> Int {
        struct Released: Decodable { let released: Int }
        return try JSONDecoder().decode(Released.self, from: try await send("_control/release", method: "POST"))
            .released
    }

    private func send(
        _ path: String, method: String = "GET", query: [String: String] = [:], json: (any Sendable)? = nil
    ) async throws -> Data {
        var components = URLComponents(url: baseURL.appendingPathComponent(path), resolvingAgainstBaseURL: false)!
        if !query.isEmpty {
            components.queryItems = query.map { URLQueryItem(name: $0.key, value: $0.value) }
        }
        var request = URLRequest(url: components.url!)
        request.httpMethod = method
        if let json {
            request.httpBody = try JSONSerialization.data(withJSONObject: json)
        }
        return try await HTTP.data(for: request)
    }
}

/// The test's "app backend" client: asks `s3_backend.py` for each URL, as
/// the S3 article's `AppBackend` and the Playground's `PresigningBackend` do.
struct FixturePresigner: S3Presigner {
    let endpoint: URL
    /// The backend's clean the test began after (``S3Fixture/generation``);
    /// none for a presigner that is not a test's.
    var generation: Int?
    /// The most parts per page of ListParts; the storage's own (1,000) when
    /// `nil`.
    var listPageSize: Int?

    func presignedURL(for operation: S3Operation, object: URL) async throws -> URL {
        let fields: [String: (any Sendable)?] = [
            "operation": operation.action, "key": String(object.path.drop { $0 == "/" }),
            "uploadId": operation.uploadID,
            "partNumber": operation.partNumber, "partNumberMarker": operation.partNumberMarker,
            "maxParts": operation.action == "ListParts" ? listPageSize : nil, "contentMD5": operation.contentMD5,
            "generation": generation,
        ]
        var request = URLRequest(url: endpoint)
        request.httpMethod = "POST"
        request.httpBody = try JSONSerialization.data(withJSONObject: fields.compactMapValues { $0 })
        struct Presigned: Decodable { let url: URL }
        return try JSONDecoder().decode(Presigned.self, from: try await HTTP.data(for: request)).url
    }
}
