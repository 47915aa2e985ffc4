import Dispatch
import JobKit
import JobKitTesting
import Testing

/// What users type first compiles and works: dispatch queues written as
/// `.main` or `.global(qos:)` where a `JobQueue` is expected, completion
/// handlers whose `Result` has a typed error.
@Suite("What users type first", .timeLimit(.minutes(1)))
struct FirstUseTests {
    @Test func performOnGlobalWithAQualityOfService() async throws {
        // Bounded: a continuation ignores the suite's time limit.
        let value = try await withTimeLimit(.seconds(10)) {
            try await withCheckedThrowingContinuation { continuation in
                Job.succeeded(5).perform(on: .global(qos: .utility)) { continuation.resume(with: $0) }
            }
        }
        #expect(value == 5)
    }

    @Test func awaitOnTheMainQueue() async throws {
        let job = Job<Bool> { controller in
            controller.finish(with: DispatchQueue.getSpecific(key: mainKey) == true)
        }
        DispatchQueue.main.setSpecific(key: mainKey, value: true)
        #expect(try await job.value(on: .main))
    }
}

extension FirstUseTests {
    enum NetworkError: Error, Equatable { case offline }

    /// A completion-handler API whose `Result` has a typed error.
    static func fetch(succeeding: Bool, completion: @escaping @Sendable (Result<[UInt8], NetworkError>) -> Void) {
        completion(succeeding ? .success([1, 2]) : .failure(.offline))
    }

    @Test(arguments: [true, false])
    func completeTakesAResultWithATypedError(succeeding: Bool) throws {
        let fetch = Job<[UInt8]> { controller in
            Self.fetch(succeeding: succeeding) { result in controller.complete(with: result) }
        }
        let outcome = LockedValue<Job<[UInt8]>.Outcome?>(nil)
        fetch.perform(on: ImmediateQueue()) { outcome.setValue($0) }
        if succeeding {
            #expect(try outcome.value?.get() == [1, 2])
        } else {
            #expect(throws: NetworkError.offline) { try outcome.value?.get() }
        }
    }
}

private let mainKey = DispatchSpecificKey<Bool>()
