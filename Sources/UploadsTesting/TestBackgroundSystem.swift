import Foundation
import JobKit
import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The system's side of background `URLSession`s, for tests: transfers
/// that go on while the app is suspended or gone, and the events the app
/// gets when it comes back, as Apple documents them.
///
/// The app's objects (its sessions, what they tell of their tasks, the
/// outbox above them) come and go; this object outlives them, as Apple's
/// daemon outlives an app. A test drives the app's life with
/// ``enterBackground()``, ``suspend()``, ``enterForeground()``,
/// ``terminate()`` and ``forceQuit()``, the network with
/// ``networkGoesDown()`` and ``networkComesBack()``, and time with the
/// queue it gives (a `TestQueue`). An outbox takes its transfers with
/// ``transfers(identifier:)``.
///
/// What it does, each as Apple documents for background sessions:
/// - **One session per identifier.** Apple leaves several sessions of one
///   identifier undefined; making a second one here while one is live (not
///   invalidated, its app not gone) throws ``Refusal/identifierInUse(_:)``.
/// - **Only files.** Apple supports "only upload tasks from a file"; one
///   from bytes or a stream fails once the app exits. Here a task whose
///   request carries bytes or a stream of its own is refused at once
///   (``Refusal/bodyNotAFile(task:)``), so that a test finds it. A file
///   missing when its task starts fails the task
///   (`URLError.fileDoesNotExist`), and nothing is sent.
/// - **Transfers outlive the app.** While the app is suspended or gone,
///   tasks go on; their answers are held, and their progress not told.
///   When every task of a session has ended, the system wakes the app (or
///   launches it, when it was terminated) in the background: it calls the
///   handler given to ``onBackgroundLaunch(_:)``, as iOS calls
///   `application(_:handleEventsForBackgroundURLSession:completionHandler:)`,
///   tells the held events to the session the app has or makes again with
///   the identifier, then `sessionDidFinishEvents()`. Calling the
///   completion handler suspends the app again; ``wakes`` counts the calls.
///   A session made again with the identifier of one whose app was gone
///   gets the held events whenever it is made, and its list of tasks
///   (`getAllTasks`) has those still running. A session invalidated
///   (`finishTasksAndInvalidate()`) hears the events of its tasks itself.
/// - **A force-quit cancels.** ``forceQuit()`` cancels every task with
///   `NSURLErrorCancelled` (-999), its reason
///   `NSURLErrorBackgroundTaskCancelledReasonKey` 0 (the user force-quit
///   the app), and launches nothing: the cancellations are told to the
///   session the user's next launch makes.
/// - **Tasks made in the background wait.** The rate limiter: a task made
///   while the app runs in the background (or while it is suspended: the
///   app's code goes on in a test's process, and a task it makes then is
///   one a real app would make when it next runs, in the background)
///   starts once a delay has passed.
///   The delay is none until the system first wakes or launches the app,
///   then the first delay, doubled each time it wakes or launches it
///   again, and none again once the app comes to the foreground, where
///   the tasks still waiting start.
/// - **A transfer cut by the network is sent again whole** when it
///   returns.
///
/// Its transfers are real requests, made by an in-process session, so
/// that the servers a test runs read the bodies.
public final class TestBackgroundSystem: Sendable {
    /// Where the app is in its life.
    public enum AppState: Sendable, Equatable {
        /// On screen.
        case foreground
        /// Running, off screen: tasks it makes wait (the rate limiter).
        case background
        /// Suspended: it gets no events until the system wakes it.
        case suspended
        /// Killed by the system: launched again in the background when
        /// its sessions' tasks end.
        case terminated
        /// Force-quit by the user: launched again only by the user.
        case forceQuit
    }

    /// Why the system refused what the app asked.
    public enum Refusal: Error, Equatable, CustomStringConvertible {
        /// A session of this identifier is live already.
        case identifierInUse(String)
        /// The task's request carried a body of its own, bytes or a
        /// stream, rather than only the file.
        case bodyNotAFile(task: String)
        /// The session was invalidated, or its app is gone: it takes no
        /// task.
        case sessionInvalidated(String)
        /// The session has a task of this description that has not ended.
        case descriptionInUse(String)

        /// What was refused, and why, in a sentence.
        public var description: String {
            switch self {
            case .identifierInUse(let identifier):
                "a background session with the identifier \(identifier) is live already"
            case .bodyNotAFile(let task):
                "a background session takes only a file as a task's body; the request of \(task) carries its own"
            case .sessionInvalidated(let identifier):
                "the background session \(identifier) was invalidated or its app is gone: it takes no task"
            case .descriptionInUse(let task):
                "the background session has a task named \(task) that has not ended"
            }
        }
    }

