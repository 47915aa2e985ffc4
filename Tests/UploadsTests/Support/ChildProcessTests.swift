import Foundation
import JobKitTesting
import TestSupport
import Testing

/// How the tests start their children (``ChildProcess``): an end known from
/// the process, a watchdog that kills only what is still running, and pipes
/// that no other child holds open.
@Suite("Child processes", .startsProcesses, .timeLimit(.minutes(1)))
struct ChildProcessTests {
    static let shell = URL(fileURLWithPath: "/bin/sh")

    @Test func aChildsEndIsItsExitStatus() async throws {
        let child = try ChildProcess(Self.shell, ["-c", "echo done; exit 3"])
        let printed = await Reading(try #require(child.output)).data(within: 30)
        #expect(await child.exited() == 3)
        #expect(child.hasExited && !child.timedOut && !child.wasKilled)
        #expect(printed == Data("done\n".utf8))
    }

    /// The judge a slow test cannot fool: a child that exited before its
    /// watchdog looked is not called timed out, however late the test asks.
    @Test func aChildThatExitedInTimeIsNotTimedOutWhenTheTestAsksLate() async throws {
        let child = try ChildProcess(Self.shell, ["-c", "exit 0"], killedAfter: 0.2)
        #expect(await child.exited() == 0)
        await child.watchdogHasLooked()
        #expect(!child.timedOut)
        #expect(child.process.terminationReason == .exit)
    }

    /// A child that exited while a process it started keeps what Foundation
    /// learns its exit from: the kernel knows it exited, and the watchdog
    /// asks the kernel.
    @Test func aChildThatExitedIsNotTimedOutWhileFoundationHasNotSeenItsExit() async throws {
        let child = try ChildProcess(
            Self.shell, ["-c", "exec 3<&0; (read line <&3) & echo x"], input: .pipe, killedAfter: 0.5)
        let reading = Reading(try #require(child.output))
        #expect(await reading.data(within: 0.2) == nil, "the subshell holds the output")
        await child.watchdogHasLooked()
        #expect(!child.timedOut)
        try child.input?.close()
        #expect(await child.exited() == 0)
        #expect(child.process.terminationReason == .exit)
    }

    @Test func theWatchdogKillsAChildThatOutlivesItsTime() async throws {
        // `read` waits for an input that never ends: the child hangs.
        let child = try ChildProcess(Self.shell, ["-c", "read line"], input: .pipe, killedAfter: 0.2)
        #expect(await child.exited() == SIGKILL)
        #expect(child.timedOut && !child.wasKilled)
        #expect(child.process.terminationReason == .uncaughtSignal)
    }

    @Test func aKillIsSaidSoAndNotTimedOut() async throws {
        let child = try ChildProcess(Self.shell, ["-c", "read line"], input: .pipe, killedAfter: 30)
        child.kill()
        #expect(await child.exited() == SIGKILL)
        #expect(child.wasKilled && !child.timedOut)
    }

    /// A pipe that another process holds open does not end when its child
    /// exits: a test that waits for it with a bound fails, and does not hang.
    @Test func aReadOfAPipeHeldOpenByAnotherProcessGivesUpAfterItsBound() async throws {
        // The shell exits at once; the subshell it leaves holds its output
        // until the test ends its input. (It holds what Foundation learns
        // the shell's exit from too: the exit is awaited last.)
        let child = try ChildProcess(
            Self.shell, ["-c", "exec 3<&0; (read line <&3) & echo x"], input: .pipe, killedAfter: 30)
        let reading = Reading(try #require(child.output))
        #expect(await reading.data(within: 0.2) == nil)
        try child.input?.close()
        #expect(await reading.data(within: 30) == Data("x\n".utf8))
        #expect(await child.exited() == 0)
    }

    /// The test's ends of a child's pipes are closed on `exec`: another
    /// child, started while they are open (even by code that does not take
    /// ``ChildProcess``'s lock), does not inherit them.
    @Test func theTestsEndsOfAChildsPipesAreClosedInOtherChildren() async throws {
        let child = try ChildProcess(Self.shell, ["-c", "read line; echo $line"], input: .pipe, errors: .pipe)
        for handle in [child.input, child.output, child.errors] {
            let descriptor = try #require(handle?.fileDescriptor)
            #expect(fcntl(descriptor, F_GETFD) & FD_CLOEXEC != 0)
        }
        try child.input?.write(contentsOf: Data("echoed\n".utf8))
        #expect(await Reading(try #require(child.output)).data(within: 30) == Data("echoed\n".utf8))
        #expect(await child.exited() == 0)
    }
}

/// The slots that bound the suites that start processes (``ProcessSlots``).
@Suite("Process slots", .timeLimit(.minutes(1)))
struct ProcessSlotsTests {
    /// Holders that each wait inside their slot until the test lets them go,
    /// or its task is cancelled (a test past its time limit ends, rather
    /// than waiting for holders that nothing will let go).
    final class Holders: Sendable {
        let inside = LockedValue((now: 0, most: 0))
        let entered: AsyncStream<Int>
        let enter: AsyncStream<Int>.Continuation
        /// The holders waiting to be let go, and those let go before they
        /// waited.
        let releases = LockedValue((waiting: [Int: CheckedContinuation<Void, Never>](), early: Set<Int>()))

        init() {
            (entered, enter) = AsyncStream.makeStream()
        }

        func hold(_ index: Int, in slots: ProcessSlots) async throws {
            try await slots.holding {
                inside.withValue {
                    $0.now += 1
                    $0.most = max($0.most, $0.now)
                }
                await withTaskCancellationHandler {
                    await withCheckedContinuation { continuation in
                        let early = releases.withValue { state -> Bool in
                            if state.early.remove(index) != nil { return true }
                            state.waiting[index] = continuation
                            return false
                        }
                        if early { continuation.resume() } else { enter.yield(index) }
                    }
                } onCancel: {
                    release(index)
                }
                inside.withValue { $0.now -= 1 }
            }
        }

        func release(_ index: Int) {
            releases.withValue { state -> CheckedContinuation<Void, Never>? in
                guard let waiting = state.waiting.removeValue(forKey: index) else {
                    state.early.insert(index)
                    return nil
                }
                return waiting
            }?.resume()
        }
    }

    static func folder() -> URL {
        FileManager.default.temporaryDirectory.appendingPathComponent("jobkit-slots-\(UUID().uuidString)")
    }

    @Test func noMoreThanItsCountHoldAtOnceAndTheNextWaitsForOneToLeave() async throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (waits, waiting) = AsyncStream.makeStream(of: ProcessSlots.Wait.self)
        let slots = ProcessSlots(count: 2, folder: folder) { waiting.yield($0) }
        let holders = Holders()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for index in 0..<3 {
                group.addTask { try await holders.hold(index, in: slots) }
            }
            var entered = holders.entered.makeAsyncIterator()
            var waited = waits.makeAsyncIterator()
            let first = try #require(await entered.next())
            _ = try #require(await entered.next())
            // The third waits for a slot, not for the lock of one.
            #expect(await waited.next() == .slot)
            #expect(holders.inside.value.now == 2)
            holders.release(first)
            let third = try #require(await entered.next())
            #expect(holders.inside.value.most == 2)
            for index in 0..<3 where index != first { holders.release(index) }
            _ = third
            try await group.waitForAll()
        }
        #expect(holders.inside.value == (now: 0, most: 2))
    }

    /// Two processes share a folder's slots: here, two `ProcessSlots` on one
    /// folder, one slot each, take turns.
    @Test func slotsOfOneFolderAreSharedAcrossHolders() async throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let (waits, waiting) = AsyncStream.makeStream(of: ProcessSlots.Wait.self)
        let one = ProcessSlots(count: 1, folder: folder)
        let other = ProcessSlots(count: 1, folder: folder) { waiting.yield($0) }
        let holders = Holders()
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await holders.hold(0, in: one) }
            var entered = holders.entered.makeAsyncIterator()
            #expect(await entered.next() == 0)
            group.addTask { try await holders.hold(1, in: other) }
            var waited = waits.makeAsyncIterator()
            #expect(await waited.next() == .lock)
            #expect(holders.inside.value.now == 1)
            holders.release(0)
            #expect(await entered.next() == 1)
            holders.release(1)
            try await group.waitForAll()
        }
        #expect(holders.inside.value.most == 1)
    }

    @Test func aHolderInsideASlotTakesNoOtherForWhatItRuns() async throws {
        let folder = Self.folder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let slots = ProcessSlots(count: 1, folder: folder)
        // A suite nested in a suite that holds the one slot: no deadlock.
        let inner = try await slots.holding { try await slots.holding { ProcessSlots.isHeld } }
        #expect(inner)
        #expect(!ProcessSlots.isHeld)
    }
}
