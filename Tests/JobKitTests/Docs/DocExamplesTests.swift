import Dispatch
import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing

// The examples of the doc comments and DocC articles, verbatim, each
// between BEGIN DOC and END DOC, in just enough context to compile and
// run. A test below checks that every Swift block of the sources' doc
// comments and DocC articles appears in this file (or, for `Uploads`, in
// UploadsTests/Docs/UploadsDocExamplesTests.swift).

// MARK: - Stand-ins the examples talk about

private struct Photo: Sendable { let name: String }
private struct Profile: Sendable { let avatarURL: URL }
private struct Avatar: Sendable, Equatable {
    let pixels: [UInt8]
    static let placeholder = Avatar(pixels: [])
}
private struct NotFound: Error {}
private enum NetworkError: Error { case offline }

private final class Renderer: Sendable {
    func render(_ photo: Photo, completion: @escaping @Sendable (Result<Data, NetworkError>) -> Void) {
        completion(.success(Data(photo.name.utf8)))
    }
}

private final class ImageView: Sendable {
    let shown = LockedValue<[Job<Data>.Outcome]>([])
    func show(_ outcome: Job<Data>.Outcome) { shown.withValue { $0.append(outcome) } }
}

private final class Client: Sendable {
    func fetch(_ url: URL, completion: @escaping @Sendable (Result<Data, NetworkError>) -> Void) {
        completion(.success(Data(url.absoluteString.utf8)))
    }
}

struct Status: Sendable {
    let isReady: Bool
}

/// How many times `fetchStatus()` was called: the fifth says ready.
private let statusPolls = LockedValue(0)

func fetchStatus(counting statusPolls: LockedValue<Int> = statusPolls) -> Job<Status> {
    Job { controller in
        let poll = statusPolls.withValue { polls in
            polls += 1
            return polls
        }
        controller.finish(with: Status(isReady: poll == 5))
    }
}

private struct Account: Sendable { let name: String }
private struct FollowerBatch: Sendable {
    let accounts: [Account]
    let next: String?
}

/// Five followers, two a page; a page's cursor is the name of its first.
private func fetchFollowers(after cursor: String?) -> Job<FollowerBatch> {
    let names = ["ana", "bo", "cy", "di", "ed"]
    let start = cursor.flatMap { names.firstIndex(of: $0) } ?? 0
    let page = names[start..<min(start + 2, names.count)].map(Account.init)
    return .succeeded(FollowerBatch(accounts: page, next: start + 2 < names.count ? names[start + 2] : nil))
}

// BEGIN DOC
func waitUntilReady() -> Job<Status> {
    fetchStatus().then { status in
        status.isReady ? .succeeded(status) : Job.sleep(for: .seconds(2)).then { waitUntilReady() }
    }
}
// END DOC

/// Names the examples use that other test files use too.
enum DocExamples {
    final class ProfileAPI: Sendable {
        fileprivate func profile(id: Int) async throws -> Profile {
            Profile(avatarURL: URL(string: "https://example.com/\(id)")!)
        }
        fileprivate func loadProfile(id: Int, completion: @escaping @Sendable (Result<Profile, any Error>) -> Void) {
            completion(.success(Profile(avatarURL: URL(string: "https://example.com/\(id)")!)))
        }
    }
}

private final class Downloader: Sendable {
    func fetch(_ url: URL, completion: @escaping @Sendable (Result<Data, any Error>) -> Void) -> DispatchWorkItem {
        let item = DispatchWorkItem { completion(.success(Data(url.absoluteString.utf8))) }
        DispatchQueue.global().async(execute: item)
        return item
    }
}

private final class RecordStore: Sendable {
    let saved = LockedValue<[String]>([])
    func save(_ record: String, completion: @escaping @Sendable ((any Error)?) -> Void) {
        saved.withValue { $0.append(record) }
        completion(nil)
    }
}

private final class ImageRequest {
    func cancel() {}
}

// BEGIN DOC
extension ImageRequest: CancellableWork {}
// END DOC

extension Job where Success == Profile {
    fileprivate static func loadingProfile(_ id: Int) -> Job<Profile> {
        .succeeded(Profile(avatarURL: URL(string: "https://example.com/\(id).png")!))
    }
}

extension Job where Success == Avatar {
    fileprivate static func loadingImage(_ url: URL) -> Job<Avatar> {
        .succeeded(Avatar(pixels: Array(url.lastPathComponent.utf8)))
    }
}

/// A timer service, as a custom `JobQueue` might be built on.
private final class ManualClock: Sendable {
    final class Timer: Sendable {
        let work: LockedValue<(@Sendable () -> Void)?>
        init(_ work: @escaping @Sendable () -> Void) { self.work = LockedValue(work) }
        func invalidate() { work.setValue(nil) }
    }
    let timers = LockedValue<[Timer]>([])
    func schedule(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> Timer {
        let timer = Timer(work)
        timers.withValue { $0.append(timer) }
        return timer
    }
    func fireAll() { for timer in timers.value { timer.work.value?() } }
}

private struct ClockQueue: JobQueue {
    let clock: ManualClock
    func enqueue(_ work: @escaping @Sendable () -> Void) { work() }
    // BEGIN DOC
    @discardableResult
    func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork {
        let timer = clock.schedule(after: delay, work)
        return DelayedWork { timer.invalidate() }
    }
    // END DOC
}

// BEGIN DOC
struct InlineQueue: JobQueue {
    func enqueue(_ work: @escaping @Sendable () -> Void) {
        Trampoline.run(work)
    }

    func enqueue(after delay: Duration, _ work: @escaping @Sendable () -> Void) -> DelayedWork {
        let waiting = LockedValue<(@Sendable () -> Void)?>(work)
        Trampoline.run { waiting.withValue { $0.take() }?() }
        return DelayedWork { _ = waiting.withValue { $0.take() } }
    }
}
// END DOC

extension DocExamples {
    @MainActor
    final class CounterModel {
        final class API: Sendable {
            func loadCount() async throws -> Int { 42 }
        }
        var label = ""
        let api: API
        let scheduler: any TaskScheduling

        init(api: API, scheduler: any TaskScheduling) {
            self.api = api
            self.scheduler = scheduler
        }