    /// A task as the system has it.
    public struct TaskRecord: Sendable, Equatable {
        /// Where a task is.
        public enum Phase: Sendable, Equatable {
            /// Waiting for its delay to pass (made in the background).
            case waiting
            /// Its request is being sent.
            case running
            /// Cut by the network, or made while it was down.
            case waitingForNetwork
            /// Answered, failed or cancelled.
            case ended
        }

        /// The identifier of its session.
        public var identifier: String
        /// Its description.
        public var description: String
        /// Where it is.
        public var phase: Phase
        /// How many times its request was sent: more than once when the
        /// network cut it.
        public var sends: Int
    }

    /// One time the system woke or launched the app for a session.
    public struct Wake: Sendable, Equatable {
        /// The session's identifier.
        public var identifier: String
        /// How many times the app called the completion handler it was
        /// given: once, as Apple asks.
        public var completionHandlerCalls: Int
    }

    /// The handler of a background launch: the app delegate's
    /// `application(_:handleEventsForBackgroundURLSession:completionHandler:)`.
    public typealias LaunchHandler =
        @Sendable (_ identifier: String, _ completionHandler: @escaping @Sendable () -> Void) -> Void

    private let state: Lock<State>
    /// Runs the delays of tasks made in the background.
    private let queue: any JobQueue
    /// Tells the app's objects their events, one at a time, as a session's
    /// delegate queue does.
    private let delivery = DispatchQueue(label: "JobKit.TestBackgroundSystem.delivery")

    /// A system whose delays run on `queue`, whose transfers are sent by a
    /// session of `configuration`, and whose rate limiter's first delay
    /// (after the first wake or launch in the background) is
    /// `backgroundDelay`.
    public init(
        queue: any JobQueue,
        configuration: URLSessionConfiguration = .ephemeral,
        backgroundDelay: Duration = .seconds(60)
    ) {
        self.queue = queue
        state = Lock(State(firstDelay: backgroundDelay))
        let engine = Engine(system: self)
        let transfers = URLSessionBackgroundSession(configuration: configuration, events: engine)
        state.withLock { state in
            state.engine = engine
            state.transfers = transfers
        }
    }

    deinit {
        state.withLock { $0.transfers }?.finishTasksAndInvalidate()
    }

    // MARK: - The app's sessions

    /// The app's session of `identifier`, telling `events` of its tasks
    /// (held weakly): first the events held for that identifier while the
    /// app was gone. Making one while the app is terminated or force-quit
    /// launches it in the foreground, as the user does.
    ///
    /// - Throws: ``Refusal/identifierInUse(_:)`` when a session of
    ///   `identifier` is live.
    package func session(identifier: String, events: any BackgroundSessionEvents) throws(Refusal) -> Session {
        let (session, starts) = try state.withLock { state throws(Refusal) in
            guard state.sessions[identifier] == nil else { throw .identifierInUse(identifier) }
            let starts = state.app == .terminated || state.app == .forceQuit ? foreground(&state) : []
            state.nextSession += 1
            state.sessions[identifier] = AppSession(serial: state.nextSession, events: events)
            flush(identifier, &state)
            return (Session(system: self, identifier: identifier, serial: state.nextSession), starts)
        }
        for run in starts { send(run) }
        return session
    }

    /// What carries an outbox's requests by the background session of
    /// `identifier` this system keeps: give it to
    /// `Outbox.init(folder:uploader:options:queue:transfers:)` in place of
    /// `Outbox.Transfers.background(identifier:)`. Opening an outbox
    /// throws ``Refusal/identifierInUse(_:)`` while a session of
    /// `identifier` is live.
    ///
    /// `Outbox.handleBackgroundEvents(identifier:completionHandler:)`
    /// hands a handler to the outbox of its identifier in the process,
    /// whichever system it is on: tests that run at the same time give
    /// each its own identifier.
    public func transfers(identifier: String) -> Outbox.Transfers {
        .background(identifier: identifier) { [self] identifier, events in
            try session(identifier: identifier, events: events)
        }
    }

