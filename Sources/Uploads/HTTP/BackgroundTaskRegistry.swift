import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The tasks of one background session as a ``BackgroundTransport`` knows
/// them: the requests it sent in this launch, and the tasks an earlier
/// launch left (orphans), which the session tells of once it is made
/// again: those still running (``BackgroundSession/getAllTasks(_:)``), and
/// the events of those that ended while the app was gone.
///
/// A request named the same in every launch (``HTTPRequest/name``) is
/// admitted once the session listed its tasks:
/// - an orphan of its name still running, or that ended with an answer in
///   200...299, is joined (by one request only): its progress and answer
///   are the request's, and nothing is sent again;
/// - while an orphan of its upload (another request of it: a tus `PATCH`,
///   an S3 part) still runs, joined or not, it waits for it to end, so
///   that what it asks the storage counts what that orphan stored;
/// - otherwise it is sent, as a task whose description is its name and a
///   mark of its own. An orphan of its name that failed or was cancelled
///   (a force-quit's `-999`) is not an answer: the request is sent again.
///   Once a request of an upload is sent, the orphans of that upload that
///   ended are dropped: what they stored, the storage tells.
///
/// Each event of a task reaches its request, or else its orphan.
///
/// It holds the completion handler the app delegate was given for the
/// session (``BackgroundCompletionHandlers``) until the session told every
/// event it held and the owner settled what each task's end made of its
/// upload (``settled(_:)``), then calls it, once, on the main actor.
final class BackgroundTaskRegistry: BackgroundSessionEvents {
    /// What a request named in every launch is to do.
    enum Admission: Sendable {
        /// Join the task of this description, running or ended.
        case join(String)
        /// Send a new task of this description.
        case send(String)
    }

    /// How a task ended, as its session told.
    struct End: Sendable {
        var response: URLResponse?
        var error: (any Error)?
        var bodySize: Int64

        /// Whether it ended with an answer in 200...299.
        var answered: Bool {
            error == nil && (response as? HTTPURLResponse).map { (200...299).contains($0.statusCode) } == true
        }
    }

    private struct Request {
        var answer: TaskAnswer
        /// The body's file.
        var file: URL
        /// Whether its task is an orphan it joined, which holds back the
        /// other requests of its upload until it ends.
        var joined = false
    }

    /// A task an earlier launch left.
    private struct Orphan {
        /// The body bytes it sent, as last told.
        var sent: Int64 = 0
        /// The start of its answer.
        var answer = Data()
        /// Whether bytes of its answer came past ``orphanAnswerLimit``,
        /// and were not kept.
        var answerCut = false
        /// How it ended, once it did.
        var end: End?
        /// Whether a request was admitted to join it.
        var claimed = false
    }

    private struct Waiter {
        let number: Int
        let name: String
        let admit: @Sendable (Admission) -> Void
    }

    private struct State {
        /// Whether the session listed its tasks.
        var listed = false
        var requests: [String: Request] = [:]
        var orphans: [String: Orphan] = [:]
        /// The tasks of requests cancelled in this launch, whose events no
        /// longer count.
        var forgotten: Set<String> = []
        var waiters: [Waiter] = []
        var nextWaiter = 0
        /// The completion handler of the app delegate, until it is called.
        var handler: (@MainActor () -> Void)?
        /// Tells a handler from the ones held before it.
        var handlerNumber = 0
        /// Whether the session told every event it held since the last
        /// handler was called.
        var finishedEvents = false
        /// The uploads a request of which heard its task's end, whose
        /// owner has not said what the end made of them.
        var unsettled: Set<String> = []
        /// Calls the handler once its time limit passed.
        var limit: DelayedWork?
        /// Tells whether the owner still runs an upload, once it can.
        var runs: (@Sendable (String) -> Bool)?
        /// Whether the owner closed: a handler is called at once.
        var closed = false
    }

    /// The most bytes of an orphan's answer kept until a request joins it.
    static let orphanAnswerLimit = 1 << 20
    /// The longest a completion handler waits, once a registry holds it,
    /// for the session's events and the uploads they concern: iOS gives an
    /// app woken in the background about 30 seconds.
    static let handlerTimeLimit = Duration.seconds(20)

    private let state = Lock(State())
    /// Where the part files are, each named after its task.
    let parts: URL
    /// The part files an earlier launch left, found before this one wrote
    /// any.
    private let earlierParts: [URL]
    /// Runs the time limit of a completion handler.
    private let queue: any JobQueue
    /// Calls a completion handler.
    private let calling: @Sendable (_ handler: @escaping @MainActor () -> Void) -> Void

