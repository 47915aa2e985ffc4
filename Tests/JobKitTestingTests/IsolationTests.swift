import Dispatch
import JobKitTesting
import Testing

@Suite("LockedValue", .timeLimit(.minutes(1)))
struct LockedValueTests {
    @Test func readsWritesAndMutatesInPlace() {
        let box = LockedValue([1])
        box.setValue([2])
        let count = box.withValue { value -> Int in
            value.append(3)
            return value.count
        }
        #expect(count == 2)
        #expect(box.value == [2, 3])
    }

    @Test func incrementsFromManyThreadsAreNeverLost() {
        let counter = LockedValue(0)
        DispatchQueue.concurrentPerform(iterations: 10_000) { _ in
            counter.withValue { $0 += 1 }
        }
        #expect(counter.value == 10_000)
    }
}

@Suite("ActorValue", .timeLimit(.minutes(1)))
struct ActorValueTests {
    @Test func readsWritesAndMutatesInPlace() async {
        let box = ActorValue([1])
        await box.setValue([2])
        let count = await box.withValue { value -> Int in
            value.append(3)
            return value.count
        }
        #expect(count == 2)
        #expect(await box.value == [2, 3])
    }

    @Test func incrementsFromManyTasksAreNeverLost() async {
        let counter = ActorValue(0)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<1000 {
                group.addTask { await counter.withValue { $0 += 1 } }
            }
        }
        #expect(await counter.value == 1000)
    }
}
