import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing
import UploadsTesting

@testable import Uploads

/// The system's completion handler of a background session, forwarded to
/// ``Outbox/handleBackgroundEvents(identifier:completionHandler:)``: called
/// once, after what the transfers came to is in the journal, whether the
/// system woke a suspended app or launched a killed one.
extension OutboxBackgroundTests {
    /// What the app delegate saw: the outbox it opened, and, at each call
    /// of the handler it forwarded, whether the journal held the clip's
    /// receipt.
    final class AppDelegate: Sendable {
        let outbox = LockedValue<Outbox?>(nil)
        let receiptOnDiskAtCalls = LockedValue<[Bool]>([])
        /// The descriptions of the system's tasks at each call.
        let tasksAtCalls = LockedValue<[[String]]>([])
        /// Signalled at each call of the handler.
        let called = DispatchSemaphore(value: 0)  // allowed: waited by signalled(within:), on a thread of its own
    }

    /// Whether the record of the only post in the journal holds the
    /// receipt of its first medium.
    func clipReceiptIsOnDisk() -> Bool {
        let posts = outboxFolder.appendingPathComponent("posts")
        let records = TemporaryFolder.files(in: posts).filter { $0.hasSuffix(".json") }
        guard records.count == 1, let data = try? Data(contentsOf: posts.appendingPathComponent(records[0])),
            let record = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
            let media = record["media"] as? [[String: Any]]
        else { return false }
        return media.first?["receipt"] != nil
    }

    /// Forwards each background launch's handler to the outbox through the
    /// app delegate's method of the article, in its completion handler's
    /// form or its asynchronous one, opening an outbox first with
    /// `uploader`, if any (the app was killed), and notes what the journal
    /// held at each call.
    func delegate(opening uploader: (any Uploader)?, async: Bool = false) -> AppDelegate {
        let app = AppDelegate()
        system.onBackgroundLaunch { [self] identifier, completionHandler in
            let handled: @Sendable () -> Void = { [self] in
                app.receiptOnDiskAtCalls.withValue { $0.append(clipReceiptIsOnDisk()) }
                app.tasksAtCalls.withValue { $0.append(system.tasks.map(\.description)) }
                completionHandler()
                app.called.signal()
            }
            // UIKit calls the delegate on the main actor: the outbox may be
            // opened before it is, and hear its events before.
            Task { @MainActor in
                let delegate = BackgroundAppDelegate()
                if async {
                    await delegate.application(UIApplication(), handleEventsForBackgroundURLSession: identifier)
                    handled()
                } else {
                    delegate.application(
                        UIApplication(), handleEventsForBackgroundURLSession: identifier, completionHandler: handled)
                }
            }
            if let uploader {
                app.outbox.setValue(try? launch(uploader))
            }
        }
        return app
    }

    /// Releases the clip the server holds, and checks that the handler of
    /// the wake that follows was called once, after the clip's receipt was
    /// in the journal; then the user opens the app, and the post
    /// (the outbox the app has then) is published, each request sent once.
    func expectOneCallThenPublished(
        _ id: Outbox.PostID, of clip: URL, as body: Body, by app: AppDelegate, outbox: () throws -> Outbox,
        on server: FixtureServer
    ) async throws {
        #expect(try await server.release(resuming: true) == 1)
        #expect(await app.called.signalled(within: 10), "the handler was called")
        #expect(app.receiptOnDiskAtCalls.value == [true], "after the clip's receipt was in the journal")
        #expect(system.wakes.map(\.completionHandlerCalls) == [1])
        #expect(system.appState == .suspended)

        // The document's task, made in the background, starts.
        system.enterForeground()
        let outbox = try outbox()
        let settled = try await HTTPTransportTests.settled(outbox, id)
        #expect(settled.state == .published, "\(String(describing: settled.error))")
        outbox.close()
        let received = try await server.received()
        #expect(received.map(\.path).sorted() == ["/clip.mp4", "/post.json"], "each sent once")
        try await Self.expectWholeClip(received.first { $0.path == "/clip.mp4" }, clip, as: body)
        #expect(system.wakes.map(\.completionHandlerCalls) == [1], "called once")
        #expect(TemporaryFolder.files(in: parts) == [])
    }

    @Test(arguments: Body.allCases)
    func aKilledAppLaunchedInTheBackgroundCallsTheHandlerOnceTheReceiptIsInTheJournal(_ body: Body) async throws {
        defer { folder.remove() }
        let (clip, uploader) = try clip(as: body)
        try await FixtureServer.with { server in
            let (first, id) = try await launchHoldingTheClip(clip, by: uploader, on: server)
            kill(first)
            let app = delegate(opening: uploader, async: true)
            try await expectOneCallThenPublished(
                id, of: clip, as: body, by: app, outbox: { try #require(app.outbox.value) }, on: server)
        }
    }

    @Test(arguments: Body.allCases)
    func aSuspendedAppWokenInTheBackgroundCallsTheHandlerOnceTheReceiptIsInTheJournal(_ body: Body) async throws {
        defer { folder.remove() }
        let (clip, uploader) = try clip(as: body)
        try await FixtureServer.with { server in
            let (outbox, id) = try await launchHoldingTheClip(clip, by: uploader, on: server)
            let app = delegate(opening: nil)
            system.enterBackground()
            system.suspend()
            try await expectOneCallThenPublished(id, of: clip, as: body, by: app, outbox: { outbox }, on: server)
        }
    }

    /// Publishes `post` with the network cut just before the task `cut`
    /// names, the app suspended meanwhile: once the network returns, the
    /// task goes while the app is away, the system wakes the app, the
    /// outbox hands the next task (the one `next` names) to the session,
    /// and only then is the handler called, once; the rest goes once the
    /// app is in the foreground again.
    func publishSuspendedWhileTheNetworkIsCut(
        before cut: String, _ uploader: any Uploader, _ post: Post, next: @escaping (String) -> Bool
    ) async throws {
        let app = delegate(opening: nil)
        try await publishWithTheNetworkCut(
            before: cut, uploader, post,
            returned: { [self] in
                #expect(await app.called.signalled(within: 10), "the handler was called")
                #expect(system.wakes.map(\.completionHandlerCalls) == [1])
                let tasks = app.tasksAtCalls.value.first ?? []
                #expect(tasks.contains(where: next), "the next task was made before the handler was called: \(tasks)")
                system.enterForeground()
            },
            meanwhile: { [self] outbox in
                system.enterBackground()
                system.suspend()
                return outbox
            })
        #expect(system.wakes.map(\.completionHandlerCalls) == [1], "called once")
    }

    @Test(TusFixture.requirement)
    func aTusUploadSuspendedWhileAPatchWaitsGoesOnAtTheWakeBeforeTheHandlerIsCalled() async throws {
        defer { folder.remove() }
        try await TusFixture.with(.resumableUpload) { fixture in
            let (uploader, post) = try HTTPTransportTests.tusPost(in: folder, to: fixture)
            try await publishSuspendedWhileTheNetworkIsCut(before: "medium 0: PATCH at 131072", uploader, post) {
                $0.contains("medium 0: PATCH at 262144")
            }
            try await Self.expectEachByteOnce(on: fixture)
        }
    }
}
