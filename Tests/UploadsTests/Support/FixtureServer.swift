import Foundation
import JobKitTesting
import TestSupport
import Testing

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The upload server of `Fixtures/upload_server.js`, on Node's own `http`
/// module, on 127.0.0.1: a strict HTTP/1.1 peer we did not write, which
/// answers 400 to bad framing as production servers do. Started by a test
/// and stopped when the test ends, whether it passed or not.
final class FixtureServer: Sendable {
    /// One upload the server received.
    struct Received: Decodable, Sendable {
        let method: String
        let path: String
        let headers: [String: String]
        /// The request's headers as they came on the wire, in order.
        let rawHeaders: [[String]]
        let length: Int
        let complete: Bool
        let sha256: String
        /// The body's MD5, in hex: the ETag answered by default.
        let md5: String
        let body: String?
        /// A form's entries, as Node's `Request.formData()` parsed them.
        let form: ParsedForm?
        /// Why Node's `Request.formData()` refused a form.
        let formError: String?
        /// Whether it asked first (`Expect: 100-continue`) and was answered
        /// before its body was read; its `length` counts the body bytes
        /// that came all the same.
        let early: Bool?
    }

    private let server: FixtureProcess
    var baseURL: URL { server.baseURL }

    /// Starts a server, runs `body` with it, and stops it; then fails if
    /// any request was malformed: refused by Node's parser, or carrying both
    /// `Content-Length` and `Transfer-Encoding` (RFC 9112 §6.1–6.2). When
    /// `body` runs out of time (``TimeLimitExceeded``), the test is told
    /// what the server had received by then.
    static func with<T>(_ body: (FixtureServer) async throws -> T) async throws -> T {
        let server = FixtureServer(server: try await startNodeFixture("upload_server.js"))
        defer { server.stop() }
        let result: T
        do {
            result = try await body(server)
        } catch let error as TimeLimitExceeded {
            await server.recordWhatArrived()
            throw error
        }
        try await server.checkFraming()
        return result
    }

    /// Records, as an issue of the running test, the requests the server
    /// had received, a line each, those whose body was still arriving
    /// last: which side a test that ran out of time was waiting for.
    func recordWhatArrived() async {
        func line(_ upload: Received) -> String {
            let expected = upload.headers["content-length"].map { " of \($0)" } ?? ""
            return "\(upload.method) \(upload.path): \(upload.length)\(expected) body bytes"
        }
        do {
            // Those arriving first: an upload that ends between the two
            // questions is then listed twice, rather than missed.
            let (arriving, ended) = try await withTimeLimit(.seconds(5)) {
                (try await self.arriving(), try await self.received())
            }
            let lines =
                ended.map { "ended: \(line($0))\($0.complete ? "" : ", cut short")" }
                + arriving.map { "still arriving: \(line($0))" }
            Issue.record("What the server had received:\n\(lines.isEmpty ? "nothing" : lines.joined(separator: "\n"))")
        } catch {
            Issue.record("The server did not say what it had received: \(error)")
        }
    }

    /// Throws if any request so far was malformed.
    func checkFraming() async throws {
        let refused = try await errors()
        let both = try await received().filter {
            $0.headers["content-length"] != nil && $0.headers["transfer-encoding"] != nil
        }
        guard refused.isEmpty, both.isEmpty else {
            throw ServerError(
                message: "malformed requests: refused \(refused), both framing headers on \(both.map(\.path))"
            )
        }
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

    /// Sets how the server answers uploads to `path`.
    func setRule(_ path: String, _ rule: [String: any Sendable]) async throws {
        var request = URLRequest(url: url("_control"))
        request.httpMethod = "POST"
        var body = rule
        body["path"] = "/" + path
        request.httpBody = try JSONSerialization.data(withJSONObject: body)
        _ = try await Self.send(request)
    }

    /// The requests the server refused as malformed: bad framing, say.
    func errors() async throws -> [[String: String]] {
        try JSONDecoder().decode([[String: String]].self, from: try await Self.send(URLRequest(url: url("_errors"))))
    }

    /// Every upload received so far.
    func received() async throws -> [Received] {
        try JSONDecoder().decode([Received].self, from: try await Self.send(URLRequest(url: url("_received"))))
    }

    /// The uploads whose body is still arriving, or whose form is being
    /// parsed.
    func arriving() async throws -> [Received] {
        try JSONDecoder().decode([Received].self, from: try await Self.send(URLRequest(url: url("_arriving"))))
    }

    /// The uploads of `path`, once at least one has ended (up to 10 s).
    func waitForUpload(of path: String) async throws -> [Received] {
        var components = URLComponents(url: url("_wait"), resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "path", value: "/" + path)]
        return try JSONDecoder().decode([Received].self, from: try await Self.send(URLRequest(url: components.url!)))
    }

