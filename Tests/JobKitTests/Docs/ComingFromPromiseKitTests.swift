import Dispatch
import Foundation
import JobKit
import JobKitTesting
import Synchronization
import TestSupport
import Testing

// The examples of the article "Coming from PromiseKit, swift-nio and
// TaskGroup" on laziness, threading and Sendable, verbatim between BEGIN DOC
// and END DOC, and tests of what the article says around them.

// MARK: - Stand-ins the examples talk about

private struct Account: Sendable { let name: String }
private struct Offline: Error {}

/// Lines logged, and a signal for each.
private final class Log: Sendable {
    let lines = LockedValue<[String]>([])
    let logged = DispatchSemaphore(value: 0)

    func info(_ line: String) { lines.withValue { $0.append(line) } }
    func error(_ line: String) {
        lines.withValue { $0.append(line) }
        logged.signal()
    }
}

/// A service whose connection fails, counting the attempts.
private final class ConnectionAPI: Sendable {
    let connections = LockedValue(0)

    func connecting() -> Job<Void> {
        Job { controller in
            self.connections.withValue { $0 += 1 }
            controller.fail(with: Offline())
        }
    }
}

/// A sync client whose first `failures` syncs fail.
private final class SyncClient: Sendable {
    let failures: LockedValue<Int>

    init(failures: Int) { self.failures = LockedValue(failures) }

    func synchronize(_ account: Account, completion: @escaping @Sendable ((any Error)?) -> Void) {
        let fails = failures.withValue { failures in
            defer { failures -= 1 }
            return failures > 0
        }
        completion(fails ? Offline() : nil)
    }
}

private struct SyncExample {
    let log: Log
    let client: SyncClient

    // BEGIN DOC
    func syncing(_ account: Account) -> Job<Void> {
        log.info("sync \(account.name)")  // once, when syncing is called, performed or not
        return Job.bridging { completion in
            log.info("sync \(account.name) starts")  // each time it is performed: each retry too
            client.synchronize(account, completion: completion)
        }
    }
    // END DOC
}

private let queueKey = DispatchSpecificKey<String>()

/// The main queue, labelled: on Linux its thread is not always the main
/// thread (`dispatchMain()` lets a worker thread drain it).
private let mainQueueLabelled: Void = DispatchQueue.main.setSpecific(key: queueKey, value: "main")

/// The label set on the queue running the caller, or "elsewhere".
private func currentQueue() -> String {
    mainQueueLabelled
    return DispatchQueue.getSpecific(key: queueKey) ?? "elsewhere"
}

/// A queue whose label `currentQueue()` reads.
private func labelledQueue(_ label: String) -> DispatchQueue {
    let queue = DispatchQueue(label: label)
    queue.setSpecific(key: queueKey, value: label)
    return queue
}

/// Where the shadowing `JSONDecoder` of the threading example decoded.
private let decodedOn = LockedValue<[String]>([])

/// As URLSession's delegate queue: where the requests below report.
private let delegateQueue = labelledQueue("delegate")

/// The profile examples, in a namespace of their own: the README's
/// examples have a `ProfileAPI` too.
private enum Port {
    /// Loads profiles, reporting on `delegateQueue` as a URLSession would.
    final class ProfileAPI: Sendable {
        let failing: Bool

        init(failing: Bool = false) { self.failing = failing }

        func loadingProfile(_ id: Int) -> Job<Profile> {
            let failing = failing
            return Job { controller in
                delegateQueue.async {
                    if failing {
                        controller.fail(with: Offline())
                    } else {
                        controller.finish(with: Profile(name: "ann \(id)"))
                    }
                }
            }
        }
    }

    // BEGIN DOC
    struct Profile: Decodable, Sendable {
        let name: String
    }

    final class ProfileCache: Sendable {
        private let api: ProfileAPI
        private let profiles = Mutex<[Int: Profile]>([:])

        init(api: ProfileAPI) { self.api = api }

        func loadingProfile(_ id: Int) -> Job<Profile> {
            api.loadingProfile(id).onSuccess { profile in
                self.profiles.withLock { $0[id] = profile }
            }
        }
    }
    // END DOC

    // BEGIN DOC
    @MainActor final class ProfileViewController {
        let cache: ProfileCache
        var title = ""

        init(cache: ProfileCache) { self.cache = cache }

        func showProfile(_ id: Int) {
            Task {
                do {
                    title = try await cache.loadingProfile(id).value.name
                } catch {
                    title = "No profile"
                }
            }
        }
    }
    // END DOC
}

