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

    // MARK: - Explaining a job

    /// A job named "publish" that waits on an upload that never completes
    /// and counts how often it was cancelled.
    private static func stuckPublishing(cancellations: LockedValue<Int>) -> Job<Int> {
        let upload = Job<Void> { controller in
            controller.onDescribe { "0 of 18 MB sent" }
            controller.onCancel { withExtendedLifetime(controller) { cancellations.withValue { $0 += 1 } } }
        }
        return Job.sequence([.succeeded, upload.named("upload video-2")]).map { 1 }.named("publish")
    }

    private static let stuckReport = """
        1 job has not completed:
          publish ▸ sequence 2/2 ▸ upload video-2 (running, 0 of 18 MB sent)

        publish (running)
        └─ sequence 2/2 (running)
           └─ upload video-2 (running, 0 of 18 MB sent)  ◀
        """

    @Test func performingAJobReturnsItsValueOrRethrowsItsError() async throws {
        #expect(try await withTimeLimit(.seconds(60), performing: Job.succeeded(42), on: ImmediateQueue()) == 42)
        await #expect(throws: TestError(id: 7)) {
            try await withTimeLimit(.seconds(60), performing: Job<Int>.failed(TestError(id: 7)))
        }
    }

    @Test func performingAJobThatDoesNotCompleteThrowsItsStallReportAndCancelsIt() async {
        let cancellations = LockedValue(0)
        let error = await #expect(throws: TimeLimitExceeded.self) {
            try await withTimeLimit(.milliseconds(20), performing: Self.stuckPublishing(cancellations: cancellations))
        }
        #expect(error?.stallReport == Self.stuckReport)
        #expect(cancellations.value == 1)
    }

    @Test func explainingAHandleThrowsItsStallReportAndLeavesTheJobRunning() async {
        let cancellations = LockedValue(0)
        let handle = Self.stuckPublishing(cancellations: cancellations).perform(on: ImmediateQueue()) { _ in }
        let error = await #expect(throws: TimeLimitExceeded.self) {
            try await withTimeLimit(.milliseconds(20), explaining: handle) {
                try await Job<Void>.never.value
            }
        }
        #expect(error?.stallReport == Self.stuckReport)
        #expect(error?.description.hasSuffix("(running, 0 of 18 MB sent)  ◀") == true)
        #expect(cancellations.value == 0)
        #expect(!handle.isCompleted)
        handle.cancel()
        #expect(cancellations.value == 1)
    }

    @Test func explainingAJobThatCompletedCarriesNoReport() async {
        let handle = Job.succeeded(1).perform(on: ImmediateQueue()) { _ in }
        await #expect(throws: TimeLimitExceeded(duration: .milliseconds(20), stallReport: nil)) {
            try await withTimeLimit(.milliseconds(20), explaining: handle) { try await Job<Void>.never.value }
        }
    }

    @Test func cancellingTheCallerCancelsThePerformedJob() async {
        let cancellations = LockedValue(0)
        let (started, didStart) = AsyncStream<Void>.makeStream()
        let job = Job<Int> { controller in
            controller.onCancel { withExtendedLifetime(controller) { cancellations.withValue { $0 += 1 } } }
            didStart.yield()
        }
        let caller = Task { try await withTimeLimit(.seconds(3600), performing: job) }
        _ = await started.first { true }
        caller.cancel()
        await #expect(throws: CancellationError.self) { try await caller.value }
        #expect(cancellations.value == 1)
    }

    @Test func timeLimitExceededSaysWhereTheJobWasStuck() {
        let error = TimeLimitExceeded(duration: .seconds(2), stallReport: "1 job has not completed:\n  upload")
        #expect(
            error.description == """
                the operation did not finish within its time limit of 2.0 seconds
                1 job has not completed:
                  upload
                """)
    }

    @Test func timeLimitExceededSaysHowLongTheOperationHad() {
        #expect(
            TimeLimitExceeded(duration: .seconds(2)).description
                == "the operation did not finish within its time limit of 2.0 seconds")
    }
}
