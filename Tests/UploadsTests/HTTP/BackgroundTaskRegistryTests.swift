import Foundation
import JobKit
import JobKitTesting
import Testing

@testable import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// How the registry of a background transport admits the requests named
/// in every launch, told the session's events by hand: which wait, which
/// join a task an earlier launch left, and which are sent.
@Suite("A background session's tasks, as a transport knows them", .timeLimit(.minutes(1)))
struct BackgroundTaskRegistryTests {
    let parts = FileManager.default.temporaryDirectory.appendingPathComponent("registry-\(UUID().uuidString)")

    /// What `name` was admitted to do so far, in order.
    final class Admissions: Sendable {
        private let log = LockedValue<[BackgroundTaskRegistry.Admission]>([])
        var all: [BackgroundTaskRegistry.Admission] { log.value }

        func admit(_ name: String, by registry: BackgroundTaskRegistry) {
            _ = registry.admit(name) { admission in self.log.withValue { $0.append(admission) } }
        }
    }

    /// A request's answer, kept up to `answerLimit` bytes, whose outcome
    /// `outcome` keeps.
    static func answer(_ outcome: LockedValue<Result<Int, UploadError>?>, answerLimit: Int = 100) -> TaskAnswer {
        let url = URL(string: "https://example.com/clip.mp4")!
        let request = HTTPRequest(
            urlRequest: URLRequest(url: url), body: .data(Data("bytes".utf8)), destination: url, resendable: true,
            answerLimit: answerLimit, progress: { _ in })
        return TaskAnswer(request, size: 5) { result in outcome.setValue(result.map(\.receipt.status)) }
    }

    static func answered(_ status: Int) -> URLResponse {
        HTTPURLResponse(
            url: URL(string: "https://example.com/clip.mp4")!, statusCode: status, httpVersion: "HTTP/1.1",
            headerFields: [:])!
    }

    @Test func nothingIsAdmittedBeforeTheSessionListedItsTasks() {
        let registry = BackgroundTaskRegistry(parts: parts)
        let admissions = Admissions()
        admissions.admit("u: upload", by: registry)
        #expect(admissions.all.isEmpty)
        registry.listed([])
        guard case .send(let description)? = admissions.all.first else {
            Issue.record("not sent: \(admissions.all)")
            return
        }
        #expect(BackgroundTaskRegistry.name(of: description) == "u: upload")
        #expect(description.hasPrefix("u: upload @"))
    }

    @Test func aRunningOrphanIsJoinedByOneRequestWhichTheOthersOfItsUploadWaitFor() throws {
        let registry = BackgroundTaskRegistry(parts: parts)
        registry.listed(["u: part 1 @A"])
        let admissions = Admissions()
        admissions.admit("u: part 1", by: registry)
        admissions.admit("u: part 1", by: registry)
        admissions.admit("u: list parts", by: registry)
        admissions.admit("v: upload", by: registry)
        guard admissions.all.count == 2, case .join("u: part 1 @A") = admissions.all[0], case .send = admissions.all[1]
        else {
            Issue.record("expected the join and v's upload: \(admissions.all)")
            return
        }
        let outcome = LockedValue<Result<Int, UploadError>?>(nil)
        registry.start("u: part 1 @A", Self.answer(outcome), file: parts.appendingPathComponent("none"))
        #expect(admissions.all.count == 2, "the joined task still holds its upload back")
        registry.task("u: part 1 @A", didCompleteWith: Self.answered(200), error: nil, bodySize: 5)
        #expect(try outcome.value?.get() == 200)
        #expect(admissions.all.count == 4, "the others of its upload go once it ended")
        #expect(admissions.all.dropFirst(2).allSatisfy { if case .send = $0 { true } else { false } })
    }

