import Foundation
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A form as a parser nobody here wrote read it: Node's
/// `Request.formData()` (in `upload_server.js`) or Werkzeug's (in
/// `form_server.py`).
struct ParsedForm: Decodable, Sendable, Hashable {
    /// A field (`value`) or a file (`filename`, `type`, `size`, `sha256`,
    /// and with Werkzeug its part's `headers`).
    struct Entry: Decodable, Sendable, Hashable {
        let name: String
        let value: String?
        let filename: String?
        let type: String?
        let size: Int?
        let sha256: String?
        let headers: [[String]]?
    }

    /// A part as the standard library's MIME parser (`email`) read it:
    /// every header, in order, and the bytes.
    struct Part: Decodable, Sendable, Hashable {
        let name: String?
        let filename: String?
        /// Its Content-Type header; `nil` without one.
        let type: String?
        let size: Int
        let sha256: String
        let headers: [[String]]
    }

    let entries: [Entry]
    /// `form_server.py`'s only: the request's method, and every part as
    /// the `email` parser read it.
    let method: String?
    let parts: [Part]?
    /// Werkzeug's only: the request's `Content-Length`, the bytes of body
    /// it read, and its `Transfer-Encoding`.
    let contentLength: Int?
    let received: Int?
    let transferEncoding: String?

    /// The fields, as name and value, in order.
    var fields: [[String]] { entries.compactMap { entry in entry.value.map { [entry.name, $0] } } }
    /// The files, in order.
    var files: [Entry] { entries.filter { $0.filename != nil } }
}

/// Werkzeug's form parser (Flask's), behind Werkzeug's own server on
/// 127.0.0.1, from `Fixtures/form_server.py`: a second opinion on every
/// form. Installed with moto, pinned, by `.ci/run`.
final class WerkzeugFormServer: Sendable {
    static let installCommand = #"pip install "Werkzeug==3.1.8""#

    /// Whether Werkzeug can run here, asked once. Always `true` under CI,
    /// where a missing Werkzeug must fail the tests, not skip them.
    private static let isAvailable = Task.detached {
        isRunningInCI ? true : await python3CanRun("import werkzeug.formparser")
    }

    /// Skips a test where Werkzeug is missing, saying why.
    static let requirement = ConditionTrait.enabled(
        "Werkzeug is not installed; install it with: \(installCommand)"
    ) { await isAvailable.value }

    private let server: FixtureProcess
    var baseURL: URL { server.baseURL }

    /// Starts a server, runs `body` with it, and stops it.
    static func with<T>(_ body: (WerkzeugFormServer) async throws -> T) async throws -> T {
        let server = try await start()
        defer { server.stop() }
        return try await body(server)
    }

    /// Starts `form_server.py` and waits for its `READY <port>` line, for
    /// at most 30 seconds.
    private static func start() async throws -> WerkzeugFormServer {
        WerkzeugFormServer(
            server: try await startPythonFixture("form_server.py", seconds: 30, installCommand: installCommand))
    }

    private init(server: FixtureProcess) {
        self.server = server
    }

    func stop() {
        server.stop()
    }

    /// A URL on the server.
    func url(_ path: String) -> URL {
        baseURL.appendingPathComponent(path)
    }
}