    /// Calls `handler` each time the system wakes or launches the app in
    /// the background for a session, as iOS calls the app delegate; on the
    /// queue that tells the sessions their events, before it tells them
    /// those it held, so the handler must not wait for a session's answer.
    public func onBackgroundLaunch(_ handler: @escaping LaunchHandler) {
        state.withLock { $0.launchHandler = handler }
    }

    // MARK: - The app's life

    /// Where the app is in its life.
    public var appState: AppState { state.withLock { $0.app } }

    /// The app leaves the screen, and runs on for a while.
    public func enterBackground() {
        state.withLock { $0.app = .background }
    }

    /// The app is suspended: it gets no events until the system wakes it,
    /// which it does at once if its sessions' tasks have all ended.
    public func suspend() {
        state.withLock { state in
            state.app = .suspended
            wakeWhereDue(&state)
        }
    }

    /// The app comes back on screen, or the user opens it after it was
    /// terminated or force-quit: it gets the events held for its sessions,
    /// the rate limiter's delay is none again, and the tasks waiting for
    /// it start.
    public func enterForeground() {
        let starts = state.withLock { foreground(&$0) }
        for run in starts { send(run) }
    }

    /// Brings the app to the foreground; returns the transfers of the
    /// tasks that waited for the rate limiter.
    private func foreground(_ state: inout State) -> [Run] {
        state.app = .foreground
        state.delay = .zero
        for identifier in state.sessions.keys { flush(identifier, &state) }
        return state.tasks.indices.filter { state.tasks[$0].phase == .waiting }.compactMap { index in
            state.tasks[index].deferral?.cancel()
            return state.start(index)
        }
    }

    /// The system kills the app: its sessions are gone (what the test
    /// holds of them takes no task and cancels none), their tasks go on, and the app is
    /// launched in the background once a session's tasks have all ended.
    public func terminate() {
        state.withLock { state in
            state.app = .terminated
            state.sessions = [:]
            state.waking = []
            wakeWhereDue(&state)
        }
    }

    /// The user force-quits the app: every task that has not ended is
    /// cancelled with `NSURLErrorCancelled`, and the app is not launched
    /// again until the user does.
    public func forceQuit() {
        let cut = state.withLock { state in
            state.app = .forceQuit
            state.sessions = [:]
            state.waking = []
            let reason = [NSURLErrorBackgroundTaskCancelledReasonKey: 0]
            var cut: [Int] = []
            for index in state.tasks.indices where state.tasks[index].phase != .ended {
                cut += state.end(index)
                let task = state.tasks[index]
                let cancelled = URLError(.cancelled, userInfo: reason)
                route(
                    [.completed(task: task.description, response: nil, error: cancelled, bodySize: 0)], of: task, &state
                )
            }
            return cut
        }
        cancel(runs: cut)
    }

    // MARK: - The network

    /// The network goes: every transfer in flight is cut, and waits for
    /// it to return.
    public func networkGoesDown() {
        let cut = state.withLock { state in
            state.network = false
            var cut: [Int] = []
            for index in state.tasks.indices where state.tasks[index].phase == .running {
                if let run = state.tasks[index].run {
                    state.runs[run] = nil
                    cut.append(run)
                }
                state.tasks[index].run = nil
                state.tasks[index].phase = .waitingForNetwork
            }
            return cut
        }
        cancel(runs: cut)
    }

    /// The network returns: every transfer it cut is sent again whole.
    public func networkComesBack() {
        let starts = state.withLock { state in
            state.network = true
            return state.tasks.indices.filter { state.tasks[$0].phase == .waitingForNetwork }.compactMap {
                state.start($0)
            }
        }
        for run in starts { send(run) }
    }

    // MARK: - What a test reads

    /// Every task the app's sessions made, in the order they were made.
    public var tasks: [TaskRecord] {
        state.withLock { state in
            state.tasks.map {
                TaskRecord(identifier: $0.identifier, description: $0.description, phase: $0.phase, sends: $0.sends)
            }
        }
    }

    /// Every time the system woke or launched the app for a session, in
    /// order.
    public var wakes: [Wake] { state.withLock { $0.wakes } }

    // MARK: - Sessions' calls