        // BEGIN DOC
        func buttonTapped() {
            scheduler.schedule { @MainActor in self.label = "\(try await self.api.loadCount())" }
        }
        // END DOC
    }
}

extension DocExamples {
    /// The model before it takes a scheduler.
    @MainActor
    final class CounterModelBefore {
        var label = ""
        let api = CounterModel.API()

        // BEGIN DOC
        func buttonTapped() {
            Task { label = "\(try await api.loadCount())" }
        }
        // END DOC
    }
}

// MARK: - The examples

@Suite("Doc comment examples: JobKit", .timeLimit(.minutes(1)))
struct JobKitDocExamplesTests {
    private typealias CounterModel = DocExamples.CounterModel

    @Test func jobTypeExample() async throws {
        let renderer = Renderer()
        let photo = Photo(name: "beach")
        let imageView = ImageView()
        let shown = DispatchSemaphore(value: 0)
        DispatchQueue.main.async { shown.signal() }  // the main queue runs in tests
        // BEGIN DOC
        let thumbnail = Job<Data> { controller in
            renderer.render(photo) { result in controller.complete(with: result) }
        }
        thumbnail.perform(on: .main) { outcome in
            imageView.show(outcome)
        }
        // END DOC
        try await withTimeLimit(.seconds(10)) {
            while imageView.shown.value.isEmpty && !Task.isCancelled { await Task.yield() }
        }
        #expect(try imageView.shown.value.first?.get() == Data("beach".utf8))
        _ = shown
    }

    @Test func delayedWorkExample() throws {
        let clock = ManualClock()
        let ran = LockedValue(0)
        let queue = ClockQueue(clock: clock)
        queue.enqueue(after: .seconds(1)) { ran.withValue { $0 += 1 } }.cancel()
        queue.enqueue(after: .seconds(1)) { ran.withValue { $0 += 10 } }
        clock.fireAll()
        #expect(ran.value == 10)
    }

    @Test func jobErrorExample() throws {
        let queue = TestQueue()
        let job = Job<Int>.never.timeout(after: .seconds(1))
        let shownRetry = LockedValue(false)
        @Sendable func showRetryButton() { shownRetry.setValue(true) }
        // BEGIN DOC
        job.perform(on: queue) { outcome in
            if case .failure(JobError.timedOut) = outcome { showRetryButton() }
        }
        // END DOC
        try queue.advance(by: .seconds(1))
        #expect(shownRetry.value)
    }

    @Test func thenExample() async throws {
        let id = 7
        // BEGIN DOC
        let avatar = Job.loadingProfile(id).then { profile in .loadingImage(profile.avatarURL) }
        // END DOC
        #expect(try await avatar.value == Avatar(pixels: Array("7.png".utf8)))
    }

    @Test func thenLoopExample() throws {
        let queue = TestQueue()
        let recorder = Recorder<Status>()
        statusPolls.setValue(0)
        waitUntilReady().perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(7))
        #expect(statusPolls.value == 4)
        #expect(recorder.count == 0)
        try queue.advance(by: .seconds(1))
        #expect(statusPolls.value == 5)
        #expect(try recorder.last?.get().isReady == true)
    }

    @Test func repeatedExample() throws {
        let queue = TestQueue()
        let recorder = Recorder<Status>()
        // Its own count, not the one `waitUntilReady()`'s test shares.
        let polls = LockedValue(0)
        func fetchStatus() -> Job<Status> { JobKitTests.fetchStatus(counting: polls) }
        // BEGIN DOC
        let ready = fetchStatus().repeated(while: { !$0.isReady }, delay: .fixed(.seconds(2)))
        // END DOC
        ready.perform(on: queue, then: recorder.handler)
        try queue.advance(by: .seconds(7))
        #expect(polls.value == 4)
        #expect(recorder.count == 0)
        try queue.advance(by: .seconds(1))
        #expect(polls.value == 5)
        #expect(try recorder.last?.get().isReady == true)
    }

    @Test func collectPagesExample() async throws {
        // BEGIN DOC
        let everyone: Job<[Account]> = .collectPages(from: nil as String?) { cursor in
            fetchFollowers(after: cursor).map { batch in
                if let next = batch.next { .more(batch.accounts, next: next) } else { .last(batch.accounts) }
            }
        }
        // END DOC
        #expect(try await everyone.value.map(\.name) == ["ana", "bo", "cy", "di", "ed"])
    }

    @Test func recoverExample() async throws {
        let cachedAvatar = Job<Avatar>.failed(NotFound())
        // BEGIN DOC
        let avatar = cachedAvatar.recover { error in
            guard error is NotFound else { throw error }
            return .placeholder
        }
        // END DOC
        #expect(try await avatar.value == .placeholder)
    }

    @Test func timeoutExample() throws {
        let queue = TestQueue()
        // BEGIN DOC
        Job<Data>.never.timeout(after: .seconds(30)).perform(on: queue) { outcome in print(outcome) }
        try queue.advance(by: .seconds(30))  // prints failure(JobKit.JobError.timedOut)
        // END DOC
        #expect(queue.isIdle)
    }

    @Test func retryExample() throws {
        let attempts = LockedValue(0)
        let upload = Job<Void> { controller in
            attempts.withValue { $0 += 1 }
            controller.fail(with: NetworkError.offline)
        }
        let queue = TestQueue()
        // BEGIN DOC
        let retried = upload.retry(attempts: 3, delay: .exponential(initial: .seconds(1), maximum: .seconds(8)))
        // END DOC
        retried.perform(on: queue) { _ in }
        try queue.advance(by: .seconds(3))
        #expect(attempts.value == 3)
    }

