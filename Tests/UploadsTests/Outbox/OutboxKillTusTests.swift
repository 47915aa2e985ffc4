import Foundation
import JobKitTesting
import Testing
import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The Playground publishing through `--tus --outbox` on `resumable-upload`,
/// behind the counting proxy, killed with SIGKILL at random moments and run
/// again (see ``OutboxKillTests``).
///
/// Every medium goes to the one creation endpoint: the requests name each
/// upload after the file name its creation carried in `Upload-Metadata`.
/// Besides what the other kill tests check, no `PATCH` went out at an
/// offset the server did not hold (the server answers those `409`), and
/// a medium's upload is created a second time only when a kill came
/// between the server's answer to its creation and the manifest (or during
/// the creation): no more than three per kill, one per upload in flight.
extension OutboxKillTests {
    @Test(TusFixture.requirement)
    func killedRunsAgainstATusServerEndInOnePublishedPostEachAndNeverResendAStoredMedium() async throws {
        try await TusFixture.with(.resumableUpload) { tus in
            let server = TusServer(fixture: tus)
            let tally = try await Self.killRepeatedly(server, kills: 10, scale: "0.3")
            Self.report("tus", tally)

            let conflicts = try await tus.requests().filter { $0.status == 409 }
            #expect(conflicts.isEmpty, "PATCHes at an offset the server did not hold: \(conflicts)")
            // Per post: each post's media have the same names as the last's.
            let requests = try await server.requests()
            let starts = server.episodeStarts.value + [requests.count]
            var creations = 0
            var repeated = 0
            for (start, end) in zip(starts, starts.dropFirst()) {
                let names = requests[start..<end].filter { $0.name.hasPrefix("POST ") }.map(\.name)
                creations += names.count
                repeated += names.count - Set(names).count
            }
            // A kill can fall in that window, or in a creation still in
            // flight, for each of the three uploads the Playground runs at once.
            #expect(repeated <= 3 * tally.kills, "\(repeated) uploads created again, for \(tally.kills) kills")
            if ProcessInfo.processInfo.environment["JOBKIT_PRINT_MEASUREMENTS"] != nil {
                print("tus: \(creations) uploads created, \(repeated) of them a second time after a kill")
            }
        }
    }
}

/// `resumable-upload` behind the counting proxy. Each upload is named
/// after the file name of its creation; the episodes' posts have the same
/// names, so each episode's requests are told apart by where they start.
struct TusServer: OutboxKillTests.Server {
    let fixture: TusFixture
    /// Where each episode's requests start.
    let episodeStarts = LockedValue<[Int]>([])

    func arguments(episode: Int) -> [String] {
        ["--tus", fixture.endpoint.absoluteString]
    }

    func startEpisode() async throws {
        let count = try await requests().count
        episodeStarts.withValue { $0.append(count) }
    }

    func progress() async throws -> (bytes: Int, ended: Int) {
        let requests = try await fixture.requests(refusedResends: true)
        return (requests.reduce(0) { $0 + $1.bodyBytes }, requests.filter { $0.status != 0 }.count)
    }

    func waitFor(ended: Int) async throws {
        var components = URLComponents(
            url: fixture.baseURL.appendingPathComponent("_wait_for"), resolvingAgainstBaseURL: false)!
        components.queryItems = [
            URLQueryItem(name: "ended", value: "\(ended)"), URLQueryItem(name: "timeout", value: "2"),
        ]
        _ = try await FixtureServer.send(URLRequest(url: components.url!))
    }

    func hold(afterBytes bytes: Int) async throws -> Bool {
        try await fixture.hold(afterBytes: bytes)
    }

    func release() async throws {
        try await fixture.release()
    }

    /// Every request, named after the upload it belongs to: `POST photo-1.jpg`,
    /// `PATCH photo-1.jpg 0` (and its offset), `HEAD photo-1.jpg`; stored
    /// when the server took its bytes.
    func requests() async throws -> [OutboxKillTests.Request] {
        var names: [String: String] = [:]
        return try await fixture.requests().map { request in
            var name = ""
            if request.method == "POST" {
                name = Self.filename(in: request.metadata) ?? "?"
                if let location = request.location.flatMap({ URL(string: $0, relativeTo: fixture.baseURL) }) {
                    names[location.path] = name
                }
            } else {
                name = names[request.path] ?? ""
            }
            let what = request.method == "PATCH" ? "PATCH \(name) \(request.offset ?? "")" : "\(request.method) \(name)"
            // Stored: bytes the server took (a PATCH, or a creation with the
            // medium inside), not a question or a creation without bytes.
            let tookBytes = request.method == "PATCH" || request.method == "POST" && request.bodyBytes > 0
            return .init(
                path: name, name: what, bytes: request.bodyBytes,
                isStored: tookBytes && (200..<300).contains(request.status))
        }
    }

    func checkStored(_ path: String, file: URL) async throws {
        let size = (try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? NSNumber)?.intValue ?? -1
        let expected = TusFixture.Stored(size: size, sha256: try await sha256(of: file))
        #expect(try await stored(path) == expected, "\(path) is stored whole")
    }

    func checkDocument(_ path: String, idempotencyKey key: String) async throws {
        // tus keeps no idempotency key: the kill checks say no document is
        // sent after its receipt is recorded.
        #expect(try await stored(path) != nil, "the post is stored")
    }

    func name(of media: Media) -> String {
        media.filename ?? media.defaultFilename
    }

    /// What the server holds of the last upload of `name` it finished.
    private func stored(_ name: String) async throws -> TusFixture.Stored? {
        let creations = try await fixture.requests().filter {
            $0.method == "POST" && $0.status == 201 && Self.filename(in: $0.metadata) == name
        }
        for creation in creations.reversed() {
            guard let location = creation.location, let url = URL(string: location, relativeTo: fixture.baseURL),
                let stored = try await fixture.stored(url)
            else { continue }
            return stored
        }
        return nil
    }

    /// The `filename` in an `Upload-Metadata` header.
    static func filename(in metadata: String?) -> String? {
        for entry in (metadata ?? "").split(separator: ",") {
            let parts = entry.trimmingCharacters(in: .whitespaces).split(separator: " ")
            if parts.count == 2, parts[0] == "filename", let data = Data(base64Encoded: String(parts[1])) {
                return String(decoding: data, as: UTF8.self)
            }
        }
        return nil
    }
}
