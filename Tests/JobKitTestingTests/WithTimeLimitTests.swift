import JobKit
import JobKitTesting
import Testing

@Suite("withTimeLimit", .timeLimit(.minutes(1)))
struct WithTimeLimitTests {
    @Test func returnsTheValueWhenTheOperationFinishesInTime() async throws {
        #expect(try await withTimeLimit(.seconds(60)) { 42 } == 42)
    }

    @Test func rethrowsTheOperationsErrorAtOnce() async {
        let clock = ContinuousClock()
        let start = clock.now
        await #expect(throws: TestError(id: 1)) {
            try await withTimeLimit(.seconds(3600)) { () async throws -> Int in throw TestError(id: 1) }
        }
        #expect(clock.now - start < .seconds(60))
    }

    @Test func throwsTimeLimitExceededAndCancelsTheOperation() async {
        let (cancelled, didCancel) = AsyncStream<Bool>.makeStream()
        await #expect(throws: TimeLimitExceeded(duration: .milliseconds(20))) {
            try await withTimeLimit(.milliseconds(20)) {
                do {
                    return try await Job<Int>.never.value
                } catch {
                    didCancel.yield(error is CancellationError && Task.isCancelled)
                    throw error
                }
            }
        }
        #expect(await cancelled.first { _ in true } == true)
    }

    @Test func doesNotWaitForAnOperationThatIgnoresCancellation() async {
        let stuck = LockedValue<CheckedContinuation<Void, Never>?>(nil)
        let (started, didStart) = AsyncStream<Void>.makeStream()
        await #expect(throws: TimeLimitExceeded.self) {
            try await withTimeLimit(.milliseconds(20)) {
                await withCheckedContinuation { continuation in
                    stuck.setValue(continuation)
                    didStart.yield()
                }
            }
        }
        _ = await started.first { true }
        stuck.value?.resume()  // let the stuck operation end
    }

    @Test func cancellingTheCallerCancelsTheOperation() async {
        let (started, didStart) = AsyncStream<Void>.makeStream()
        let (cancelled, didCancel) = AsyncStream<Bool>.makeStream()
        let caller = Task {
            try await withTimeLimit(.seconds(3600)) {
                didStart.yield()
                do {
                    return try await Job<Int>.never.value
                } catch {
                    didCancel.yield(Task.isCancelled)
                    throw error
                }
            }
        }
        _ = await started.first { true }
        caller.cancel()
        await #expect(throws: CancellationError.self) { try await caller.value }
        #expect(await cancelled.first { _ in true } == true)
    }

    @Test func alreadyCancelledCallerNeverStartsTheOperation() async {
        let runs = LockedValue(0)
        let caller = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await withTimeLimit(.seconds(3600)) { runs.withValue { $0 += 1 } }
        }
        await #expect(throws: CancellationError.self) { try await caller.value }
        #expect(runs.value == 0)
    }

    @Test func operationAndTimeLimitEndingTogetherReportOneOutcome() async throws {
        for index in 0..<1000 {
            do {
                let value = try await withTimeLimit(.zero) {
                    if index.isMultiple(of: 2) { throw TestError(id: index) }
                    return index
                }
                #expect(value == index)
            } catch let error as TestError {
                #expect(error.id == index)
            } catch {
                #expect(error as? TimeLimitExceeded == TimeLimitExceeded(duration: .zero))
            }
        }
    }

    @Test func timeLimitExceededSaysHowLongTheOperationHad() {
        #expect(
            TimeLimitExceeded(duration: .seconds(2)).description
                == "the operation did not finish within its time limit of 2.0 seconds")
    }
}
