import Foundation
import JobKitTesting

// Swift's cooperative pool has one thread per core: two on the machines
// that run this suite. A test that blocks one of them (waiting for a
// semaphore, a pipe or a process) halves what every other test can run,
// and a wait of ten seconds on each stalls the suite. So every blocking
// wait of the tests is here, on a thread of its own, and a check
// (`BlockingWaitCoverageTests`) fails when a test file calls one elsewhere.

/// Runs `work`, which blocks, on a thread of its own, and returns what it
/// returns: neither on Swift's cooperative threads, which every other test
/// needs to resume, nor on a dispatch queue, whose threads the code under
/// test needs.
public func offThePool<T: Sendable>(_ work: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread.detachNewThread { continuation.resume(returning: work()) }
    }
}

/// ``offThePool(_:)`` for work that throws.
public func offThePool<T: Sendable>(throwing work: @escaping @Sendable () throws -> T) async throws -> T {
    try await offThePool { Result { try work() } }.get()
}

extension DispatchSemaphore {
    /// Whether the semaphore is signalled within `seconds`, waited for off
    /// Swift's cooperative threads.
    public func signalled(within seconds: Double) async -> Bool {
        await offThePool { self.wait(timeout: .now() + seconds) == .success }
    }
}

extension DispatchGroup {
    /// Whether everything that entered the group has left it within
    /// `seconds`, waited for off Swift's cooperative threads.
    public func completed(within seconds: Double) async -> Bool {
        await offThePool { self.wait(timeout: .now() + seconds) == .success }
    }
}

extension FileHandle {
    /// What was read, off Swift's cooperative threads, until `text` was
    /// among it or the file ended; with `then`, runs it on the reading
    /// thread as soon as `text` was read, before any test resumes.
    public func read(until text: String, then: (@Sendable () -> Void)? = nil) async -> Data {
        await offThePool {
            var data = Data()
            let wanted = Data(text.utf8)
            while data.range(of: wanted) == nil {
                let chunk = self.availableData
                if chunk.isEmpty { return data }
                data.append(chunk)
            }
            then?()
            return data
        }
    }
}

/// A read of a file to its end, started at once on a thread of its own,
/// that a test waits for with a bound: a pipe that another process holds
/// open never ends, and a test that waited for it would hang.
public final class Reading: Sendable {
    private struct State {
        var data: Data?
        var waiting: [Int: CheckedContinuation<Data?, Never>] = [:]
        var nextWaiter = 0
    }

    /// A lock that Thread Sanitizer sees, unlike `Mutex` on Linux.
    private let state = LockedValue(State())

    /// Starts reading `handle` to its end.
    public init(_ handle: FileHandle) {
        Thread.detachNewThread { [self] in
            let data = handle.readDataToEndOfFile()
            let waiting = self.state.withValue { state in
                state.data = data
                defer { state.waiting = [:] }
                return Array(state.waiting.values)
            }
            for continuation in waiting { continuation.resume(returning: data) }
        }
    }

    /// Everything read once the file ended, or `nil` if it had not ended
    /// within `seconds`.
    public func data(within seconds: Double) async -> Data? {
        await withCheckedContinuation { continuation in
            let (data, waiter) = state.withValue { state -> (Data?, Int?) in
                if let data = state.data { return (data, nil) }
                state.nextWaiter += 1
                state.waiting[state.nextWaiter] = continuation
                return (nil, state.nextWaiter)
            }
            guard let waiter else { return continuation.resume(returning: data) }
            // allowed: a bound against a pipe that never ends, not a wait for an event
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) { [self] in
                self.state.withValue { $0.waiting.removeValue(forKey: waiter) }?.resume(returning: nil)
            }
        }
    }
}
