import Dispatch
import Foundation
import JobKit
import JobKitTesting
import Testing

/// A completion-handler API, as apps have them: it keeps each completion
/// handler so the test decides when and how it is called, and returns a
/// cancellable request.
private final class FakeAPI: Sendable {
    final class Request: CancellableWork, Sendable {
        let cancels = LockedValue(0)
        func cancel() { cancels.withValue { $0 += 1 } }
    }

    private let resultCompletions = LockedValue<[@Sendable (Result<Int, any Error>) -> Void]>([])
    private let errorCompletions = LockedValue<[@Sendable ((any Error)?) -> Void]>([])
    let requests = LockedValue<[Request]>([])

    func load(completion: @escaping @Sendable (Result<Int, any Error>) -> Void) {
        resultCompletions.withValue { $0.append(completion) }
    }

    func save(completion: @escaping @Sendable ((any Error)?) -> Void) {
        errorCompletions.withValue { $0.append(completion) }
    }

    func fetch(completion: @escaping @Sendable (Result<Int, any Error>) -> Void) -> Request {
        load(completion: completion)
        let request = Request()
        requests.withValue { $0.append(request) }
        return request
    }

    func upload(completion: @escaping @Sendable ((any Error)?) -> Void) -> Request {
        save(completion: completion)
        let request = Request()
        requests.withValue { $0.append(request) }
        return request
    }

    func respond(_ result: Result<Int, any Error>) {
        for completion in resultCompletions.value { completion(result) }
    }

    func respond(_ error: (any Error)?) {
        for completion in errorCompletions.value { completion(error) }
    }

    var cancelCount: Int { requests.value.reduce(0) { $0 + $1.cancels.value } }
}

private enum LoadError: Error, Equatable { case notFound }

@Suite("Callback bridges", .timeLimit(.minutes(1)))
struct CallbackBridgeTests {
    // MARK: - (Result<T, Error>) -> Void

    @Test func resultAPIFinishesWithItsValue() throws {
        let api = FakeAPI()
        let queue = TestQueue()
        let recorder = Recorder<Int>()
        Job.bridging { completion in api.load(completion: completion) }.perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(recorder.count == 0)
        api.respond(.success(12))
        try queue.run()
        #expect(try recorder.last?.get() == 12)
    }

    @Test func resultAPIFailsWithItsError() throws {
        let api = FakeAPI()
        let job = Job.bridging { completion in api.load(completion: completion) }
        let recorder = Recorder<Int>()
        job.perform(on: ImmediateQueue(), then: recorder.handler)
        api.respond(.failure(TestError(id: 3)))
        #expect(recorder.last?.failure as? TestError == TestError(id: 3))
    }