    fileprivate func upload(
        _ request: URLRequest, fromFile file: URL, description: String, in session: Session
    ) throws(Refusal) {
        guard request.httpBody == nil, request.httpBodyStream == nil else { throw .bodyNotAFile(task: description) }
        let (run, delay, index) = try state.withLock { state throws(Refusal) -> (Run?, Duration?, Int) in
            guard state.isLive(session) else { throw .sessionInvalidated(session.identifier) }
            guard
                !state.tasks.contains(where: {
                    $0.identifier == session.identifier && $0.description == description && $0.phase != .ended
                })
            else { throw .descriptionInUse(description) }
            let index = state.tasks.count
            state.tasks.append(
                Transfer(
                    identifier: session.identifier, session: session.serial, description: description, request: request,
                    file: file))
            // The app's code goes on in this process while it is
            // "suspended": a task it makes then is one it would make when
            // it next runs, in the background.
            guard state.app == .background || state.app == .suspended, state.delay > .zero else {
                return (state.start(index), nil, index)
            }
            return (nil, state.delay, index)
        }
        send(run)
        guard let delay else { return }
        // Scheduled outside the lock: the queue may run it at once.
        let deferral = queue.enqueue(after: delay) { [weak self] in
            guard let self else { return }
            send(state.withLock { $0.tasks[index].phase == .waiting ? $0.start(index) : nil })
        }
        state.withLock { state in
            if state.tasks[index].phase == .waiting { state.tasks[index].deferral = deferral }
        }
    }

    /// Hands `run` to the session that sends the transfers; cancels it
    /// again if it was cut meanwhile.
    private func send(_ run: Run?) {
        guard let run, let transfers = state.withLock({ $0.transfers }) else { return }
        transfers.upload(run.request, fromFile: run.file, description: String(run.number))
        if state.withLock({ $0.runs[run.number] == nil }) {
            transfers.cancel(description: String(run.number))
        }
    }

    fileprivate func cancel(description: String, in session: Session) -> Bool {
        let cut = state.withLock { state -> [Int]? in
            // The app that made a session it no longer has is gone: it
            // cancels nothing.
            guard state.isLive(session),
                let index = state.tasks.indices.last(where: {
                    state.tasks[$0].identifier == session.identifier && state.tasks[$0].description == description
                        && state.tasks[$0].phase != .ended
                })
            else { return nil }
            let cut = state.end(index)
            route(
                [.completed(task: description, response: nil, error: URLError(.cancelled), bodySize: 0)],
                of: state.tasks[index], &state)
            return cut
        }
        guard let cut else { return false }
        cancel(runs: cut)
        return true
    }

    fileprivate func getAllTasks(in session: Session, _ body: @escaping @Sendable ([String]) -> Void) {
        let running = state.withLock { state in
            state.tasks.filter {
                $0.identifier == session.identifier && $0.phase != .ended && state.invalidated[$0.session] == nil
            }.map(\.description)
        }
        delivery.async { body(running) }
    }

    fileprivate func invalidate(_ session: Session) {
        state.withLock { state in
            // Its tasks go on, and tell their events to it, not to a session
            // made later with its identifier.
            guard state.isLive(session), let live = state.sessions.removeValue(forKey: session.identifier) else {
                return
            }
            state.invalidated[session.serial] = live
        }
    }

    // MARK: - The transfers' events

    fileprivate func transfer(_ run: Int, didSendBodyBytes sent: Int64) {
        state.withLock { state in
            guard let index = state.runs[run] else { return }
            let task = state.tasks[index]
            guard case .now(let events) = state.target(of: task) else { return }
            deliver([.sent(task: task.description, bytes: sent)], to: events)
        }
    }

    fileprivate func transfer(_ run: Int, didReceive data: Data) {
        state.withLock { state in
            guard let index = state.runs[run] else { return }
            state.tasks[index].answer.append(data)
        }
    }

    fileprivate func transfer(_ run: Int, didCompleteWith response: URLResponse?, error: (any Error)?, bodySize: Int64)
    {
        state.withLock { state in
            guard let index = state.runs.removeValue(forKey: run) else { return }
            let task = state.tasks[index]
            state.tasks[index].phase = .ended
            state.tasks[index].run = nil
            var events: [Event] = task.answer.isEmpty ? [] : [.received(task: task.description, data: task.answer)]
            events.append(.completed(task: task.description, response: response, error: error, bodySize: bodySize))
            route(events, of: task, &state)
            wakeWhereDue(&state)
        }
    }

    // MARK: - Telling the app

    /// Tells `events` of `task` to the app's session that hears them now,
    /// else holds them for its identifier's next session (or drops them,
    /// when the session that made it was invalidated).
    private func route(_ events: [Event], of task: Transfer, _ state: inout State) {
        switch state.target(of: task) {
        case .now(let target): deliver(events, to: target)
        case .held: state.held[task.identifier, default: []] += events
        case .dropped: break
        }
    }