extension Port.ProfileCache {
    fileprivate var cached: [Int: Port.Profile] { profiles.withLock { $0 } }
}

extension Port.ProfileViewController {
    func showProfileFromTheMainQueue(_ id: Int) {
        // BEGIN DOC
        cache.loadingProfile(id).perform(on: .main) { profile in
            MainActor.assumeIsolated { self.title = profile.name }
        } onFailure: { _ in
            MainActor.assumeIsolated { self.title = "No profile" }
        }
        // END DOC
    }

    /// Until `title` is set, at most 30 seconds.
    func titleShown() async throws -> String {
        try await withTimeLimit(.seconds(30)) { @MainActor in
            while self.title.isEmpty && !Task.isCancelled { await Task.yield() }
            return self.title
        }
    }
}

@Suite("Coming from PromiseKit: laziness, threading, Sendable", .timeLimit(.minutes(1)))
struct ComingFromPromiseKitTests {
    // MARK: Lazy, where a promise is eager

    @Test func aJobMadeAndDroppedDoesNothingAndAPerformedOneReportsItsFailure() async throws {
        let (api, log) = (ConnectionAPI(), Log())
        _ = api.connecting()
        #expect(api.connections.value == 0)

        // BEGIN DOC
        api.connecting().perform { outcome in
            if case .failure(let error) = outcome { log.error("connect failed: \(error)") }
        }
        // END DOC
        #expect(await log.logged.signalled(within: 30))
        #expect(api.connections.value == 1)
        #expect(log.lines.value == ["connect failed: Offline()"])
    }

    @Test func aFunctionsOwnLinesRunWhenItIsCalledItsJobsBodyEachTimeItIsPerformed() throws {
        let log = Log()
        let example = SyncExample(log: log, client: SyncClient(failures: 1))
        let sync = example.syncing(Account(name: "ann")).retry(attempts: 2)
        #expect(log.lines.value == ["sync ann"])

        #expect(outcome(of: sync)?.isSuccess == true)
        #expect(log.lines.value == ["sync ann", "sync ann starts", "sync ann starts"])
        #expect(outcome(of: sync)?.isSuccess == true)
        #expect(log.lines.value == ["sync ann", "sync ann starts", "sync ann starts", "sync ann starts"])
    }

    // MARK: Cancellation, as the table says

    @Test func aCancellationErrorFromTheJobBeforeReachesRecoverAndACancelOfItsOwnDoesNot() throws {
        let recovered = LockedValue<[String]>([])
        let fromBefore = Job<Int>.failed(CancellationError()).recover { error in
            recovered.withValue { $0.append("\(type(of: error))") }
            throw error
        }
        #expect(outcome(of: fromBefore)?.failure is CancellationError)
        #expect(recovered.value == ["CancellationError"])

        let queue = TestQueue()
        let recorder = Recorder<Int>()
        let handle = Job<Int>.never
            .recover { _ in
                recovered.withValue { $0.append("called by a cancel") }
                return 0
            }
            .perform(on: queue, then: recorder.handler)
        try queue.run()
        handle.cancel()
        try queue.run()
        #expect(recorder.count == 1)
        #expect(recorder.last?.failure is CancellationError)  // the performance's handler sees the cancel
        #expect(recovered.value == ["CancellationError"])
    }

    // MARK: Which queue runs each closure