    @Test func anOrphanThatEndedAnsweredGivesItsAnswerAndOneThatFailedIsSentAgain() throws {
        let registry = BackgroundTaskRegistry(parts: parts)
        registry.task("u: upload @A", didReceive: Data("stored".utf8))
        registry.task("u: upload @A", didCompleteWith: Self.answered(201), error: nil, bodySize: 5)
        registry.task("v: upload @B", didCompleteWith: nil, error: URLError(.cancelled), bodySize: 0)
        registry.listed([])
        let admissions = Admissions()
        admissions.admit("u: upload", by: registry)
        admissions.admit("v: upload", by: registry)
        guard admissions.all.count == 2, case .join("u: upload @A") = admissions.all[0],
            case .send(let again) = admissions.all[1]
        else {
            Issue.record("expected a join and a send: \(admissions.all)")
            return
        }
        #expect(again != "v: upload @B")
        let outcome = LockedValue<Result<Int, UploadError>?>(nil)
        registry.start("u: upload @A", Self.answer(outcome), file: parts.appendingPathComponent("none"))
        #expect(try outcome.value?.get() == 201, "at once")
    }

    @Test func anOrphansAnswerCutWhileNoRequestWasThereFailsTheRequestThatJoinsIt() throws {
        let registry = BackgroundTaskRegistry(parts: parts)
        let limit = BackgroundTaskRegistry.orphanAnswerLimit
        registry.task("u: upload @A", didReceive: Data(count: limit - 10))
        registry.task("u: upload @A", didReceive: Data(count: 11))
        registry.task("u: upload @A", didCompleteWith: Self.answered(201), error: nil, bodySize: 5)
        registry.task("v: upload @B", didReceive: Data(count: limit))
        registry.task("v: upload @B", didCompleteWith: Self.answered(201), error: nil, bodySize: 5)
        registry.listed([])
        let admissions = Admissions()
        admissions.admit("u: upload", by: registry)
        admissions.admit("v: upload", by: registry)
        let (cut, whole) = (LockedValue<Result<Int, UploadError>?>(nil), LockedValue<Result<Int, UploadError>?>(nil))

        registry.start(
            "u: upload @A", Self.answer(cut, answerLimit: 4 * limit), file: parts.appendingPathComponent("a"))
        registry.start(
            "v: upload @B", Self.answer(whole, answerLimit: 4 * limit), file: parts.appendingPathComponent("b"))

        let reason = "it accepted the upload, but its answer is longer than 1 MiB, the most kept of an answer"
        #expect(throws: UploadError.invalidAnswer(URL(string: "https://example.com/clip.mp4")!, reason: reason)) {
            try cut.value?.get()
        }
        #expect(try whole.value?.get() == 201, "an answer as long as what an orphan keeps is whole")
    }

    /// Once a request of an upload is sent anew (a tus `HEAD`), what that
    /// upload's orphans stored the storage tells: a later request of the
    /// same name does not join a stale one.
    @Test func theOrphansThatEndedAreDroppedOnceTheirUploadSendsAnew() {
        let registry = BackgroundTaskRegistry(parts: parts)
        registry.task("u: PATCH at 0 @A", didCompleteWith: Self.answered(204), error: nil, bodySize: 5)
        registry.listed([])
        let admissions = Admissions()
        admissions.admit("u: HEAD", by: registry)
        admissions.admit("u: PATCH at 0", by: registry)
        #expect(admissions.all.allSatisfy { if case .send = $0 { true } else { false } }, "\(admissions.all)")
    }

    /// The events of a task this launch gave up do not make it an orphan
    /// a later request would join.
    @Test func aTaskGivenUpIsNoOrphan() {
        let registry = BackgroundTaskRegistry(parts: parts)
        registry.listed([])
        let outcome = LockedValue<Result<Int, UploadError>?>(nil)
        registry.start("u: upload @A", Self.answer(outcome), file: parts.appendingPathComponent("none"))
        registry.forget("u: upload @A")
        registry.task("u: upload @A", didSendBodyBytes: 3)
        registry.task("u: upload @A", didCompleteWith: nil, error: URLError(.cancelled), bodySize: 0)
        let admissions = Admissions()
        admissions.admit("u: upload", by: registry)
        guard case .send(let description)? = admissions.all.first else {
            Issue.record("not sent: \(admissions.all)")
            return
        }
        #expect(description != "u: upload @A")
        #expect(outcome.value == nil, "the request given up heard nothing")
    }

    // MARK: - The completion handler

    /// A registry whose completion handlers' time limits run on `queue`,
    /// and the number of handlers it gave to be called so far.
    func handling(on queue: TestQueue = TestQueue()) -> (BackgroundTaskRegistry, LockedValue<Int>) {
        let calls = LockedValue(0)
        let registry = BackgroundTaskRegistry(parts: parts, queue: queue) { _ in calls.withValue { $0 += 1 } }
        registry.ownerRuns { _ in true }
        return (registry, calls)
    }

    /// The handler of a wake is called once the session told its events
    /// and its owner settled every upload a task's end concerned: not at
    /// the session's word alone, and once.
    @Test func theHandlerIsCalledOnceTheEventsAreToldAndEveryUploadTheyEndedIsSettled() {
        let (registry, calls) = handling()
        registry.listed([])
        registry.hold {}
        let outcome = LockedValue<Result<Int, UploadError>?>(nil)
        for task in ["u: upload @A", "v: part 1 @B"] {
            registry.start(task, Self.answer(outcome), file: parts.appendingPathComponent("none"))
            registry.task(task, didCompleteWith: Self.answered(200), error: nil, bodySize: 5)
        }
        registry.sessionDidFinishEvents()
        #expect(calls.value == 0, "u and v are not settled")
        registry.settled("u")
        #expect(calls.value == 0, "v is not settled")
        // v's next request is admitted, then handed to the session.
        Admissions().admit("v: part 2", by: registry)
        #expect(calls.value == 0, "v's next request is not in the session's hands yet")
        registry.wentOn("v: part 2")
        #expect(calls.value == 1)
        registry.sessionDidFinishEvents()
        registry.settled("v")
        #expect(calls.value == 1, "called once")
    }

    /// The system may tell the session's events before it hands the app
    /// the handler: the handler is then called once it comes.
    @Test func aHandlerThatComesAfterTheEventsIsCalledAtOnce() {
        let (registry, calls) = handling()
        registry.sessionDidFinishEvents()
        #expect(calls.value == 0)
        registry.hold {}
        #expect(calls.value == 1)
    }

    /// A task that ended while the app was gone, that no request joined
    /// yet, holds the handler back while its owner runs its upload (it
    /// joins it when the upload's turn comes), at most until the time
    /// limit; one of an upload the owner no longer runs (its post
    /// published, paused or failed) does not.
    @Test func theHandlerWaitsForTheUploadsItsOwnerRunsAndAtMostItsTimeLimit() throws {
        let queue = TestQueue()
        let (registry, calls) = handling(on: queue)
        let running = LockedValue<Set<String>>(["u"])
        registry.ownerRuns { running.value.contains($0) }
        registry.listed([])
        registry.hold {}
        registry.task("u: upload @A", didCompleteWith: Self.answered(200), error: nil, bodySize: 5)
        registry.task("w: upload @C", didCompleteWith: Self.answered(200), error: nil, bodySize: 5)
        registry.sessionDidFinishEvents()
        #expect(calls.value == 0, "u runs")
        try queue.advance(by: BackgroundTaskRegistry.handlerTimeLimit - .milliseconds(1))
        #expect(calls.value == 0)
        try queue.advance(by: .milliseconds(1))
        #expect(calls.value == 1, "called at its time limit")
        #expect(queue.pendingCount == 0)

        // The next wake's handler waits while u runs, and goes once u's
        // request joined its orphan.
        registry.hold {}
        registry.sessionDidFinishEvents()
        #expect(calls.value == 1)
        Admissions().admit("u: upload", by: registry)
        #expect(calls.value == 1, "u's request has the answer, not settled yet")
        registry.settled("u")
        #expect(calls.value == 2)
    }

    /// A handler held when the transport closes is called then; one the
    /// system gives while another is held ends the other.
    @Test func aHandlerIsCalledWhenTheTransportClosesOrTheSystemGivesAnother() throws {
        let queue = TestQueue()
        let (registry, calls) = handling(on: queue)
        registry.hold {}
        registry.hold {}
        #expect(calls.value == 1, "the first, when the second came")
        registry.close()
        #expect(calls.value == 2)
        try queue.advance(by: BackgroundTaskRegistry.handlerTimeLimit)
        #expect(calls.value == 2, "each called once")
        #expect(queue.pendingCount == 0, "no time limit left")
    }
}