    @Test func typedErrorAndNonSendableCompletionBridgeToo() async {
        // Not `@Sendable`, like most completion handlers in the wild.
        @Sendable func find(completion: @escaping (Result<String, LoadError>) -> Void) {
            completion(.failure(.notFound))
        }
        await #expect(throws: LoadError.notFound) {
            try await Job.bridging { completion in find(completion: completion) }.value
        }
    }

    @Test func onlyTheFirstCompletionCounts() throws {
        let recorder = Recorder<Int>()
        Job.bridging { completion in
            completion(.success(1))
            completion(.success(2))
            completion(.failure(TestError()))
        }
        .perform(on: ImmediateQueue(), then: recorder.handler)
        #expect(recorder.count == 1)
        #expect(try recorder.last?.get() == 1)
    }

    @Test func completionFromAnotherThreadResumesTheAwaitingTask() async throws {
        let job = Job<Int>.bridging { completion in
            DispatchQueue.global().async { completion(.success(9)) }
        }
        #expect(try await job.value == 9)
    }

    // MARK: - (Error?) -> Void

    @Test func optionalErrorAPIFinishesOnNil() throws {
        let api = FakeAPI()
        let recorder = Recorder<Void>()
        Job.bridging { completion in api.save(completion: completion) }
            .perform(on: ImmediateQueue(), then: recorder.handler)
        #expect(recorder.count == 0)
        api.respond(nil)
        #expect(recorder.last?.isSuccess == true)
    }

    @Test func optionalErrorAPIFailsWithTheError() throws {
        let api = FakeAPI()
        let recorder = Recorder<Void>()
        Job.bridging { completion in api.save(completion: completion) }
            .perform(on: ImmediateQueue(), then: recorder.handler)
        api.respond(TestError(id: 4))
        #expect(recorder.last?.failure as? TestError == TestError(id: 4))
    }

    // MARK: - Cancellable work

    @Test func cancellingTheJobCancelsTheReturnedWorkOnce() throws {
        let api = FakeAPI()
        let recorder = Recorder<Int>()
        let handle = Job.bridgingCancellable { completion in api.fetch(completion: completion) }
            .perform(on: ImmediateQueue(), then: recorder.handler)
        #expect(api.cancelCount == 0)
        handle.cancel()
        handle.cancel()
        #expect(api.cancelCount == 1)
        #expect(isCancellation(recorder.last?.failure))
        api.respond(.success(1))
        #expect(recorder.count == 1)
    }

    @Test func cancelThatArrivesBeforeTheWorkExistedCancelsItOnArrival() throws {
        let api = FakeAPI()
        let queue = TestQueue()
        let handle = LockedValue<JobHandle?>(nil)
        let recorder = Recorder<Int>()
        let job = Job.bridgingCancellable { completion in
            handle.value?.cancel()  // the cancel comes while the API call runs
            #expect(api.cancelCount == 0)
            return api.fetch(completion: completion)
        }
        handle.setValue(job.perform(on: queue, then: recorder.handler))
        try queue.run()
        #expect(api.requests.value.count == 1)
        #expect(api.cancelCount == 1)
        #expect(isCancellation(recorder.last?.failure))
    }

    @Test func workThatCompletedIsNotCancelled() throws {
        let api = FakeAPI()
        let recorder = Recorder<Void>()
        let handle = Job.bridgingCancellable { completion in api.upload(completion: completion) }
            .perform(on: ImmediateQueue(), then: recorder.handler)
        api.respond(nil)
        handle.cancel()
        #expect(api.cancelCount == 0)
        #expect(recorder.last?.isSuccess == true)
    }

    @Test func workIsNeverStartedWhenTheJobIsCancelledFirst() throws {
        let api = FakeAPI()
        let queue = TestQueue()
        let handle = Job.bridgingCancellable { completion in api.fetch(completion: completion) }
            .perform(on: queue) { _ in }
        handle.cancel()
        try queue.run()
        #expect(api.requests.value.isEmpty)
    }

    @Test(arguments: [false, true])
    func cancelsADispatchWorkItem(cancelling: Bool) async {
        let queue = DispatchQueue(label: "suspended")
        queue.suspend()
        let ran = LockedValue(false)
        let handle = Job.bridgingCancellable { completion in
            let work = DispatchWorkItem {
                ran.setValue(true)
                completion(nil)
            }
            queue.async(execute: work)
            return work
        }
        .perform(on: ImmediateQueue()) { _ in }
        if cancelling { handle.cancel() }
        queue.resume()
        // A cancelled work item is skipped; any other has run.
        await withCheckedContinuation { flushed in queue.async { flushed.resume() } }
        #expect(ran.value == !cancelling)
    }

    /// Performs a bridged job whose start returns `work`, cancels the job,
    /// and returns `work`, which the job should have cancelled. (For
    /// `DispatchWorkItem`, which is not `Sendable`, see the test above that
    /// makes one in the start closure.)
    private func cancelBridgedJob<Work: CancellableWork & Sendable>(returning work: Work) throws -> Work {
        // Holding on to the completion keeps the job from being abandoned.
        let completion = LockedValue<(@Sendable (Result<Int, any Error>) -> Void)?>(nil)
        let queue = TestQueue()
        let handle = Job<Int>.bridgingCancellable { handler in
            completion.setValue(handler)
            return work
        }
        .perform(on: queue) { _ in }
        try queue.run()
        handle.cancel()
        return work
    }

    @Test func cancellingTheJobCancelsATask() async throws {
        let task = Task { try await Task.sleep(for: .seconds(3600)) }  // allowed: cancelled, never waited for
        #expect(!task.isCancelled)
        #expect(try cancelBridgedJob(returning: task).isCancelled)
        // Bounded: if the job did not cancel it, the task would sleep an hour.
        await #expect(throws: CancellationError.self) {
            try await withTimeLimit(.seconds(10)) { try await task.value }
        }
    }

    @Test func cancellingTheJobCancelsAnotherJobsHandle() throws {
        let queue = TestQueue()
        let inner = Recorder<Int>()
        let handle = Job<Int>.never.perform(on: queue, then: inner.handler)
        try queue.run()
        #expect(!handle.isCompleted)
        #expect(try cancelBridgedJob(returning: handle).isCompleted)
        try queue.run()
        #expect(isCancellation(inner.last?.failure))
    }

    @Test func cancellingTheJobCancelsATaskOfTheDefaultScheduler() async throws {
        let scheduled = DefaultTaskScheduler().schedule { () async throws -> Int in
            try await Job<Int>.never.value  // ends only by cancellation
        }
        _ = try cancelBridgedJob(returning: scheduled)
        // Bounded: a task's result ignores the suite's time limit.
        let result = try await withTimeLimit(.seconds(10)) { await scheduled.result }
        #expect(isCancellation(result.failure))
    }

    @Test func cancellingTheJobCancelsAScheduledTask() async throws {
        let scheduler = ManualTaskScheduler()
        let ran = LockedValue(false)
        let scheduled = scheduler.schedule { ran.setValue(true) }
        _ = try cancelBridgedJob(returning: scheduled)
        await scheduler.runAll()
        #expect(ran.value == false)  // a cancelled handle never runs
        await #expect(throws: CancellationError.self) { try await scheduled.value }
    }

    @Test func cancelRacingWithTheAPICallAlwaysCancelsTheWork() throws {
        for _ in 0..<2000 {
            let api = FakeAPI()
            let queue = TestQueue()
            let recorder = Recorder<Int>()
            let handle = Job.bridgingCancellable { completion in api.fetch(completion: completion) }
                .perform(on: queue, then: recorder.handler)
            // The body runs unless the cancel came first.
            race {
                try? queue.run()
            } _: {
                handle.cancel()
            }
            try queue.run()
            #expect(isCancellation(recorder.last?.failure))
            // Either the API was never called, or its request was cancelled once.
            #expect(api.requests.value.count <= 1)
            #expect(api.cancelCount == api.requests.value.count)
        }
    }
}
