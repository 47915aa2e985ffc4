import Foundation
import JobKit

/// The MD5s of a multipart upload's parts, found in order on one thread at
/// a time, a few parts ahead of the sends that ask for them: when a part's
/// turn comes, its digest is ready, and the link never waits for a part to
/// be read and hashed (but the first).
///
/// Hashing stops `window` parts past the last part asked for, so a part is
/// read for its digest shortly before it is read to be sent (the file's
/// pages are still in memory), and an upload that ends early leaves at
/// most that many parts hashed in vain.
final class AheadDigests: Sendable {
    private struct State: Sendable {
        /// Digests found and not yet asked for, by index.
        var found: [Int: Result<Data, UploadError>] = [:]
        /// Those who asked for a digest not yet found, by index.
        var waiting: [Int: [@Sendable (Result<Data, UploadError>) -> Void]] = [:]
        /// The next part to hash.
        var next = 0
        /// Hash no part at or past this index yet.
        var limit: Int
        /// A part is being hashed.
        var hashing = false

        /// Whether the next part is to be hashed now; marks it as being
        /// hashed if so.
        mutating func startsNext(count: Int) -> Bool {
            guard !hashing, next < count, next < limit else { return false }
            hashing = true
            return true
        }
    }

    private let bodies: [HTTPBody]
    private let window: Int
    private let state: Lock<State>

    /// Digests of `bodies`, hashed at most `window` past the last asked
    /// for.
    init(_ bodies: [HTTPBody], window: Int) {
        self.bodies = bodies
        self.window = max(window, 1)
        state = Lock(State(limit: max(window, 1)))
    }

    /// A job that finishes with the MD5 of body `index`. Perform it once:
    /// a digest is handed out to one performance.
    func digest(_ index: Int) -> Job<Data> {
        Job { [self] controller in
            let (ready, starts) = state.withLock { state -> (Result<Data, UploadError>?, Bool) in
                state.limit = max(state.limit, index + 1 + window)
                let ready = state.found.removeValue(forKey: index)
                if ready == nil {
                    state.waiting[index, default: []].append { controller.complete(with: $0) }
                }
                return (ready, state.startsNext(count: bodies.count))
            }
            if starts { hashNext() }
            if let ready { controller.complete(with: ready) }
        }
    }

    /// Hashes the next part on a thread of its own, then the one after
    /// while the window allows.
    private func hashNext() {
        DispatchQueue.global(qos: .utility).async { [self] in
            let index = state.withLock { $0.next }
            let result = Result { () throws(UploadError) in try bodies[index].digest(MD5.self) }
            let (waiters, starts) = state.withLock { state in
                state.next += 1
                state.hashing = false
                let waiters = state.waiting.removeValue(forKey: index) ?? []
                if waiters.isEmpty { state.found[index] = result }
                return (waiters, state.startsNext(count: bodies.count))
            }
            for waiter in waiters { waiter(result) }
            if starts { hashNext() }
        }
    }
}