    @Test func retryChosenPerErrorExample() throws {
        struct ServerError: Error {
            let isTemporary: Bool
            let retryAfter: Duration?
        }
        let attempts = LockedValue(0)
        let fetch = Job<Data> { controller in
            let attempt = attempts.withValue { count -> Int in
                count += 1
                return count
            }
            switch attempt {
            case 1: controller.fail(with: ServerError(isTemporary: true, retryAfter: .seconds(10)))
            case 2: controller.fail(with: ServerError(isTemporary: true, retryAfter: nil))
            default: controller.fail(with: ServerError(isTemporary: false, retryAfter: nil))
            }
        }
        let queue = TestQueue()
        // BEGIN DOC
        let patient = fetch.retry(attempts: 5) { retry, error in
            guard let error = error as? ServerError, error.isTemporary else { return nil }
            return error.retryAfter ?? .seconds(retry)
        }
        // END DOC
        let recorder = LockedValue<Job<Data>.Outcome?>(nil)
        patient.perform(on: queue) { outcome in recorder.withValue { $0 = outcome } }
        try queue.advance(by: .seconds(11))
        #expect(attempts.value == 2)
        try queue.advance(by: .seconds(1))
        #expect(attempts.value == 3)
        #expect((recorder.value.flatMap { try? $0.get() }) == nil)
        #expect(recorder.value != nil)
    }

    @Test func seededGeneratorExample() {
        // BEGIN DOC
        var generator = SeededRandomNumberGenerator(seed: 42)
        let first = Int.random(in: 1...6, using: &generator)
        var again = SeededRandomNumberGenerator(seed: 42)
        assert(Int.random(in: 1...6, using: &again) == first)
        // END DOC
        var third = SeededRandomNumberGenerator(seed: 42)
        #expect(Int.random(in: 1...6, using: &third) == first)
    }

    @Test func typedResultExample() async throws {
        let client = Client()
        let url = URL(string: "https://example.com/a")!
        let job = Job<Data> { controller in
            // BEGIN DOC
            client.fetch(url) { (result: Result<Data, NetworkError>) in
                controller.complete(with: result)
            }
            // END DOC
        }
        #expect(try await job.value == Data("https://example.com/a".utf8))
    }

    @Test func asyncExamples() async throws {
        let download = Job<Data>.succeeded(Data([1]))
        let api = DocExamples.ProfileAPI()
        let id = 3
        // BEGIN DOC
        let data = try await download.value
        // END DOC
        // BEGIN DOC
        let profile = Job.task { try await api.profile(id: id) }
        // END DOC
        #expect(data == Data([1]))
        #expect(try await profile.value.avatarURL.lastPathComponent == "3")
    }

    @Test func bridgingExamples() async throws {
        let api = DocExamples.ProfileAPI()
        let id = 4
        let downloader = Downloader()
        let url = URL(string: "https://example.com/b")!
        let store = RecordStore()
        let record = "milk"
        // BEGIN DOC
        let profile = Job.bridging { completion in api.loadProfile(id: id, completion: completion) }
        // END DOC
        // BEGIN DOC
        let download = Job.bridgingCancellable { completion in
            downloader.fetch(url, completion: completion)  // returns a DispatchWorkItem
        }
        // END DOC
        // BEGIN DOC
        let save = Job.bridging { completion in store.save(record, completion: completion) }
        // END DOC
        #expect(try await profile.value.avatarURL.lastPathComponent == "4")
        #expect(try await download.value == Data("https://example.com/b".utf8))
        try await save.value
        #expect(store.saved.value == ["milk"])
    }

    @Test func combinatorExamples() async throws {
        let uploaded = LockedValue<[String]>([])
        func uploading(_ name: String) -> Job<Void> {
            Job { controller in
                uploaded.withValue { $0.append(name) }
                controller.finish()
            }
        }
        let photos = ["a.jpg", "b.jpg"]
        let mediaUploads = photos.map(uploading)
        let postUpload = uploading("post.json")
        let files = ["x", "yy"]
        func measure(_ file: String) -> Job<Int> { .succeeded(file.count) }
        // BEGIN DOC
        let uploads = photos.map { photo in uploading(photo) }
        Job.group(uploads, maxConcurrent: 4).perform { outcome in print(outcome) }
        // END DOC
        // BEGIN DOC
        let sizes: Job<[Int]> = Job.collect(files.map(measure))
        // END DOC
        // BEGIN DOC
        let sequence = Job.sequence([.group(mediaUploads), postUpload])
        // END DOC
        #expect(try await sizes.value == [1, 2])
        try await sequence.value
        #expect(uploaded.value.last == "post.json")
    }

    @Test func raceAndOutcomeExamples() async throws {
        let photos = ["a.jpg", "b.jpg", "c.jpg"]
        func uploading(_ photo: String) -> Job<Void> {
            photo == "b.jpg" ? .failed(MirrorExamples.Offline()) : .succeeded
        }
        // BEGIN DOC
        let outcomes = try await Job.collectOutcomes(photos.map(uploading), maxConcurrent: 4).value
        let failed = zip(photos, outcomes).filter { _, outcome in (try? outcome.get()) == nil }.map(\.0)
        // END DOC
        #expect(failed == ["b.jpg"])
        let refreshed = LockedValue(0)
        let refresh = Job<Void> { controller in
            refreshed.withValue { $0 += 1 }
            controller.finish()
        }
        // BEGIN DOC
        let refreshLater = Job.sequence([.sleep(for: .seconds(30)), refresh])  // allowed: TestQueue time
        // END DOC
        let queue = TestQueue()
        refreshLater.perform(on: queue) { _ in }
        try queue.advance(by: .seconds(29))
        #expect(refreshed.value == 0)
        try queue.advance(by: .seconds(1))
        #expect(refreshed.value == 1)
    }

    @Test func zipExample() async throws {
        struct User: Sendable { let name: String }
        func fetchUser(_ id: Int) -> Job<User> { .succeeded(User(name: "user \(id)")) }
        func fetchAvatar(_ id: Int) -> Job<Data> { .succeeded(Data([UInt8(id)])) }
        let id = 7
        // BEGIN DOC
        let (user, avatar) = try await Job.zip(fetchUser(id), fetchAvatar(id)).value
        // END DOC
        #expect(user.name == "user 7")
        #expect(avatar == Data([7]))
    }

    @Test func alwaysExamples() async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("always-\(UUID().uuidString)")
        try Data("draft".utf8).write(to: file)
        func uploading(_ file: URL) -> Job<Void> { .succeeded }
        // BEGIN DOC
        let upload = uploading(file).always { _ in try? FileManager.default.removeItem(at: file) }
        // END DOC
        try await upload.value
        #expect(!FileManager.default.fileExists(atPath: file.path))

