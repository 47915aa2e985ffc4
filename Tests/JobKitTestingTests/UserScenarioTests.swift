import JobKit
import JobKitTesting
import Testing

// The situations users meet when they test code that starts tasks or jobs,
// each with the production code first and the test after.

// MARK: - A view model whose button starts a task

@MainActor
private final class CounterViewModel {
    private(set) var label = "–"
    private let scheduler: any TaskScheduling
    private let loadNumber: @Sendable () async throws -> Int

    init(scheduler: any TaskScheduling = DefaultTaskScheduler(), loadNumber: @escaping @Sendable () async throws -> Int)
    {
        self.scheduler = scheduler
        self.loadNumber = loadNumber
    }

    func buttonTapped() {
        label = "Loading…"
        scheduler.schedule { @MainActor [self] in
            do {
                label = "\(try await loadNumber())"
            } catch {
                label = "Failed"
            }
        }
    }
}

// MARK: - An object that saves in a background-priority task

private final class NotesStore: Sendable {
    private let notes = LockedValue<[String]>([])
    private let scheduler: any TaskScheduling

    init(scheduler: any TaskScheduling = DefaultTaskScheduler()) {
        self.scheduler = scheduler
    }

    var savedNotes: [String] { notes.value }

    func save(_ note: String) {
        scheduler.schedule(name: "save note", priority: .background) {
            self.notes.withValue { $0.append(note) }
        }
    }
}

// MARK: - A model with a loading flag

private final class ProfileModel: Sendable {
    private let state = LockedValue<(isLoading: Bool, name: String?)>((false, nil))
    private let queue: any JobQueue
    private let fetchName: Job<String>

    init(queue: any JobQueue, fetchName: Job<String>) {
        self.queue = queue
        self.fetchName = fetchName
    }

    var isLoading: Bool { state.value.isLoading }
    var name: String? { state.value.name }

    func load() {
        state.withValue { $0.isLoading = true }
        fetchName.perform(on: queue) { outcome in
            self.state.setValue((false, try? outcome.get()))
        }
    }
}

// MARK: - A countdown

/// Sends "3", "2", "1" and "Go!", one second apart, starting at once.
private func countdown(send: @escaping @Sendable (String) -> Void) -> Job<Void> {
    let messages = ["3", "2", "1", "Go!"]
    return Job.sequence(
        messages.enumerated().map { index, message in
            Job<Void> { controller in
                controller.queue.enqueue(after: index == 0 ? .zero : .seconds(1)) {
                    send(message)
                    controller.finish()
                }
            }
        }
    )
}

// MARK: - A server that never answers

/// Keeps every request's completion handler and never calls it.
private final class SilentServer: Sendable {
    final class Request: CancellableWork, Sendable {
        private let onCancel: @Sendable () -> Void
        init(onCancel: @escaping @Sendable () -> Void) { self.onCancel = onCancel }
        func cancel() { onCancel() }
    }

    private let pending = LockedValue<[@Sendable (Result<String, any Error>) -> Void]>([])
    private let cancelled: AsyncStream<Void>.Continuation
    let cancellations: AsyncStream<Void>

    init() {
        (cancellations, cancelled) = AsyncStream.makeStream()
    }

    func request(completion: @escaping @Sendable (Result<String, any Error>) -> Void) -> Request {
        pending.withValue { $0.append(completion) }
        return Request { [cancelled] in cancelled.yield() }
    }
}

// MARK: - The tests

@Suite("User scenarios", .timeLimit(.minutes(1)))
struct UserScenarioTests {
    @MainActor
    @Test func buttonActionLoadsTheNumberIntoTheLabel() async {
        let scheduler = ManualTaskScheduler()
        let model = CounterViewModel(scheduler: scheduler) { 42 }

        model.buttonTapped()
        #expect(model.label == "Loading…")
        #expect(scheduler.pendingCount == 1)

        await scheduler.runAll()
        #expect(model.label == "42")
    }

    @MainActor
    @Test func buttonActionShowsAFailure() async {
        let scheduler = ManualTaskScheduler()
        let model = CounterViewModel(scheduler: scheduler) { throw TestError() }
        model.buttonTapped()
        await scheduler.runAll()
        #expect(model.label == "Failed")
    }

    @Test func storeSavesInABackgroundPriorityTask() async throws {
        let scheduler = RecordingTaskScheduler()
        let store = NotesStore(scheduler: scheduler)

        store.save("milk")
        store.save("eggs")
        try await scheduler.waitForTasks()

        #expect(store.savedNotes.sorted() == ["eggs", "milk"])
        #expect(scheduler.calls == Array(repeating: .scheduled(name: "save note", priority: .background), count: 2))
    }

    @Test func isLoadingIsTrueWhileLoadingAndFalseAfter() throws {
        let queue = TestQueue()
        let fetchName = Job<String> { controller in
            controller.queue.enqueue(after: .seconds(2)) { controller.finish(with: "Ada") }
        }
        let model = ProfileModel(queue: queue, fetchName: fetchName)
        #expect(!model.isLoading)

        model.load()
        try queue.advance(by: .seconds(1))
        #expect(model.isLoading)
        #expect(model.name == nil)

        try queue.advance(by: .seconds(1))
        #expect(!model.isLoading)
        #expect(model.name == "Ada")
    }

    @Test func countdownSendsFourMessagesOneSecondApartInVirtualTime() throws {
        let clock = ContinuousClock()
        let start = clock.now
        let queue = TestQueue()
        let messages = LockedValue<[String]>([])
        let outcome = LockedValue<Job<Void>.Outcome?>(nil)

        countdown { message in messages.withValue { $0.append(message) } }
            .perform(on: queue) { outcome.setValue($0) }
        try queue.run()
        #expect(messages.value == ["3"])

        for expected in [["3", "2"], ["3", "2", "1"], ["3", "2", "1", "Go!"]] {
            try queue.advance(by: .milliseconds(999))
            #expect(messages.value.count == expected.count - 1)  // not a millisecond early
            try queue.advance(by: .milliseconds(1))
            #expect(messages.value == expected)
        }
        #expect(outcome.value?.isSuccess == true)
        #expect(queue.now == .seconds(3))
        #expect(clock.now - start < .seconds(1))  // three virtual seconds, no real ones
    }

    @Test func requestThatNeverAnswersTimesOutInVirtualTime() throws {
        let server = SilentServer()
        let queue = TestQueue()
        let outcome = LockedValue<Job<String>.Outcome?>(nil)
        Job.bridgingCancellable { completion in server.request(completion: completion) }
            .timeout(after: .seconds(30))
            .perform(on: queue) { outcome.setValue($0) }

        try queue.advance(by: .seconds(29))
        #expect(outcome.value == nil)
        try queue.advance(by: .seconds(1))
        #expect(outcome.value?.failure as? JobError == .timedOut)
    }

    @Test func awaitedRequestThatNeverAnswersFailsByTimeoutAndIsCancelled() async throws {
        let server = SilentServer()
        let request = Job.bridgingCancellable { completion in server.request(completion: completion) }

        await #expect(throws: TimeLimitExceeded(duration: .milliseconds(50))) {
            try await withTimeLimit(.milliseconds(50)) { try await request.value }
        }
        // The loser is cancelled: the task, the job, then the request.
        try await withTimeLimit(.seconds(30)) { _ = await server.cancellations.first { true } }
    }
}

extension Result {
    fileprivate var isSuccess: Bool {
        if case .success = self { return true }
        return false
    }

    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
