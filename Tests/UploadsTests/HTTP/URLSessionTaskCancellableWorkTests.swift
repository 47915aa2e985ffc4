import Dispatch
import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing
import Uploads
import UploadsTesting

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `URLSessionTask` conforms to `CancellableWork` in `Uploads`, where
/// Foundation is imported, not in the JobKit core.
@Suite("URLSessionTask as CancellableWork", .timeLimit(.minutes(1)))
struct URLSessionTaskCancellableWorkTests {
    @Test func cancellingTheJobCancelsTheTask() async throws {
        let session = URLSession(configuration: .ephemeral)
        defer { session.invalidateAndCancel() }
        let taskError = LockedValue<(any Error)?>(nil)
        let taskCompleted = DispatchSemaphore(value: 0)
        // Never resumed, so no request is sent: the task completes only
        // when it is cancelled.
        let task = session.dataTask(with: try #require(URL(string: "http://127.0.0.1:9/never"))) { _, _, error in
            taskError.setValue(error)
            taskCompleted.signal()
        }
        let queue = TestQueue()
        // Holding on to the completion keeps the job from being abandoned.
        let completion = LockedValue<(@Sendable (Result<Data, any Error>) -> Void)?>(nil)
        let outcome = LockedValue<Result<Data, any Error>?>(nil)
        let handle = Job<Data>.bridgingCancellable { handler in
            completion.setValue(handler)
            return task
        }
        .perform(on: queue) { outcome.setValue($0) }
        try queue.run()
        #expect(task.state == .suspended)
        handle.cancel()
        try queue.run()
        #expect(throws: CancellationError.self) { try outcome.value?.get() }
        #expect(await taskCompleted.signalled(within: 10), "the task was not cancelled")
        #expect((taskError.value as? URLError)?.code == .cancelled)
    }
}