    /// A registry of the tasks whose part files are in `parts`, whose
    /// completion handlers' time limits run on `queue`, and which are
    /// called by `calling`: on the main actor, as UIKit asks.
    init(
        parts: URL,
        queue: any JobQueue = DispatchQueue.global(),
        calling: @escaping @Sendable (_ handler: @escaping @MainActor () -> Void) -> Void = { handler in
            Task { @MainActor in handler() }
        }
    ) {
        self.parts = parts
        self.queue = queue
        self.calling = calling
        let files = (try? FileManager.default.contentsOfDirectory(at: parts, includingPropertiesForKeys: nil)) ?? []
        earlierParts = files.filter { $0.pathExtension == "part" }
    }

    // MARK: - Names

    /// A new task description for the request named `name`.
    static func newDescription(for name: String) -> String {
        "\(name) @\(UUID().uuidString.prefix(8))"
    }

    /// The name of the request a task of `description` carries.
    static func name(of description: String) -> String {
        guard let mark = description.range(of: " @", options: .backwards) else { return description }
        return String(description[..<mark.lowerBound])
    }

    /// Whether `description` is that of a named request's task
    /// (``newDescription(for:)``), not one of its own.
    static func isNamed(_ description: String) -> Bool {
        description.range(of: " @", options: .backwards) != nil
    }

    /// The upload whose request the task `description` carries.
    static func upload(ofTask description: String) -> Substring {
        upload(of: name(of: description))
    }

    /// The upload a request named `name` is part of (an upload's name has
    /// no `": "`, see ``HTTPRequest/name``).
    static func upload(of name: String) -> Substring {
        guard let separator = name.range(of: ": ") else { return Substring(name) }
        return name[..<separator.lowerBound]
    }

    // MARK: - Admission

    /// Calls `admit`, once, with what the request named `name` is to do,
    /// once the session has listed its tasks and no orphan of its upload
    /// runs but one of its name; returns what gives up waiting.
    func admit(_ name: String, _ admit: @escaping @Sendable (Admission) -> Void) -> @Sendable () -> Void {
        let (number, admitted) = state.withLock { state in
            state.nextWaiter += 1
            state.waiters.append(Waiter(number: state.nextWaiter, name: name, admit: admit))
            return (state.nextWaiter, Self.admitted(&state))
        }
        Self.tell(admitted)
        callHandlerIfSettled()
        return { [self] in
            state.withLock { state in state.waiters.removeAll { $0.number == number } }
        }
    }

    /// The waiters that may go now, each with what to do, removed from the
    /// waiting.
    private static func admitted(_ state: inout State) -> [(Waiter, Admission)] {
        guard state.listed else { return [] }
        var admitted: [(Waiter, Admission)] = []
        var waiting: [Waiter] = []
        for waiter in state.waiters {
            if let admission = admission(of: waiter.name, &state) {
                admitted.append((waiter, admission))
            } else {
                waiting.append(waiter)
            }
        }
        state.waiters = waiting
        return admitted
    }

    /// What the request named `name` is to do now; `nil` while it waits.
    private static func admission(of name: String, _ state: inout State) -> Admission? {
        let named = state.orphans.filter { !$0.value.claimed && Self.name(of: $0.key) == name }
        if let joined = named.first(where: { $0.value.end == nil })
            ?? named.first(where: { $0.value.end?.answered == true })
        {
            state.orphans[joined.key]?.claimed = true
            // Its answer is the request's now.
            if joined.value.end != nil { state.unsettled.insert(String(upload(of: name))) }
            return .join(joined.key)
        }
        let own = upload(of: name)
        let ofUpload = { (description: String) in upload(ofTask: description) == own }
        let uploadRuns =
            state.orphans.contains { $0.value.end == nil && ofUpload($0.key) }
            || state.requests.contains { $0.value.joined && ofUpload($0.key) }
        guard !uploadRuns else { return nil }
        // Failed or cancelled (sent again), or answered to a request the
        // storage now answers for.
        for (description, orphan) in state.orphans where orphan.end != nil && !orphan.claimed && ofUpload(description) {
            state.orphans[description] = nil
        }
        // Until the request is in the session's hands (``wentOn(_:)``),
        // its upload holds the completion handler back.
        state.unsettled.insert(String(own))
        return .send(newDescription(for: name))
    }

    private static func tell(_ admitted: [(Waiter, Admission)]) {
        for (waiter, admission) in admitted { waiter.admit(admission) }
    }