        struct Server: Sendable {
            let closed = LockedValue<[String]>([])
            func closing(_ session: String) -> Job<Void> {
                Job { controller in
                    closed.withValue { $0.append(session) }
                    controller.finish()
                }
            }
        }
        let server = Server()
        let session = "session-1"
        let post = "post"
        func uploadingMedia(_ post: String) -> Job<Int> { .failed(TestError(id: 1)) }
        // BEGIN DOC
        let publish = uploadingMedia(post).always(then: { _ in server.closing(session) })
        // END DOC
        await #expect(throws: TestError.self) { try await publish.value }
        #expect(server.closed.value == ["session-1"])
    }

    @Test func mirrorExamples() async throws {
        let examples = MirrorExamples(failing: [])
        #expect(try await examples.raced().starts(with: Data("https://".utf8)))
        let nearest = MirrorExamples(failing: ["https://eu.example.com"]).nearest()
        #expect(try await nearest.value == Data("https://us.example.com".utf8))
        let none = MirrorExamples(failing: Set(examples.mirrors))
        await #expect(throws: AllFailedError.self) { try await none.fetch() }
        #expect(none.logged.value == ["Offline()", "Offline()"])
    }

    @Test func landingPageExample() async throws {
        let mediaUploads = [Job<Void>.succeeded, .succeeded]
        let postUpload = Job<Void>.succeeded
        let shown = LockedValue<[String]>([])
        let done = LockedValue(false)
        @Sendable func show(_ error: any Error) { shown.withValue { $0.append("\(error)") } }
        // BEGIN DOC
        let publish = Job.sequence([
            .group(mediaUploads, maxConcurrent: 4),
            postUpload,
        ])
        publish.timeout(after: .seconds(60)).perform(on: .main) { outcome in
            if case .failure(let error) = outcome { show(error) }
        }
        // END DOC
        publish.perform(on: .main) { _ in done.setValue(true) }
        try await withTimeLimit(.seconds(10)) {
            while !done.value && !Task.isCancelled { await Task.yield() }
        }
        #expect(shown.value.isEmpty)
    }

    @Test func jobSourceExample() throws {
        final class Dialog: Sendable {
            let handler = LockedValue<(@Sendable (Bool) -> Void)?>(nil)
            var onAnswer: (@Sendable (Bool) -> Void)? {
                get { handler.value }
                set { handler.setValue(newValue) }
            }
        }
        let dialog = Dialog()
        let draft = "draft 1"
        let deleted = LockedValue<[String]>([])
        @Sendable func deleting(_ draft: String) -> Job<Void> {
            Job { controller in
                deleted.withValue { $0.append(draft) }
                controller.finish()
            }
        }
        // BEGIN DOC
        let confirmation = JobSource<Bool>(named: "confirm deletion")
        dialog.onAnswer = { confirmed in confirmation.finish(with: confirmed) }

        let deletion = confirmation.job.then { confirmed in
            confirmed ? deleting(draft) : .succeeded(())
        }
        // END DOC
        let queue = TestQueue()
        let handle = deletion.perform(on: queue) { _ in }
        try queue.run()
        #expect(handle.stallReport()?.contains("confirm deletion: source (running)") == true)
        dialog.onAnswer?(true)
        try queue.run()
        #expect(handle.isCompleted)
        #expect(deleted.value == ["draft 1"])
    }

    @Test func sharedExamples() async throws {
        final class Label: Sendable {
            let shown = LockedValue<[Job<Profile>.Outcome]>([])
            func show(_ outcome: Job<Profile>.Outcome) { shown.withValue { $0.append(outcome) } }
        }
        let (header, badge) = (Label(), Label())
        let id = 7
        let requests = LockedValue(0)
        let answer = JobSource<Profile>()
        func loadingProfile(_ id: Int) -> Job<Profile> {
            Job { controller in
                requests.withValue { $0 += 1 }
                answer.job.perform(on: controller.queue) { controller.complete(with: $0) }
            }
        }
        // BEGIN DOC
        let profile = loadingProfile(id).shared()
        profile.perform(on: .main) { outcome in header.show(outcome) }
        // The same request, not a second one:
        profile.perform(on: .main) { outcome in badge.show(outcome) }
        // END DOC
        // Both performances started: the main queue runs in order.
        let started = LockedValue(false)
        DispatchQueue.main.async { started.setValue(true) }
        try await withTimeLimit(.seconds(30)) {
            while !started.value && !Task.isCancelled { await Task.yield() }
        }
        answer.finish(with: Profile(avatarURL: URL(string: "https://example.com/7.png")!))
        try await withTimeLimit(.seconds(30)) {
            while (header.shown.value.isEmpty || badge.shown.value.isEmpty) && !Task.isCancelled { await Task.yield() }
        }
        #expect(requests.value == 1)

        let fetches = LockedValue(0)
        func fetchConfiguration() -> Job<[String: String]> {
            Job { controller in
                fetches.withValue { $0 += 1 }
                controller.finish(with: ["theme": "dark"])
            }
        }
        // BEGIN DOC
        let configuration = fetchConfiguration().shared(keeping: .value)
        // END DOC
        #expect(try await configuration.value == ["theme": "dark"])
        #expect(try await configuration.value == ["theme": "dark"])
        #expect(fetches.value == 1)
    }

    @MainActor
    @Test func taskSchedulingExamples() async throws {
        let api = DocExamples.CounterModel.API()
        DocExamples.CounterModelBefore().buttonTapped()
        // BEGIN DOC
        let scheduler = ManualTaskScheduler()
        let model = CounterModel(api: api, scheduler: scheduler)
        model.buttonTapped()
        await scheduler.runAll()
        #expect(model.label == "42")
        // END DOC
        let refreshed = LockedValue(false)
        let recording = RecordingTaskScheduler()
        struct Model: Sendable {
            let refreshed: LockedValue<Bool>
            func refresh() async { refreshed.setValue(true) }
        }
        do {
            let scheduler = recording
            let model = Model(refreshed: refreshed)
            // BEGIN DOC
            scheduler.schedule { await model.refresh() }
            // END DOC
        }
        try await recording.waitForTasks(timeout: .seconds(10))
        #expect(refreshed.value)
    }
}

// MARK: - JobKitTesting's examples

extension DocExamples {
    struct Note: Sendable, Equatable { let text: String }