    /// Tells the app's session of `identifier` what was held for it, if it
    /// can hear it, and that it has heard all when the system woke the app
    /// for it.
    private func flush(_ identifier: String, _ state: inout State) {
        guard let target = state.deliverable(identifier) else { return }
        var events = state.held.removeValue(forKey: identifier) ?? []
        if state.waking.remove(identifier) != nil { events.append(.finishedEvents) }
        deliver(events, to: target)
    }

    /// Wakes or launches the app in the background for each session whose
    /// tasks have all ended while it was suspended or terminated, with
    /// events held for it.
    private func wakeWhereDue(_ state: inout State) {
        guard state.app == .suspended || state.app == .terminated else { return }
        let due = state.held.keys.filter { identifier in
            !state.waking.contains(identifier) && !(state.held[identifier] ?? []).isEmpty
                && !state.tasks.contains { $0.identifier == identifier && $0.phase != .ended }
        }
        guard !due.isEmpty else { return }
        state.app = .background
        state.delay = state.delay == .zero ? state.firstDelay : state.delay * 2
        var calls: [@Sendable () -> Void] = []
        for identifier in due.sorted() {
            state.waking.insert(identifier)
            let wake = state.wakes.count
            state.wakes.append(Wake(identifier: identifier, completionHandlerCalls: 0))
            if let handler = state.launchHandler {
                calls.append { handler(identifier) { [weak self] in self?.completionHandlerCalled(wake) } }
            }
        }
        // The handler is called first, then the app's session (a live one,
        // or the one the handler makes) hears the events.
        let launches = calls
        delivery.async { for call in launches { call() } }
        for identifier in due { flush(identifier, &state) }
    }

    /// The app called the completion handler of wake number `wake`: the
    /// first call suspends it again.
    private func completionHandlerCalled(_ wake: Int) {
        state.withLock { state in
            state.wakes[wake].completionHandlerCalls += 1
            guard state.wakes[wake].completionHandlerCalls == 1, state.app == .background, state.waking.isEmpty
            else { return }
            state.app = .suspended
            wakeWhereDue(&state)
        }
    }

    /// Tells `events` to `target` on the delivery queue, in order.
    private func deliver(_ events: [Event], to target: any BackgroundSessionEvents) {
        guard !events.isEmpty else { return }
        delivery.async {
            for event in events {
                switch event {
                case .sent(let task, let bytes):
                    target.task(task, didSendBodyBytes: bytes)
                case .received(let task, let data):
                    target.task(task, didReceive: data)
                case .completed(let task, let response, let error, let bodySize):
                    target.task(task, didCompleteWith: response, error: error, bodySize: bodySize)
                case .finishedEvents:
                    target.sessionDidFinishEvents()
                }
            }
        }
    }

    /// Cancels the transfers of `runs`, whose events no longer count.
    private func cancel(runs: [Int]) {
        guard !runs.isEmpty, let transfers = state.withLock({ $0.transfers }) else { return }
        for run in runs { transfers.cancel(description: String(run)) }
    }
}

extension TestBackgroundSystem {
    /// A session of the app's, on the system.
    package struct Session: BackgroundSession {
        fileprivate let system: TestBackgroundSystem
        /// The session's identifier.
        package let identifier: String
        /// Tells this session from one made later with its identifier.
        fileprivate let serial: Int

        package func upload(_ request: URLRequest, fromFile file: URL, description: String) throws {
            try system.upload(request, fromFile: file, description: description, in: self)
        }

        @discardableResult
        package func cancel(description: String) -> Bool {
            system.cancel(description: description, in: self)
        }

        package func getAllTasks(_ body: @escaping @Sendable ([String]) -> Void) {
            system.getAllTasks(in: self, body)
        }

        package func finishTasksAndInvalidate() {
            system.invalidate(self)
        }
    }

    /// One event for an app's session.
    private enum Event: Sendable {
        case sent(task: String, bytes: Int64)
        case received(task: String, data: Data)
        case completed(task: String, response: URLResponse?, error: (any Error)?, bodySize: Int64)
        case finishedEvents
    }

    /// One transfer of a task: its request sent whole.
    private struct Run: Sendable {
        let number: Int
        /// The task's index.
        let task: Int
        let request: URLRequest
        let file: URL
    }