    /// The session listed `running`, the tasks it has that have not
    /// ended: each an orphan unless this launch made it. The part files an
    /// earlier launch left for any other task are removed.
    func listed(_ running: [String]) {
        let admitted = state.withLock { state in
            for description in running
            where state.requests[description] == nil && state.orphans[description] == nil
                && !state.forgotten.contains(description)
            {
                state.orphans[description] = Orphan()
            }
            state.listed = true
            return Self.admitted(&state)
        }
        let kept = Set(running.map { FileBodyTransport.partFile(for: $0, in: parts).lastPathComponent })
        for file in earlierParts where !kept.contains(file.lastPathComponent) {
            try? FileManager.default.removeItem(at: file)
        }
        Self.tell(admitted)
        callHandlerIfSettled()
    }

    // MARK: - Requests

    /// Routes the events of the task `description` to `answer`, whose
    /// body is `file`: a new task, or an orphan joined, whose progress and
    /// answer so far `answer` is told at once, and whose end, if it ended,
    /// completes it.
    func start(_ description: String, _ answer: TaskAnswer, file: URL) {
        var answer = answer
        let orphan = state.withLock { state in
            let orphan = state.orphans.removeValue(forKey: description)
            if let orphan {
                answer.received(orphan.answer, cutAt: orphan.answerCut ? Self.orphanAnswerLimit : nil)
            }
            if orphan?.end == nil {
                state.requests[description] = Request(answer: answer, file: file, joined: orphan != nil)
            }
            return orphan
        }
        guard let orphan else { return }
        answer.sent(orphan.sent)
        if let end = orphan.end {
            Self.complete(Request(answer: answer, file: file), end, fileFailure: nil)
        }
    }

    /// Removes the part file of the task `description`, if it has one.
    func removePart(of description: String) {
        try? FileManager.default.removeItem(at: FileBodyTransport.partFile(for: description, in: parts))
    }

    /// Drops `description`: its events no longer matter.
    func forget(_ description: String) {
        let admitted = state.withLock { state -> [(Waiter, Admission)] in
            guard let request = state.requests.removeValue(forKey: description) else { return [] }
            state.forgotten.insert(description)
            // A joined task given up no longer holds its upload back.
            return request.joined ? Self.admitted(&state) : []
        }
        Self.tell(admitted)
    }

    /// Completes `request` with the outcome of its task's `end`, its file
    /// found missing or shrunk as `fileFailure` says.
    private static func complete(_ request: Request, _ end: End, fileFailure: UploadError?) {
        let size = request.answer.size
        if end.bodySize > 0, end.bodySize != size {
            // The session read the file as it was when the task started,
            // not as the request was made.
            let reason = "it changed from \(size) to \(end.bodySize) bytes before it was sent"
            request.answer.complete(.failure(.unreadableFile(request.file, reason: reason)))
            return
        }
        request.answer.ended(response: end.response, error: end.error, fileFailure: fileFailure)
    }

    // MARK: - The session's events

    func task(_ task: String, didSendBodyBytes sent: Int64) {
        let request = state.withLock { state -> Request? in
            if let request = state.requests[task] { return request }
            if !state.forgotten.contains(task) { state.orphans[task, default: Orphan()].sent = sent }
            return nil
        }
        request?.answer.sent(sent)
    }

    func task(_ task: String, didReceive data: Data) {
        state.withLock { state in
            if state.requests[task] != nil {
                state.requests[task]?.answer.received(data)
            } else if !state.forgotten.contains(task) {
                let room = max(0, Self.orphanAnswerLimit - (state.orphans[task]?.answer.count ?? 0))
                state.orphans[task, default: Orphan()].answer.append(data.prefix(room))
                if data.count > room { state.orphans[task]?.answerCut = true }
            }
        }
    }

    func task(_ task: String, didCompleteWith response: URLResponse?, error: (any Error)?, bodySize: Int64) {
        let end = End(response: response, error: error, bodySize: bodySize)
        let (request, admitted) = state.withLock { state -> (Request?, [(Waiter, Admission)]) in
            // A task's end is one of a new wake's events (the system wakes
            // the app once tasks ended): a session that told its events
            // before tells more.
            state.finishedEvents = false
            if let request = state.requests.removeValue(forKey: task) {
                if Self.isNamed(task) { state.unsettled.insert(String(Self.upload(ofTask: task))) }
                return (request, request.joined ? Self.admitted(&state) : [])
            }
            guard state.forgotten.remove(task) == nil else { return (nil, []) }
            state.orphans[task, default: Orphan()].end = end
            return (nil, Self.admitted(&state))
        }
        // A body file that went missing or shrank fails its task: say so,
        // rather than what the session says (read before the part file,
        // which has no use once its task ended, is removed).
        let fileFailure = request.flatMap { request in
            end.error == nil ? nil : BoundedFileStream.failure(of: request.file, upTo: request.answer.size)
        }
        removePart(of: task)
        if let request {
            Self.complete(request, end, fileFailure: fileFailure)
        }
        Self.tell(admitted)
        callHandlerIfSettled()
    }