    final class Store: Sendable {
        let scheduler: any TaskScheduling
        private let saved = LockedValue<[Note]>([])
        var savedNotes: [Note] { saved.value }

        init(scheduler: any TaskScheduling) { self.scheduler = scheduler }

        func save(_ note: Note) {
            scheduler.schedule(name: nil, priority: .background) { self.saved.withValue { $0.append(note) } }
        }
    }

    struct UserProfile: Sendable { let name: String }

    final class ProfileClient: Sendable {
        func profile() async throws -> UserProfile { UserProfile(name: "Ada") }
        func profileJob() -> Job<UserProfile> { .succeeded(UserProfile(name: "Ada")) }
    }

    /// Publishes with a job, and says when it is done.
    final class PostModel: Sendable {
        private let published = AsyncStream<Void>.makeStream()

        func publish() -> JobHandle {
            Job<Void> { controller in controller.queue.enqueue { controller.finish() } }
                .perform(on: DispatchQueue.global()) { [published] _ in published.continuation.finish() }
        }

        func waitUntilPublished() async {
            for await _ in published.stream {}
        }
    }
}

@Suite("Doc comment examples: JobKitTesting", .timeLimit(.minutes(1)))
struct JobKitTestingDocExamplesTests {
    let client = DocExamples.ProfileClient()

    // BEGIN DOC
    @Test func loadsTheProfile() async throws {
        let profile = try await withTimeLimit(.seconds(5)) { try await client.profile() }
        #expect(profile.name == "Ada")
    }
    // END DOC

    // BEGIN DOC
    @Test func loadsTheProfileJob() async throws {
        let profile = try await withTimeLimit(.seconds(5), performing: client.profileJob())
        #expect(profile.name == "Ada")
    }
    // END DOC

    @Test func explainingExample() async throws {
        let model = DocExamples.PostModel()
        // BEGIN DOC
        let handle = model.publish()  // performs the job, returns its handle
        try await withTimeLimit(.seconds(10), explaining: handle) {
            await model.waitUntilPublished()
        }
        // END DOC
        #expect(handle.isCompleted)
    }

    // BEGIN DOC
    @Test func valuesComeInInputOrderWhateverOrderTheJobsFinishIn() throws {
        try exploreOrderings(seeds: 0..<200) { queue in
            let jobs = ["a", "b", "c"].map { name in
                Job<String> { controller in
                    controller.queue.enqueue { controller.finish(with: name) }  // finishes later
                }
            }
            let values = LockedValue<[String]?>(nil)
            Job<[String]>.collect(jobs).perform(on: queue) { values.setValue(try? $0.get()) }
            try queue.run()
            try #require(values.value == ["a", "b", "c"])
        }
    }
    // END DOC

    @Test func recordingTaskSchedulerExample() async throws {
        let note = DocExamples.Note(text: "milk")
        // BEGIN DOC
        let scheduler = RecordingTaskScheduler()
        let store = Store(scheduler: scheduler)
        store.save(note)  // starts a background task
        try await scheduler.waitForTasks()
        #expect(store.savedNotes == [note])
        #expect(scheduler.calls == [.scheduled(priority: .background)])
        // END DOC
    }

    @Test func taskSchedulingCallExample() async throws {
        let scheduler = RecordingTaskScheduler()
        scheduler.schedule(name: "save", priority: .background) {}
        try await scheduler.waitForTasks()
        // BEGIN DOC
        #expect(scheduler.calls == [.scheduled(name: "save", priority: .background)])
        // END DOC
    }

    @Test func testQueueExample() throws {
        let download = Job<Data>.never
        // BEGIN DOC
        let queue = TestQueue()
        let outcome = LockedValue<Job<Data>.Outcome?>(nil)
        download.timeout(after: .seconds(30)).perform(on: queue) { outcome.setValue($0) }
        try queue.run()
        #expect(outcome.value == nil)  // started, not finished
        try queue.advance(by: .seconds(30))
        #expect(throws: JobError.timedOut) { try outcome.value?.get() }
        // END DOC
    }

    @Test func landingPageExample() throws {
        // BEGIN DOC
        let queue = TestQueue()
        let outcome = LockedValue<Job<Int>.Outcome?>(nil)
        Job<Int>.never.timeout(after: .seconds(30)).perform(on: queue) { outcome.setValue($0) }
        try queue.advance(by: .seconds(30))  // microseconds of real time
        #expect(throws: JobError.timedOut) { try outcome.value?.get() }
        // END DOC
    }

    @Test func immediateQueueExample() throws {
        let job = Job.succeeded(42)
        // BEGIN DOC
        let outcome = LockedValue<Job<Int>.Outcome?>(nil)
        job.perform(on: ImmediateQueue()) { outcome.setValue($0) }
        #expect(try outcome.value?.get() == 42)
        // END DOC
    }

    /// A queue of the user's own built on `Trampoline.run` behaves as
    /// `ImmediateQueue` does: plain work and a job's own enqueues keep one
    /// order, and delayed work cancelled while it waits behind running work
    /// never runs and is released.
    @Test func inlineQueueExample() throws {
        let log = LockedValue<[String]>([])
        let queue = InlineQueue()
        queue.enqueue {
            Job<Void> { controller in
                log.withValue { $0.append("job") }
                controller.finish()
            }.perform(on: queue) { _ in log.withValue { $0.append("handler") } }
            queue.enqueue { log.withValue { $0.append("work") } }
            log.withValue { $0.append("outer") }
        }
        #expect(log.value == ["outer", "job", "work", "handler"])

        let released = LockedValue(false)
        queue.enqueue {
            weak var weakObject: Tracked?
            let delayed: DelayedWork
            do {
                let object = Tracked()
                weakObject = object
                delayed = queue.enqueue(after: .seconds(1)) {
                    withExtendedLifetime(object) { log.withValue { $0.append("cancelled work ran") } }
                }
            }
            delayed.cancel()
            released.setValue(weakObject == nil)
        }
        #expect(released.value)
        #expect(log.value == ["outer", "job", "work", "handler"])
    }