    /// One task, as the system carries it.
    private struct Transfer {
        let identifier: String
        /// The serial number of the session that made it.
        let session: Int
        let description: String
        let request: URLRequest
        let file: URL
        var phase = TaskRecord.Phase.waiting
        /// The transfer that sends it now, while running.
        var run: Int?
        var sends = 0
        /// The answer so far, told with its end.
        var answer = Data()
        var deferral: DelayedWork?
    }

    /// Where an event goes.
    private enum Target {
        /// To the app's session that hears it now.
        case now(any BackgroundSessionEvents)
        /// Held for the app's next session of its identifier.
        case held
        /// Nowhere: its session was invalidated, and is gone or not heard.
        case dropped
    }

    /// A session of the app's that is live: its events held weakly, as the
    /// app's objects are the app's.
    private struct AppSession {
        let serial: Int
        weak var events: (any BackgroundSessionEvents)?
    }

    private struct State {
        var app = AppState.foreground
        /// The live session of each identifier.
        var sessions: [String: AppSession] = [:]
        /// The sessions invalidated, by serial number: their tasks tell
        /// their events to them.
        var invalidated: [Int: AppSession] = [:]
        var tasks: [Transfer] = []
        /// The task each transfer in flight sends, by its number.
        var runs: [Int: Int] = [:]
        var nextRun = 0
        var nextSession = 0
        /// What the app's sessions have not heard yet, by identifier.
        var held: [String: [Event]] = [:]
        /// The identifiers the app was woken for, whose session has not
        /// heard every event yet.
        var waking: Set<String> = []
        var wakes: [Wake] = []
        var launchHandler: LaunchHandler?
        /// The rate limiter's delay after the first wake or launch.
        let firstDelay: Duration
        /// The delay of a task made in the background now.
        var delay = Duration.zero
        var network = true
        var transfers: URLSessionBackgroundSession?
        /// What the transfers tell; held here, as the session holds it
        /// weakly.
        var engine: Engine?

        init(firstDelay: Duration) {
            self.firstDelay = firstDelay
        }

        func isLive(_ session: Session) -> Bool {
            sessions[session.identifier]?.serial == session.serial
        }

        /// Whether the app hears events now: it runs.
        var hears: Bool { app == .foreground || app == .background }

        /// Where the events of `task` go now.
        func target(of task: Transfer) -> Target {
            if let invalidated = invalidated[task.session] {
                guard hears, let events = invalidated.events else { return .dropped }
                return .now(events)
            }
            return deliverable(task.identifier).map { .now($0) } ?? .held
        }

        /// The app's session of `identifier`, if the app can hear its
        /// events now.
        func deliverable(_ identifier: String) -> (any BackgroundSessionEvents)? {
            hears ? sessions[identifier]?.events : nil
        }

        /// Starts sending task `index` (whole), or leaves it waiting for
        /// the network; returns the transfer to hand it to the session
        /// that sends them (``TestBackgroundSystem/send(_:)``).
        mutating func start(_ index: Int) -> Run? {
            guard network else {
                tasks[index].phase = .waitingForNetwork
                return nil
            }
            nextRun += 1
            let run = nextRun
            runs[run] = index
            tasks[index].phase = .running
            tasks[index].run = run
            tasks[index].sends += 1
            tasks[index].answer = Data()
            return Run(number: run, task: index, request: tasks[index].request, file: tasks[index].file)
        }

        /// Ends task `index`; returns the transfer to cancel, if one was
        /// in flight.
        mutating func end(_ index: Int) -> [Int] {
            tasks[index].phase = .ended
            tasks[index].deferral?.cancel()
            guard let run = tasks[index].run else { return [] }
            tasks[index].run = nil
            runs[run] = nil
            return [run]
        }
    }

    /// What the in-process session that sends the transfers tells.
    private final class Engine: BackgroundSessionEvents {
        weak let system: TestBackgroundSystem?

        init(system: TestBackgroundSystem) {
            self.system = system
        }

        func task(_ task: String, didSendBodyBytes sent: Int64) {
            guard let run = Int(task) else { return }
            system?.transfer(run, didSendBodyBytes: sent)
        }

        func task(_ task: String, didReceive data: Data) {
            guard let run = Int(task) else { return }
            system?.transfer(run, didReceive: data)
        }

        func task(_ task: String, didCompleteWith response: URLResponse?, error: (any Error)?, bodySize: Int64) {
            guard let run = Int(task) else { return }
            system?.transfer(run, didCompleteWith: response, error: error, bodySize: bodySize)
        }

        func sessionDidFinishEvents() {}
    }
}