    @Test func eachClosureRunsWhereTheArticleSays() async throws {
        let performing = labelledQueue("performing")
        let seen = LockedValue<[String]>([])
        let done = DispatchSemaphore(value: 0)
        @Sendable func note(_ closure: String) { seen.withValue { $0.append("\(closure): \(currentQueue())") } }
        @Sendable func reporting(_ outcome: Result<Int, any Error>) -> Job<Int> {
            Job { controller in
                note("body")
                delegateQueue.async { controller.complete(with: outcome) }
            }
        }
        reporting(.success(1))
            .map { value in
                note("map")
                return value
            }
            .then { _ in
                note("then")
                return Job<Int>.bridging { completion in
                    note("bridging")
                    delegateQueue.async { completion(.success(2)) }
                }
            }
            .then { _ in
                note("then")
                return reporting(.failure(Offline()))
            }
            .mapError { error in
                note("mapError")
                return error
            }
            .recover(with: { error in
                note("recover(with:)")
                return .failed(error)
            })
            .recover { _ in
                note("recover")
                return 2
            }
            .always { _ in note("always") }
            .onSuccess { _ in note("onSuccess") }
            .perform(on: performing) { outcome in
                note("handler \((try? outcome.get()) ?? 0)")
                done.signal()
            }
        #expect(await done.signalled(within: 30))
        #expect(
            seen.value == [
                "body: performing", "map: delegate", "then: delegate", "bridging: performing", "then: delegate",
                "body: performing", "mapError: delegate", "recover(with:): delegate", "recover: performing",
                "always: performing", "onSuccess: performing", "handler 2: performing",
            ])
    }

    @Test func aMapRunsWhereTheRequestCompletedAndTheHandlersOnTheMainQueue() async throws {
        final class Header: Sendable {
            let shown = LockedValue<[String]>([])
            let done = DispatchSemaphore(value: 0)
            func show(_ profile: Port.Profile) {
                shown.withValue { $0.append("\(profile.name) on \(currentQueue())") }
                done.signal()
            }
            func showError(_ error: any Error) {
                shown.withValue { $0.append("\(error) on \(currentQueue())") }
                done.signal()
            }
        }
        typealias Profile = Port.Profile
        let (header, id) = (Header(), 4)
        func loadingProfileData(_ id: Int) -> Job<Data> {
            Job { controller in
                delegateQueue.async { controller.finish(with: Data(#"{"name": "ann \#(id)"}"#.utf8)) }
            }
        }
        struct JSONDecoder {
            func decode<T: Decodable>(_ type: T.Type, from data: Data) throws -> T {
                decodedOn.withValue { $0.append(currentQueue()) }  // the one test that uses it
                return try Foundation.JSONDecoder().decode(type, from: data)
            }
        }
        // BEGIN DOC
        loadingProfileData(id)
            .map { data in try JSONDecoder().decode(Profile.self, from: data) }  // where the request completed
            .perform(on: .main) { profile in
                header.show(profile)  // on the main queue
            } onFailure: { error in
                header.showError(error)
            }
        // END DOC
        #expect(await header.done.signalled(within: 30))
        #expect(decodedOn.value == ["delegate"])
        #expect(header.shown.value == ["ann 4 on main"])
    }

    @Test func heavyWorkIsAJobOfItsOwnOffTheMainThread() async throws {
        let url = URL(string: "https://example.com/beach.jpg")!
        let renderedOn = LockedValue<[String]>([])
        func downloadingPhoto(_ url: URL) -> Job<Data> { .succeeded(Data(url.lastPathComponent.utf8)) }
        @Sendable func renderThumbnail(of data: Data) throws -> String {
            renderedOn.withValue { $0.append(currentQueue()) }
            return "thumbnail of \(String(decoding: data, as: UTF8.self))"
        }
        // BEGIN DOC
        let thumbnail = downloadingPhoto(url).then { data in Job.task { try renderThumbnail(of: data) } }
        // END DOC
        #expect(try await thumbnail.value(on: DispatchQueue.main) == "thumbnail of beach.jpg")
        #expect(renderedOn.value == ["elsewhere"])

        let queue = TestQueue()
        let recorder = Recorder<String>()
        thumbnail.perform(on: queue, then: recorder.handler)
        try queue.run()
        #expect(recorder.values == ["thumbnail of beach.jpg"])
    }

    // MARK: Sendable

    @Test func aSendableCacheKeepsWhatItLoaded() async throws {
        let cache = Port.ProfileCache(api: Port.ProfileAPI())
        let loading = cache.loadingProfile(3)
        #expect(cache.cached.isEmpty)
        #expect(try await loading.value.name == "ann 3")
        #expect(cache.cached[3]?.name == "ann 3")
    }

    @Test(arguments: ["awaits the job in a task", "performs the job on the main queue"])
    @MainActor func aMainActorViewControllerShowsTheProfileOrTheFailure(way: String) async throws {
        func show(_ id: Int, in controller: Port.ProfileViewController) {
            if way == "awaits the job in a task" {
                controller.showProfile(id)
            } else {
                controller.showProfileFromTheMainQueue(id)
            }
        }
        let shown = Port.ProfileViewController(cache: Port.ProfileCache(api: Port.ProfileAPI()))
        show(5, in: shown)
        #expect(try await shown.titleShown() == "ann 5")

        let failed = Port.ProfileViewController(cache: Port.ProfileCache(api: Port.ProfileAPI(failing: true)))
        show(5, in: failed)
        #expect(try await failed.titleShown() == "No profile")
    }
}
