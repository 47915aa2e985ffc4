import Testing

/// The tests that measure this process's memory while they move tens or
/// hundreds of megabytes through a server. The memory they measure is the
/// whole process's, and another test's transfer would count in it: each
/// runs alone among the transfers and the other measurements
/// (``TransferGate/alone(_:)``), while the transfers run beside one
/// another and beside every other test.
@Suite("Large transfers", .timeLimit(.minutes(2)))
enum LargeTransfers {}

/// The S3 suites, against moto's S3 server (a backend to each test while it
/// runs): they run beside one another and the other suites, each test a
/// transfer (``TransferGate/sharing(_:)``, through `S3Fixture.with`).
@Suite("S3 storage", .timeLimit(.minutes(2)))
enum S3Storage {}

/// Lets transfers run together and a memory measurement run alone among
/// them: first come, first served, so a measurement waits for the transfers
/// in flight and the transfers that come after it wait for it.
actor TransferGate {
    private static let shared = TransferGate()

    private var transfers = 0
    private var isMeasuring = false
    private var waiting: [(alone: Bool, continuation: CheckedContinuation<Void, Never>)] = []

    /// Runs `body` as a transfer, beside other transfers but never beside a
    /// measurement.
    static func sharing<T>(_ body: () async throws -> T) async throws -> T {
        try await shared.run(alone: false, body)
    }

    /// Runs `body`, a measurement, once no transfer is in flight; no
    /// transfer starts until it ends.
    static func alone<T>(_ body: () async throws -> T) async throws -> T {
        try await shared.run(alone: true, body)
    }

    private nonisolated func run<T>(alone: Bool, _ body: () async throws -> T) async throws -> T {
        await enter(alone: alone)
        do {
            let value = try await body()
            await leave(alone: alone)
            return value
        } catch {
            await leave(alone: alone)
            throw error
        }
    }

    private func enter(alone: Bool) async {
        if waiting.isEmpty, canEnter(alone: alone) {
            take(alone: alone)
            return
        }
        await withCheckedContinuation { continuation in
            waiting.append((alone, continuation))
        }
    }

    private func leave(alone: Bool) {
        if alone { isMeasuring = false } else { transfers -= 1 }
        while let first = waiting.first, canEnter(alone: first.alone) {
            waiting.removeFirst()
            take(alone: first.alone)
            first.continuation.resume()
        }
    }

    private func canEnter(alone: Bool) -> Bool {
        alone ? !isMeasuring && transfers == 0 : !isMeasuring
    }

    private func take(alone: Bool) {
        if alone { isMeasuring = true } else { transfers += 1 }
    }
}