    /// What arrived so far: body bytes, uploads ended, and whether a wait
    /// for more saw them.
    struct Arrived: Decodable {
        let ok: Bool
        let bytes: Int
        let ended: Int
    }

    /// Waits until `bytes` body bytes of uploads have arrived in all and
    /// `ended` uploads have ended (up to `seconds`, at most 10); what had.
    func waitFor(bytes: Int, ended: Int, seconds: Int = 10) async throws -> Arrived {
        var components = URLComponents(url: url("_wait_for"), resolvingAgainstBaseURL: false)!
        components.queryItems = [
            URLQueryItem(name: "bytes", value: "\(bytes)"), URLQueryItem(name: "ended", value: "\(ended)"),
            URLQueryItem(name: "timeout", value: "\(seconds)"),
        ]
        return try JSONDecoder().decode(Arrived.self, from: try await Self.send(URLRequest(url: components.url!)))
    }

    /// Holds the upload whose body is still arriving once `bytes` body
    /// bytes of uploads have arrived in all: the server stops reading it
    /// until ``release()``. Whether one was held within `seconds` (at most
    /// 10); the hold is forgotten if not.
    func hold(afterBytes bytes: Int, seconds: Int = 10) async throws -> Bool {
        struct Held: Decodable { let held: Bool }
        var components = URLComponents(url: url("_hold"), resolvingAgainstBaseURL: false)!
        components.queryItems = [
            URLQueryItem(name: "bytes", value: "\(bytes)"), URLQueryItem(name: "timeout", value: "\(seconds)"),
        ]
        return try JSONDecoder().decode(Held.self, from: try await Self.send(URLRequest(url: components.url!))).held
    }

    /// Drops the connection of every upload held, without reading the rest
    /// of its body (its record then says it did not complete), or with
    /// `resuming`, reads them again; forgets the holds not yet taken (a
    /// rule's `hold_after` too). How many uploads were held.
    @discardableResult
    func release(resuming: Bool = false) async throws -> Int {
        struct Released: Decodable { let released: Int }
        var components = URLComponents(url: url("_release"), resolvingAgainstBaseURL: false)!
        if resuming { components.queryItems = [URLQueryItem(name: "resume", value: "1")] }
        var request = URLRequest(url: components.url!)
        request.httpMethod = "POST"
        return try JSONDecoder().decode(Released.self, from: try await Self.send(request)).released
    }

    /// Sends `request` with the shared session and returns the answer's body.
    static func send(_ request: URLRequest) async throws -> Data {
        try await HTTP.answer(to: request).body
    }

    struct ServerError: Error, CustomStringConvertible {
        let message: String
        var description: String { message }
    }
}

/// Starts `node Fixtures/<script>` with `environment` added to this
/// process's, and reads the port it prints alone on its first line once
/// listening (within 30 seconds), off Swift's cooperative threads.
func startNodeFixture(_ script: String, environment: [String: String] = [:]) async throws -> FixtureProcess {
    let path = PackageFolder.file("Tests/UploadsTests/Fixtures/\(script)").path
    let node = try ChildProcess(
        URL(fileURLWithPath: "/usr/bin/env"), ["node", path], environment: environment, input: .pipe)
    let port = await FixtureProcess.firstLine(of: node, seconds: 30)
    guard let number = Int(port) else {
        node.kill()
        throw FixtureServer.ServerError(message: "\(script) (node) did not print a port: \(port)")
    }
    return FixtureProcess(port: number, process: node)
}