    func sessionDidFinishEvents() {
        state.withLock { $0.finishedEvents = true }
        callHandlerIfSettled()
    }

    // MARK: - The completion handler

    /// A handler taken to be called, and the time limit to cancel.
    private typealias Call = (handler: @MainActor () -> Void, limit: DelayedWork?)

    /// Holds `handler`, the app delegate's for this session, to call once
    /// the session told its events and they are settled, or once
    /// ``handlerTimeLimit`` passed; a handler held before, not called
    /// yet, is called now: the system gave a new one.
    func hold(_ handler: @escaping @MainActor () -> Void) {
        let (earlier, number) = state.withLock { state -> (Call?, Int?) in
            let earlier = Self.takeHandler(&state)
            guard !state.closed else { return (earlier, nil) }
            state.handler = handler
            state.handlerNumber += 1
            return (earlier, state.handlerNumber)
        }
        call(earlier)
        guard let number else {
            call((handler, nil))
            return
        }
        let limit = queue.enqueue(after: Self.handlerTimeLimit) { [weak self] in
            self?.callHandler(number)
        }
        let held = state.withLock { state in
            guard state.handlerNumber == number, state.handler != nil else { return false }
            state.limit = limit
            return true
        }
        if !held { limit.cancel() }
        callHandlerIfSettled()
    }

    /// The owner tells, with `runs`, whether it still runs an upload of
    /// a given name (see ``HTTPRequest/name``), or starts it when its turn
    /// comes: the handler waits for an orphan that ended, and that no
    /// request joined yet, only when its upload is one the owner runs.
    func ownerRuns(_ runs: @escaping @Sendable (String) -> Bool) {
        state.withLock { $0.runs = runs }
        callHandlerIfSettled()
    }

    /// The request named `name` was handed to the session (or sent in
    /// process): its upload went on from what its tasks' ends made of it.
    func wentOn(_ name: String) {
        state.withLock { _ = $0.unsettled.remove(String(Self.upload(of: name))) }
        callHandlerIfSettled()
    }

    /// The owner recorded what the upload `upload` came to.
    func settled(_ upload: String) {
        state.withLock { _ = $0.unsettled.remove(upload) }
        callHandlerIfSettled()
    }

    /// Calls the handler held, if any, and any handed later, at once: its
    /// owner records nothing more.
    func close() {
        call(
            state.withLock { state in
                state.closed = true
                return Self.takeHandler(&state)
            })
    }

    /// Calls the handler held when the session told its events, every
    /// upload a request of which heard its task's end is settled, and no
    /// upload the owner runs has an orphan that ended unjoined.
    private func callHandlerIfSettled() {
        // The owner is asked outside the lock (it takes its own).
        let (orphaned, runs) = state.withLock { state -> (Set<String>, (@Sendable (String) -> Bool)?) in
            guard state.handler != nil, state.finishedEvents, state.unsettled.isEmpty else { return ([], nil) }
            return (Self.endedOrphanUploads(state), state.runs)
        }
        guard let runs, !orphaned.contains(where: runs) else { return }
        call(
            state.withLock { state in
                // What changed since is checked again by the change's own
                // call.
                let orphans = Self.endedOrphanUploads(state)
                guard state.finishedEvents, state.unsettled.isEmpty, orphans.isSubset(of: orphaned) else { return nil }
                return Self.takeHandler(&state)
            })
    }

    /// The uploads of the named tasks that ended while no request joined
    /// them.
    private static func endedOrphanUploads(_ state: State) -> Set<String> {
        let ended = state.orphans.filter { $0.value.end != nil && !$0.value.claimed && isNamed($0.key) }.keys
        return Set(ended.map { String(upload(ofTask: $0)) })
    }

    /// Calls the handler numbered `number` if it is still held: its time
    /// limit passed. What is not settled yet is left to the next launch,
    /// which finds it in the journal or asks the storage.
    private func callHandler(_ number: Int) {
        call(
            state.withLock { state in
                guard state.handlerNumber == number, state.handler != nil else { return nil }
                state.unsettled = []
                return Self.takeHandler(&state)
            })
    }

    /// Takes the handler held, if any, to be called: the events told
    /// before it are its own.
    private static func takeHandler(_ state: inout State) -> Call? {
        guard let handler = state.handler else { return nil }
        defer {
            state.handler = nil
            state.limit = nil
            state.finishedEvents = false
        }
        return (handler, state.limit)
    }

    /// Calls a handler taken.
    private func call(_ call: Call?) {
        guard let call else { return }
        call.limit?.cancel()
        calling(call.handler)
    }
}