    @Test func lockedValueExample() throws {
        let job = Job.succeeded(42)
        let queue = TestQueue()
        // BEGIN DOC
        let outcome = LockedValue<Job<Int>.Outcome?>(nil)
        job.perform(on: queue) { result in outcome.setValue(result) }
        try queue.run()
        #expect(try outcome.value?.get() == 42)
        // END DOC
    }

    @Test func actorValueExample() async throws {
        // BEGIN DOC
        let events = ActorValue<[String]>([])
        let scheduler = RecordingTaskScheduler()
        scheduler.schedule { await events.withValue { $0.append("saved") } }
        try await scheduler.waitForTasks()
        #expect(await events.value == ["saved"])
        // END DOC
    }

    @MainActor
    @Test func manualTaskSchedulerExample() async {
        // The CounterModel of the article "Async code in virtual time".
        // BEGIN DOC
        let scheduler = ManualTaskScheduler()
        let model = CounterModel(scheduler: scheduler)
        model.buttonTapped()  // schedules the load
        #expect(model.label == "")  // not yet
        await scheduler.runAll()
        #expect(model.label == "42")
        // END DOC
    }
}

extension JobKitTestingDocExamplesTests {
    typealias Store = DocExamples.Store
    typealias CounterModel = ReadmeTaskSchedulingTests.CounterModel
}

// MARK: - Every example is here

@Suite("Doc comment examples compile", .timeLimit(.minutes(1)))
struct DocExamplesCompileTests {
    static let root = PackageFolder.root

    /// The files where examples are compiled: the articles the README links
    /// to show its examples too, in full, and more of them.
    static let exampleFiles = [
        "Tests/JobKitTests/Docs/DocExamplesTests.swift",
        "Tests/JobKitTests/Docs/ComingFromPromiseKitTests.swift",
        // Compiled with the package trait ExperimentalMainActorInVirtualTime.
        "Tests/JobKitTestingTests/MainActorInVirtualTimeTests.swift",
        "Tests/UploadsTests/Docs/UploadsDocExamplesTests.swift",
        "Tests/JobKitTests/Docs/ReadmeTests.swift",
        "Tests/UploadsTests/Docs/UploadsReadmeTests.swift",
    ]

    /// The modules whose examples are checked.
    static let modules = ["JobKit", "JobKitTesting", "Uploads", "UploadsTesting"]

    @Test(arguments: modules)
    func everyExampleIsCompiledInATest(module: String) throws {
        let examples = try Self.exampleFiles.map {
            try String(contentsOf: Self.root.appendingPathComponent($0), encoding: .utf8)
        }
        .map(normalize).joined(separator: "\n")
        let blocks = try DocBlocks.find(in: Self.root.appendingPathComponent("Sources/\(module)"))
        #expect(!blocks.isEmpty)
        for block in blocks {
            let isCompiled = examples.contains(normalize(block.code))
            #expect(isCompiled, "the example at \(block.location) is not compiled in a test:\n\(block.code)")
        }
    }

    /// Lines trimmed of indentation, runs of spaces made one, blank lines
    /// dropped: what a formatter may change.
    private func normalize(_ text: String) -> String {
        text.split(separator: "\n")
            .map { $0.split(separator: " ").joined(separator: " ") }
            .filter { !$0.isEmpty }
            .joined(separator: "\n")
    }
}

/// The Swift code blocks of a folder's doc comments (`///`) and DocC
/// articles (`.md`).
enum DocBlocks {
    struct Block {
        let location: String
        let code: String
    }

    static func find(in folder: URL) throws -> [Block] {
        var blocks: [Block] = []
        let files = FileManager.default.enumerator(at: folder, includingPropertiesForKeys: nil)
        while let file = files?.nextObject() as? URL {
            let text = try? String(contentsOf: file, encoding: .utf8)
            guard let text else { continue }
            let isSwift = file.pathExtension == "swift"
            guard isSwift || file.pathExtension == "md" else { continue }
            var current: [String]?
            var isInOtherBlock = false  // ```text and the like: not Swift
            var start = 0
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                var content = line.trimmingCharacters(in: .whitespaces)
                if isSwift {
                    guard content.hasPrefix("///") else {
                        current = nil
                        isInOtherBlock = false
                        continue
                    }
                    content = String(content.dropFirst(3))
                    if content.hasPrefix(" ") { content.removeFirst() }
                } else {
                    content = String(line)
                }
                let fence = content.trimmingCharacters(in: .whitespaces)
                if fence.hasPrefix("```") {
                    if let lines = current {
                        blocks.append(
                            Block(location: "\(file.lastPathComponent):\(start)", code: lines.joined(separator: "\n")))
                        current = nil
                    } else if isInOtherBlock {
                        isInOtherBlock = false
                    } else if fence == "```" || fence == "```swift" {
                        current = []
                        start = number + 1
                    } else {
                        isInOtherBlock = true
                    }
                    continue
                }
                current?.append(content)
            }
        }
        return blocks
    }
}

// MARK: - Snapshots and names

extension JobKitDocExamplesTests {
    @Test func namedExample() throws {
        let photos = [Photo(name: "photo-1"), Photo(name: "photo-2")]
        let queue = TestQueue()
        @Sendable func upload(_ photo: Photo) -> Job<Void> { .never }
        // BEGIN DOC
        let uploads = photos.map { photo in upload(photo).named("upload \(photo.name)") }
        let publish = Job.group(uploads, maxConcurrent: 3).named("publish")
        // END DOC
        let handle = publish.perform(on: queue) { _ in }
        try queue.run()
        #expect(handle.snapshot().title == "publish: group 0/2")
        #expect(handle.snapshot().children.map(\.title) == ["upload photo-1", "upload photo-2"])
        handle.cancel()
    }

    @Test func namedWithDetailExample() throws {
        final class ByteMeter: Sendable {
            private let bytes = LockedValue(0)
            let total = 10
            var sent: Int { bytes.value }
            @Sendable func record(_ sent: Int) { bytes.setValue(sent) }
        }
        let clip = "surf.mov"
        @Sendable func send(_ clip: String, progress: @escaping @Sendable (Int) -> Void) -> Job<Void> {
            Job { controller in
                progress(4)
                controller.onCancel { withExtendedLifetime(controller) {} }
            }
        }
        let queue = TestQueue()
        // BEGIN DOC
        let meter = ByteMeter()
        let upload = send(clip, progress: meter.record)
            .named("upload surf.mov") { "\(meter.sent) of \(meter.total) bytes sent" }
        // END DOC
        let handle = upload.perform(on: queue) { _ in }
        try queue.run()
        #expect(handle.snapshot().line == "upload surf.mov (running, 4 of 10 bytes sent)")
        handle.cancel()
        #expect(handle.snapshot().line == "upload surf.mov (cancelled)")
    }

