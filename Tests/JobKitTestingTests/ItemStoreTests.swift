import JobKit
import Testing

@testable import JobKitTesting

/// `TestQueue` keeps every waiting item, with its work, in one store, and a
/// cancelled delayed item leaves it at once: checked against a plain list
/// over thousands of random operations, with the store's own consistency
/// checked after each.
@Suite("TestQueue's store of items", .timeLimit(.minutes(1)))
struct ItemStoreTests {
    /// An item the list expects: its due time and its number, in enqueue
    /// order, which is also the order of the queue's sequence numbers.
    private struct Expected {
        let due: Duration
        let id: Int
    }

    @Test(arguments: [TestQueue.Ordering.fifo, .shuffled(seed: 1), .shuffled(seed: 2)])
    func randomOperationsMatchAPlainList(ordering: TestQueue.Ordering) throws {
        var random = SeededRandomNumberGenerator(seed: 7)
        let queue = TestQueue(ordering: ordering)
        let ran = LockedValue<[Int]>([])
        var waiting: [Expected] = []
        var handles: [(id: Int, work: DelayedWork)] = []
        var now = Duration.zero
        var nextID = 0

        func enqueue(after delay: Duration?) {
            let id = nextID
            nextID += 1
            let work: @Sendable () -> Void = { ran.withValue { $0.append(id) } }
            if let delay {
                handles.append((id, queue.enqueue(after: delay, work)))
            } else {
                queue.enqueue(work)
            }
            waiting.append(Expected(due: now + (delay ?? .zero), id: id))
        }

        /// Checks that the items run since `before` are the first `limit`
        /// of those due by `time`, in order of due time: in FIFO order, in
        /// enqueue order among items due at the same time; shuffled, drawn
        /// from those.
        func expectRun(dueBy time: Duration, limit: Int = .max, since before: Int) throws {
            let due = waiting.filter { $0.due <= time }.sorted { ($0.due, $0.id) < ($1.due, $1.id) }
            let run = Array(ran.value[before...])
            let expected = Array(due.prefix(limit))
            if ordering == .fifo {
                try #require(run == expected.map(\.id))
            } else if limit < due.count {
                // Drawn from the items due at the earliest instant.
                let earliest = due.filter { $0.due == due[0].due }.map(\.id)
                try #require(run.count == limit && run.allSatisfy(earliest.contains))
            } else {
                try #require(run.sorted() == expected.map(\.id).sorted())
                let dues = run.map { id in waiting.first { $0.id == id }!.due }
                try #require(dues == dues.sorted())
            }
            let runIDs = Set(run)
            waiting.removeAll { runIDs.contains($0.id) }
        }

        for _ in 0..<3_000 {
            let before = ran.value.count
            switch random.next() % 8 {
            case 0, 1:
                enqueue(after: nil)
            case 2, 3:
                enqueue(after: .seconds(Int(random.next() % 4)))
            case 4:
                guard !handles.isEmpty else { continue }
                let (id, work) = handles.remove(at: Int(random.next() % UInt64(handles.count)))
                work.cancel()
                waiting.removeAll { $0.id == id }
            case 5, 6:
                let isDue = waiting.contains { $0.due <= now }
                #expect(queue.runNext() == isDue)
                try expectRun(dueBy: now, limit: 1, since: before)
            default:
                let step = Duration.seconds(Int(random.next() % 2))
                try queue.advance(by: step)
                now += step
                try expectRun(dueBy: now, since: before)
            }
            try #require(queue.inconsistencies == [])
            try #require(queue.pendingCount == waiting.count)
            try #require(queue.now == now)
        }
        try queue.advance(by: .seconds(10))
        #expect(queue.isIdle)
        #expect(queue.inconsistencies == [])
    }

    /// Items due at one instant wait in a pool while a shuffled queue draws
    /// from it; one that cancels the others there leaves nothing behind.
    @Test func workCancelledWhileItsInstantIsDrawnFromLeavesTheStore() throws {
        let queue = TestQueue(ordering: .shuffled(seed: 3))
        let ran = LockedValue<[Int]>([])
        let handles = LockedValue<[DelayedWork]>([])
        for index in 0..<6 {
            let handle = queue.enqueue(after: .seconds(1)) {
                ran.withValue { $0.append(index) }
                for handle in handles.value { handle.cancel() }
            }
            handles.withValue { $0.append(handle) }
        }
        #expect(queue.runNext() == false)
        try queue.advance(by: .seconds(1))
        #expect(ran.value.count == 1)
        #expect(queue.isIdle)
        #expect(queue.inconsistencies == [])
    }

    /// A call stopped at its step limit while items of one instant wait to
    /// be drawn leaves them waiting, at that instant: later calls run each
    /// once.
    @Test(arguments: [TestQueue.Ordering.fifo, .shuffled(seed: 4)])
    func aCallStoppedWhileAnInstantIsDrawnFromLeavesItsItemsWaiting(ordering: TestQueue.Ordering) throws {
        let queue = TestQueue(ordering: ordering, maxSteps: 1)
        let ran = LockedValue<[Int]>([])
        for index in 0..<3 { queue.enqueue(after: .seconds(1)) { ran.withValue { $0.append(index) } } }
        #expect(throws: TestQueue.RunawayError.self) { try queue.advance(by: .seconds(1)) }
        #expect(ran.value.count == 1)
        #expect(queue.pendingCount == 2)
        #expect(queue.now == .seconds(1))
        #expect(queue.inconsistencies == [])
        #expect(throws: TestQueue.RunawayError.self) { try queue.run() }
        try queue.run()
        #expect(ran.value.sorted() == [0, 1, 2])
        if ordering == .fifo { #expect(ran.value == [0, 1, 2]) }
        #expect(queue.isIdle)
        #expect(queue.now == .seconds(1))
        #expect(queue.inconsistencies == [])
    }
}
