import Foundation
import JobKitTesting
import Testing

/// Runs the suites that start processes (servers, the Playground, python3)
/// a bounded number at a time on the machine: as many as it has cores, or
/// `JOBKIT_TEST_PROCESS_SUITES`.
///
/// Run all at once, two cores' worth of tests started some forty
/// Playgrounds, a dozen servers and their uploads together, and each
/// test's own time stretched with the crowd until some passed their
/// limits. A suite with this trait waits for a slot before its first test
/// starts (its tests' time limits start after), and holds it until its
/// last test ends; its tests still run beside one another and beside
/// every suite that starts no process. The slots are files locked with
/// `flock`, so the test processes of one machine share them: the plain
/// and sanitized passes of `.ci/run` together run no more such suites
/// than the machine has cores.
public struct StartsProcesses: SuiteTrait, TestTrait, TestScoping {
    /// Itself, for the suite (or test) that has the trait, not for each of
    /// a suite's tests.
    public func scopeProvider(for test: Test, testCase: Test.Case?) -> Self? {
        // A suite holds its slot once, around all of its tests; a test that
        // has the trait itself, around its own run.
        (testCase == nil) == test.isSuite ? self : nil
    }

    /// Runs the suite (or test) once it holds one of the machine's slots.
    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        try await ProcessSlots.machine.holding(function)
    }
}

extension Trait where Self == StartsProcesses {
    /// Marks a suite whose tests start processes: it runs when one of the
    /// machine's slots is free (``StartsProcesses``).
    public static var startsProcesses: Self { StartsProcesses() }
}

/// A bounded number of slots, each one lock file of a folder, taken by one
/// holder at a time across every process that uses the folder.
public final class ProcessSlots: Sendable {
    /// The slots every test process of this machine shares.
    public static let machine = ProcessSlots(
        count: ProcessInfo.processInfo.environment["JOBKIT_TEST_PROCESS_SUITES"].flatMap { Int($0) }
            ?? ProcessInfo.processInfo.activeProcessorCount,
        // One folder per user: another user's lock files are not ours to open.
        folder: FileManager.default.temporaryDirectory.appendingPathComponent("jobkit-test-process-slots-\(getuid())"))

    /// Whether the current task holds a slot (of any `ProcessSlots`): a
    /// suite nested in one that holds a slot runs in it.
    @TaskLocal public static var isHeld = false

    private let folder: URL
    /// Told when a holder has to wait: for another of this process's, or
    /// for another process's holder of the same slot.
    private let observe: @Sendable (Wait) -> Void

    /// What a holder waits for.
    public enum Wait: Sendable {
        /// A slot of this `ProcessSlots`: `count` holders hold one.
        case slot
        /// The lock file of its slot, which another `ProcessSlots` on the
        /// same folder (another test process) holds.
        case lock
    }

    private struct State {
        var free: [Int]
        var waiting: [CheckedContinuation<Int, Never>] = []
    }

    /// A lock that Thread Sanitizer sees, unlike `Mutex` on Linux.
    private let state: LockedValue<State>

    /// `count` slots (at least one), whose lock files are in `folder`;
    /// `observe` is told each time a holder has to wait.
    public init(count: Int, folder: URL, observe: @escaping @Sendable (Wait) -> Void = { _ in }) {
        self.folder = folder
        self.observe = observe
        state = LockedValue(State(free: Array((0..<max(count, 1)).reversed())))
    }

    /// Runs `body` once a slot is free, holding it until `body` returns or
    /// throws; at once if the task holds a slot already.
    public func holding<T: Sendable>(_ body: @Sendable () async throws -> T) async throws -> T {
        if Self.isHeld { return try await body() }
        let index = await take()
        defer { give(index) }
        // Then the slot of the same number across processes: waited for
        // off Swift's cooperative threads.
        let path = folder.appendingPathComponent("slot-\(index)").path
        let descriptor = try await offThePool(throwing: { [folder, observe] in
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            // Closed on exec: a child that kept it would hold the slot as
            // long as it lives.
            let descriptor = open(path, O_RDONLY | O_CREAT | O_CLOEXEC, 0o644)
            guard descriptor >= 0 else { throw SlotError(path: path, error: errno) }
            if flock(descriptor, LOCK_EX | LOCK_NB) == 0 { return descriptor }
            observe(.lock)
            guard flock(descriptor, LOCK_EX) == 0 else {
                let error = errno
                close(descriptor)
                throw SlotError(path: path, error: error)
            }
            return descriptor
        })
        defer { close(descriptor) }
        return try await Self.$isHeld.withValue(true) { try await body() }
    }

    private func take() async -> Int {
        await withCheckedContinuation { continuation in
            let index = state.withValue { state -> Int? in
                if let index = state.free.popLast() { return index }
                state.waiting.append(continuation)
                return nil
            }
            if let index { continuation.resume(returning: index) } else { observe(.slot) }
        }
    }

    private func give(_ index: Int) {
        let next = state.withValue { state -> CheckedContinuation<Int, Never>? in
            if state.waiting.isEmpty {
                state.free.append(index)
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume(returning: index)
    }

    struct SlotError: Error, CustomStringConvertible {
        let path: String
        let error: Int32
        var description: String { "cannot lock \(path): \(String(cString: strerror(error)))" }
    }
}