    @Test func onDescribeExample() throws {
        struct Progress: Sendable { var sent = 0, total = 0 }
        let queue = TestQueue()
        let job = Job<Void> { controller in
            let progress = Progress(sent: 5, total: 10)
            // BEGIN DOC
            controller.onDescribe { "\(progress.sent) of \(progress.total) bytes sent" }
            // END DOC
            controller.onCancel { withExtendedLifetime(controller) {} }
        }
        let handle = job.perform(on: queue) { _ in }
        try queue.run()
        #expect(handle.snapshot().detail == "5 of 10 bytes sent")
        handle.cancel()
    }

    @Test func snapshotExample() throws {
        let queue = TestQueue()
        let handle = Job.group([.succeeded, .never, .never]).perform(on: queue) { _ in }
        try queue.run()
        var printed: [String] = []
        func print(_ item: Any) { printed.append("\(item)") }
        // BEGIN DOC
        let snapshot = handle.snapshot()
        if case .group(let done, let running, let count) = snapshot.kind {
            print("\(done) of \(count) uploaded, \(running) uploading")
        }
        print(snapshot)  // the tree, one job per line
        // END DOC
        #expect(
            printed == [
                "1 of 3 uploaded, 2 uploading",
                """
                group 1/3 (running)
                ├─ job (running)
                └─ job (running)
                """,
            ]
        )
        handle.cancel()
    }

    @Test func stallReportExample() throws {
        let queue = TestQueue()
        let handle = Job<Void>.never.named("upload").perform(on: queue) { _ in }
        try withKnownIssue {
            // BEGIN DOC
            try queue.run()
            if let report = handle.stallReport() { Issue.record("\(report)") }
            // END DOC
        } matching: { issue in
            issue.comments.map(\.rawValue) == ["1 job has not completed:\n  upload (running)\n\nupload (running)  ◀"]
        }
        handle.cancel()
    }

    @Test func testQueueTaskExecutorExample() throws {
        // BEGIN DOC
        let queue = TestQueue()
        let log = LockedValue<[String]>([])
        Task(executorPreference: queue) {
            log.withValue { $0.append("started") }
            await Task.yield()
            log.withValue { $0.append("resumed") }
        }
        #expect(log.value == [])  // nothing runs until the test says so
        queue.runNext()
        #expect(log.value == ["started"])
        try queue.run()
        #expect(log.value == ["started", "resumed"])
        // END DOC
    }

    @Test func testQueueUnfinishedTasksExample() throws {
        let queue = TestQueue()
        queue.schedule(name: "refresh", priority: nil) { try await queue.clock.sleep(for: .seconds(1)) }
        try queue.run()
        #expect(
            queue.unfinishedTasks.map(\.description) == [#"task 1 "refresh": asleep on queue.clock until 1.0 seconds"#])
        // BEGIN DOC
        try queue.advance(by: .seconds(1))
        #expect(queue.unfinishedTasks.isEmpty)
        // END DOC
    }

    @Test func testQueueClockExample() throws {
        // BEGIN DOC
        let queue = TestQueue()
        let clock = queue.clock
        let woke = LockedValue<Duration?>(nil)
        queue.schedule {
            try await clock.sleep(for: .seconds(3600))
            woke.setValue(queue.now)
        }
        try queue.run()
        #expect(woke.value == nil)  // asleep
        try queue.advance(by: .seconds(3600))
        #expect(woke.value == .seconds(3600))
        // END DOC
    }
}

// MARK: - The article "Testing main-actor code" (JobKitTesting)

// BEGIN DOC
/// Loads the account's name, trying once more a second after a failure.
struct AccountLoader: Sendable {
    var clock: any Clock<Duration> = ContinuousClock()
    var fetch: @Sendable () async throws -> String

    func load() async throws -> String {
        do {
            return try await fetch()
        } catch {
            try await clock.sleep(for: .seconds(1))
            return try await fetch()
        }
    }
}

@MainActor
final class AccountModel {
    private(set) var name = "…"
    private let loader: AccountLoader
    private let scheduler: any TaskScheduling

    init(loader: AccountLoader, scheduler: any TaskScheduling = DefaultTaskScheduler()) {
        (self.loader, self.scheduler) = (loader, scheduler)
    }

    func appeared() {
        scheduler.schedule { [loader] in
            let name = (try? await loader.load()) ?? "unavailable"
            await self.show(name)
        }
    }

    private func show(_ name: String) { self.name = name }
}
// END DOC

/// The error of a fetch that fails, in the article's loader test.
private struct Unreachable: Error {}

@Suite("Doc examples: testing main-actor code", .timeLimit(.minutes(1)))
struct MainActorArticleTests {
    // BEGIN DOC
    @Test func theLoaderTriesOnceMoreAfterASecond() throws {
        let queue = TestQueue()
        let fetches = LockedValue(0)
        let loader = AccountLoader(clock: queue.clock) {
            let fetch = fetches.withValue { count in
                count += 1
                return count
            }
            if fetch == 1 { throw Unreachable() }
            return "Ada"
        }
        let name = LockedValue<String?>(nil)
        queue.schedule { name.setValue(try await loader.load()) }
        try queue.run()
        #expect(name.value == nil)  // failed once, waiting a second
        try queue.advance(by: .seconds(1))
        #expect(name.value == "Ada")
        #expect(queue.unfinishedTasks.isEmpty)
    }
    // END DOC

    // BEGIN DOC
    @Test @MainActor func theModelShowsTheLoadedName() async {
        let scheduler = ManualTaskScheduler()
        let model = AccountModel(loader: AccountLoader { "Ada" }, scheduler: scheduler)
        model.appeared()
        #expect(model.name == "…")
        await scheduler.runAll()
        #expect(model.name == "Ada")
    }
    // END DOC

