import Foundation
import JobKit
import TestSupport
import Testing
import UploadsTesting

@testable import Uploads

/// The outbox's folder lock, as another process sees it: python3 tries to
/// take it, as another outbox would.
@Suite("Outbox folder lock", .startsProcesses, .timeLimit(.minutes(1)))
struct OutboxFolderLockTests {
    @Test func anotherProcessCannotLockTheFolderWhileAnOutboxHasIt() async throws {
        let tests = try OutboxTests()
        defer { tests.folder.remove() }
        /// Whether python3, another process, can take the lock on the
        /// folder's lock file as another outbox would (a POSIX lock).
        func anotherProcessCanLock() async throws -> Bool {
            let python = try ChildProcess(
                URL(fileURLWithPath: "/usr/bin/env"),
                [
                    "python3", "-c",
                    "import fcntl, sys; f = open(sys.argv[1], 'r+'); fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)",
                    tests.folder.url.appendingPathComponent("outbox/lock").path,
                ], output: .inherited, errors: .null)
            return await python.exited() == 0 && python.process.terminationReason == .exit
        }
        let outbox = try tests.open(InMemoryUploader())
        #expect(try await !anotherProcessCanLock())
        outbox.close()
        #expect(try await anotherProcessCanLock())
    }
}
