import Foundation
import JobKitTesting
import Testing

/// A process a test starts (a server, the Playground, python3): started so
/// that no other child holds its pipes, its end known from the process
/// itself, and killed if it outlives its time.
///
/// Foundation's `Process` on Linux closes, in each child, the descriptors
/// open when it looked (`/proc/self/fd`); one that another thread opens
/// between that look and the child's start is inherited. A pipe of one
/// test's run, inherited by another test's server, stays open until that
/// server exits: the run's output never ends, and its test waits for a
/// server that lives as long as the test process. (A program of 30 lines
/// on this toolchain: 6 reads of 300 waited for an unrelated child.) So
/// every child of the tests starts here, its pipes made and the child
/// started under one lock, and the pipes are closed on `exec` in any
/// child that is not theirs.
public final class ChildProcess: Sendable {
    /// Where one of the child's standard streams goes.
    public enum Stream: Sendable {
        /// A pipe to or from the test (``ChildProcess/input``,
        /// ``ChildProcess/output``, ``ChildProcess/errors``).
        case pipe
        /// `/dev/null`.
        case null
        /// This test process's own.
        case inherited
    }

    /// The process, started.
    public let process: Process
    /// The pipe's end to write the child's standard input to, if it is a
    /// pipe; closing it ends that input.
    public let input: FileHandle?
    /// The pipe's end to read the child's standard output from, if it is a
    /// pipe.
    public let output: FileHandle?
    /// The pipe's end to read the child's standard error from, if it is a
    /// pipe.
    public let errors: FileHandle?

    private struct State {
        var status: Int32?
        var timedOut = false
        var killed = false
        var waiting: [CheckedContinuation<Int32, Never>] = []
    }

    /// The state, shared with the termination handler and the watchdog
    /// (a lock that Thread Sanitizer sees, unlike `Mutex` on Linux).
    private let state = LockedValue(State())
    /// Left once the watchdog has looked at the child.
    private let watchdogLooking = DispatchGroup()

    /// Serializes making pipes and starting children (see the type's
    /// documentation).
    private static let starting = LockedValue(())

    /// Starts `executable` with `arguments`, and `environment` added to this
    /// process's; with `killedAfter`, a watchdog kills it with `SIGKILL` if
    /// it has not exited after that many seconds (``timedOut``).
    public init(
        _ executable: URL, _ arguments: [String], environment: [String: String] = [:],
        input: Stream = .inherited, output: Stream = .pipe, errors: Stream = .inherited,
        killedAfter seconds: Double? = nil
    ) throws {
        if Test.current != nil && !ProcessSlots.isHeld {
            Issue.record(
                "\(executable.lastPathComponent) started outside a suite marked .startsProcesses: mark the suite")
        }
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        self.process = process
        let state = state
        let pipes = try Self.starting.withValue { _ in
            let pipes = (input: Self.pipe(input), output: Self.pipe(output), errors: Self.pipe(errors))
            // Left unset, a stream is this process's own.
            if let stream = Self.standardStream(input, pipes.input) { process.standardInput = stream }
            if let stream = Self.standardStream(output, pipes.output) { process.standardOutput = stream }
            if let stream = Self.standardStream(errors, pipes.errors) { process.standardError = stream }
            process.terminationHandler = { process in
                let waiting = state.withValue { state in
                    state.status = process.terminationStatus
                    defer { state.waiting = [] }
                    return state.waiting
                }
                for continuation in waiting { continuation.resume(returning: process.terminationStatus) }
            }
            try process.run()
            return pipes
        }
        self.input = pipes.input?.fileHandleForWriting
        self.output = pipes.output?.fileHandleForReading
        self.errors = pipes.errors?.fileHandleForReading
        if let seconds {
            let pid = process.processIdentifier
            // A watchdog that kills a hung child; no test waits on it.
            let looking = watchdogLooking
            looking.enter()
            // allowed: a watchdog against a hung child; no verdict waits for its time
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds) {
                state.withValue { state in
                    guard state.status == nil, !state.killed, process.isRunning, !Self.hasEnded(pid) else { return }
                    state.timedOut = true
                    Foundation.kill(pid, SIGKILL)
                }
                looking.leave()
            }
        }
    }

    /// Returns once the watchdog has looked at the child (at once if there
    /// is none).
    public func watchdogHasLooked() async {
        let looking = watchdogLooking
        await offThePool { looking.wait() }
    }

    /// Whether the child has exited, as the process reported it.
    public var hasExited: Bool { state.withValue { $0.status != nil } || !process.isRunning }

    /// Whether the watchdog killed it: it had not exited after its time.
    public var timedOut: Bool { state.withValue { $0.timedOut } }

    /// Whether ``kill(with:)`` sent it a signal before it exited.
    public var wasKilled: Bool { state.withValue { $0.killed } }

    /// Sends `signal` (by default `SIGKILL`) to the child, unless it has
    /// exited.
    public func kill(with signal: Int32 = SIGKILL) {
        state.withValue { state in
            guard state.status == nil, process.isRunning else { return }
            state.killed = true
            Foundation.kill(process.processIdentifier, signal)
        }
    }

    /// Sends `signal` to the child, unless it has exited, as a user would
    /// (`SIGINT`, `SIGTERM`): the child may handle it.
    public func send(_ signal: Int32) {
        state.withValue { state in
            guard state.status == nil, process.isRunning else { return }
            Foundation.kill(process.processIdentifier, signal)
        }
    }

    /// Asks the child to stop (`SIGTERM`), unless it has exited, without
    /// waiting for it.
    public func terminate() {
        state.withValue { state in
            guard state.status == nil, process.isRunning else { return }
            process.terminate()
        }
    }

    /// Waits, without holding a thread, until the child has exited; its
    /// exit status, or the number of the signal that ended it
    /// (`process.terminationReason` tells which).
    public func exited() async -> Int32 {
        await withCheckedContinuation { continuation in
            let status = state.withValue { state in
                if state.status == nil { state.waiting.append(continuation) }
                return state.status
            }
            if let status { continuation.resume(returning: status) }
        }
    }

    /// Whether the kernel says `pid` has exited, whether or not Foundation
    /// has seen it: Foundation learns of a child's exit when a socket it
    /// gave the child closes, and a grandchild that inherited it keeps it
    /// open. (Only Linux tells, through `/proc`; elsewhere, `false`.)
    static func hasEnded(_ pid: pid_t) -> Bool {
        #if os(Linux)
        // Gone once reaped; `Z` (a zombie) once exited and not yet reaped.
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
        guard let name = stat.lastIndex(of: ")") else { return false }
        return stat[stat.index(after: name)...].drop { $0 == " " }.first == "Z"
        #else
        return false
        #endif
    }

    private static func pipe(_ stream: Stream) -> Pipe? {
        guard stream == .pipe else { return nil }
        let pipe = Pipe()
        // Closed on exec: in the child that is theirs, Foundation's `dup2`
        // makes the standard stream a copy that stays open.
        for handle in [pipe.fileHandleForReading, pipe.fileHandleForWriting] {
            _ = fcntl(handle.fileDescriptor, F_SETFD, FD_CLOEXEC)
        }
        return pipe
    }

    private static func standardStream(_ stream: Stream, _ pipe: Pipe?) -> Any? {
        switch stream {
        case .pipe: pipe
        case .null: FileHandle.nullDevice
        case .inherited: nil
        }
    }
}