    // BEGIN DOC
    @Test @MainActor func theQueueDoesNotRunTheMainActorsPart() throws {
        let queue = TestQueue()
        let model = AccountModel(loader: AccountLoader(clock: queue.clock) { "Ada" }, scheduler: queue)
        model.appeared()
        try queue.run()
        #expect(model.name == "…")
        #expect(queue.unfinishedTasks.map(\.state) == [.stranded])  // waits for the main actor
    }
    // END DOC
}

/// The mirrors of the examples of `race` and `firstSuccess`: each mirror
/// answers its own address, unless it is one of the failing ones.
private struct MirrorExamples {
    struct Offline: Error {}

    let mirrors = ["https://eu.example.com", "https://us.example.com"]
    let failing: Set<String>
    let logged = LockedValue<[String]>([])

    func download(_ mirror: String) -> Job<Data> {
        failing.contains(mirror) ? .failed(Offline()) : .succeeded(Data(mirror.utf8))
    }

    func log(_ errors: [any Error]) {
        logged.setValue(errors.map { "\($0)" })
    }

    func raced() async throws -> Data {
        // BEGIN DOC
        let data = try await Job.race(mirrors.map(download)).value
        // END DOC
        return data
    }

    func nearest() -> Job<Data> {
        // BEGIN DOC
        let nearest = Job.firstSuccess(mirrors.map(download), maxConcurrent: 1)
        // END DOC
        return nearest
    }

    func fetch() async throws -> Data {
        // BEGIN DOC
        do {
            return try await Job.firstSuccess(mirrors.map(download)).value
        } catch let error as AllFailedError {
            log(error.errors)  // one error per mirror, in the mirrors' order
            throw error
        }
        // END DOC
    }
}

// MARK: - Side effects, both outcomes, variadic races, a blocking wait

extension JobKitDocExamplesTests {
    @Test func onSuccessAndOnFailureExamples() throws {
        final class Cache: Sendable {
            let stored = LockedValue<[String]>([])
            func store(_ profile: String) { stored.withValue { $0.append(profile) } }
        }
        final class Log: Sendable {
            let lines = LockedValue<[String]>([])
            func error(_ line: String) { lines.withValue { $0.append(line) } }
        }
        let (cache, log, id, file) = (Cache(), Log(), 7, "photo.jpg")
        func loadingProfile(_ id: Int) -> Job<String> { .succeeded("profile \(id)") }
        func uploading(_ file: String) -> Job<Void> { .failed(NetworkError.offline) }
        // BEGIN DOC
        let profile = loadingProfile(id).onSuccess { profile in cache.store(profile) }
        // END DOC
        // BEGIN DOC
        let upload = uploading(file).onFailure { error in log.error("upload failed: \(error)") }
        // END DOC
        #expect(try outcome(of: profile)?.get() == "profile 7")
        #expect(cache.stored.value == ["profile 7"])
        #expect(outcome(of: upload)?.failure as? NetworkError == .offline)
        #expect(log.lines.value == ["upload failed: offline"])
    }

    @Test func capturingOutcomeExample() throws {
        let account = "ann"
        let reports = LockedValue<[Bool]>([])
        func syncing(_ account: String) -> Job<Int> { .failed(NetworkError.offline) }
        @Sendable func sendingReport(success: Bool) -> Job<Void> {
            Job { controller in
                reports.withValue { $0.append(success) }
                controller.finish()
            }
        }
        // BEGIN DOC
        let report = syncing(account).capturingOutcome().then { outcome in
            sendingReport(success: (try? outcome.get()) != nil)
        }
        // END DOC
        #expect(outcome(of: report)?.isSuccess == true)
        #expect(reports.value == [false])
    }

    @Test func performWithTwoHandlersExample() async throws {
        final class Header: Sendable {
            let shown = LockedValue<[String]>([])
            func show(_ profile: String) { shown.withValue { $0.append(profile) } }
            func showError(_ error: any Error) { shown.withValue { $0.append("error: \(error)") } }
        }
        let (header, id) = (Header(), 3)
        func loadingProfile(_ id: Int) -> Job<String> { .succeeded("profile \(id)") }
        // BEGIN DOC
        loadingProfile(id).perform(on: .main) { profile in
            header.show(profile)
        } onFailure: { error in
            header.showError(error)
        }
        // END DOC
        try await withTimeLimit(.seconds(30)) {
            while header.shown.value.isEmpty && !Task.isCancelled { await Task.yield() }
        }
        #expect(header.shown.value == ["profile 3"])
    }

    @Test func variadicRaceAndFirstSuccessExamples() throws {
        let (question, id) = ("why?", 4)
        func askingPrimary(_ question: String) -> Job<String> { finishing("primary", after: .seconds(2)) }
        func askingReplica(_ question: String) -> Job<String> { finishing("replica", after: .seconds(1)) }
        func loadingCachedAvatar(_ id: Int) -> Job<String> { .failed(NotFound()) }
        func downloadingAvatar(_ id: Int) -> Job<String> { .succeeded("downloaded \(id)") }
        // BEGIN DOC
        let answer = Job.race(askingPrimary(question), askingReplica(question))
        // END DOC
        // BEGIN DOC
        let avatar = Job.firstSuccess(loadingCachedAvatar(id), downloadingAvatar(id), maxConcurrent: 1)
        // END DOC
        let queue = TestQueue()
        let answers = Recorder<String>()
        answer.perform(on: queue, then: answers.handler)
        try queue.advance(by: .seconds(1))
        #expect(answers.values == ["replica"])
        #expect(try outcome(of: avatar)?.get() == "downloaded 4")
    }

    @Test func performAndWaitExample() async throws {
        struct Release: Sendable { let version: String }
        let printed = await offThePool { () -> [String] in
            var printed: [String] = []
            func print(_ line: String) { printed.append(line) }
            func fetchLatestRelease() -> Job<Release> { .succeeded(Release(version: "2.1.0")) }
            do {
                // BEGIN DOC // allowed: on a thread of its own (offThePool)
                let release = try fetchLatestRelease().performAndWait()
                print(release.version)
                // END DOC
            } catch {
                Issue.record(error)
            }
            return printed
        }
        #expect(printed == ["2.1.0"])
    }
}
