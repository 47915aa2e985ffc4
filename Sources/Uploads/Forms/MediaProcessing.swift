import Foundation
import JobKit

/// How a server says that a medium it accepted is ready to use, and how
/// long to wait for it.
///
/// Some servers accept an upload before the medium can be used: Mastodon
/// answers a video's `POST /api/v2/media` with `202 Accepted` and
/// `"url": null`, its `GET /api/v1/media/:id` answers `206` while the
/// video is processed and `200` once it is ready, and a post that names it
/// earlier is refused. A ``MultipartFormUploader`` given a
/// `MediaProcessing` ends each upload only once the medium is ready, so its
/// receipt means "ready to attach":
///
/// ```swift
/// let uploader = try MultipartFormUploader(
///     headers: ["Authorization": "Bearer \(token)"], processing: .mastodon)
/// ```
///
/// After the upload, the uploader asks ``statusURL`` where to ask; `nil`
/// means ready at once. Otherwise it waits ``firstWait``, sends a `GET`
/// there with its headers, and asks ``isReady`` of each answer in
/// 200...299, waiting twice as long before each next question, up to
/// ``maximumWait``. An answer that can pass (a `503`, a lost connection)
/// is asked again at the next turn; any other failure fails the upload,
/// naming the file. Past ``timeLimit`` the upload fails with
/// ``UploadError/notProcessed(_:after:)``, which is not retried: the
/// server has the medium, and sending it again would store it twice. The
/// waits are on the queue the upload is performed on, so a `TestQueue`
/// runs them in virtual time, and cancelling the upload stops them.
public struct MediaProcessing: Sendable {
    /// Where to ask whether the medium an upload's answer describes is
    /// ready; `nil` when it is ready at once.
    public var statusURL: @Sendable (UploadReceipt) -> URL?
    /// Whether an answer (in 200...299) to the status request says the
    /// medium is ready; `false` while it is processed.
    public var isReady: @Sendable (UploadReceipt) -> Bool
    /// The wait before the first question; 1 second by default.
    public var firstWait: Duration
    /// The longest wait between two questions; 30 seconds by default.
    public var maximumWait: Duration
    /// How long after the upload the medium may take to be ready; 10
    /// minutes by default.
    public var timeLimit: Duration

    /// Creates a way to wait for media.
    /// - Parameters:
    ///   - firstWait: The wait before the first question; 1 second by
    ///     default.
    ///   - maximumWait: The longest wait between two questions, each
    ///     twice the one before; 30 seconds by default.
    ///   - timeLimit: How long the medium may take to be ready; 10
    ///     minutes by default.
    ///   - statusURL: Where to ask, from the upload's receipt; `nil` when
    ///     the medium is ready at once.
    ///   - isReady: Whether an answer says the medium is ready.
    public init(
        firstWait: Duration = .seconds(1),
        maximumWait: Duration = .seconds(30),
        timeLimit: Duration = .seconds(600),
        statusURL: @escaping @Sendable (UploadReceipt) -> URL?,
        isReady: @escaping @Sendable (UploadReceipt) -> Bool
    ) {
        self.firstWait = firstWait
        self.maximumWait = maximumWait
        self.timeLimit = timeLimit
        self.statusURL = statusURL
        self.isReady = isReady
    }

    /// Mastodon's API, and the servers that speak it: a medium answered
    /// `202 Accepted` is asked for at `/api/v1/media/:id` (the `id` of the
    /// answer's JSON, on the same server) until it answers `200 OK`
    /// rather than `206 Partial Content`; one answered `200 OK` is ready.
    public static var mastodon: MediaProcessing {
        MediaProcessing(
            statusURL: { receipt in
                guard receipt.status == 202,
                    let object = try? JSONSerialization.jsonObject(with: receipt.body) as? [String: Any],
                    let id = object["id"] as? String ?? (object["id"] as? Int).map(String.init),
                    let path = id.addingPercentEncoding(withAllowedCharacters: .alphanumerics)
                else { return nil }
                return URL(string: "/api/v1/media/\(path)", relativeTo: receipt.destination)?.absoluteURL
            },
            isReady: { $0.status == 200 })
    }

    /// The wait before question `number` (from 0): ``firstWait`` doubled
    /// `number` times, at most ``maximumWait``.
    func wait(before number: Int) -> Duration {
        var wait = firstWait
        for _ in 0..<min(number, 62) where wait < maximumWait {
            wait *= 2
        }
        return min(wait, maximumWait)
    }

    /// Throws when these waits cannot be made: one that is negative, or a
    /// time limit that is not above zero.
    func validate() throws(InvalidOptionError) {
        try InvalidOptionError.check(firstWait >= .zero, "firstWait", "must not be negative, got \(firstWait)")
        try InvalidOptionError.check(maximumWait >= .zero, "maximumWait", "must not be negative, got \(maximumWait)")
        try InvalidOptionError.check(positive: timeLimit, "timeLimit")
    }

    /// A job that waits until the medium that `receipt` answered, sent
    /// from `filename`, is ready, asking with `check` (a `GET` of the URL
    /// it is given), and finishes with the answer that said so (naming
    /// `filename`); at once with `receipt` when ``statusURL`` gives none.
    func waitUntilReady(
        _ receipt: UploadReceipt,
        filename: String?,
        check: @escaping @Sendable (URL) -> Job<UploadReceipt>
    ) -> Job<UploadReceipt> {
        guard let url = statusURL(receipt) else { return .succeeded(receipt) }
        let last = LastAnswer(receipt)
        let limit = timeLimit
        return ask(url, number: 0, filename: filename, last: last, check: check)
            .timeout(after: limit)
            .mapError { error in
                error as? JobError == .timedOut ? UploadError.notProcessed(last.answer, after: limit) : error
            }
            .named("wait until \(filename ?? url.lastPathComponent) is processed")
    }

    /// Question `number`, after its wait, and the next ones until one says
    /// the medium is ready.
    private func ask(
        _ url: URL,
        number: Int,
        filename: String?,
        last: LastAnswer,
        check: @escaping @Sendable (URL) -> Job<UploadReceipt>
    ) -> Job<UploadReceipt> {
        let question = Job<Void>.sleep(for: wait(before: number)).then { check(url) }
        return Job { [self] controller in
            controller.perform(question) { outcome in
                switch outcome {
                case .success(var answer):
                    answer.filename = filename
                    last.answer = answer
                    if isReady(answer) {
                        controller.finish(with: answer)
                        return
                    }
                case .failure(let error) where RetryPolicy.isTransient(error):
                    break
                case .failure(UploadError.httpStatus(var answer)):
                    answer.filename = filename
                    controller.fail(with: UploadError.httpStatus(answer))
                    return
                case .failure(let error):
                    controller.fail(with: error)
                    return
                }
                controller.perform(ask(url, number: number + 1, filename: filename, last: last, check: check)) {
                    controller.complete(with: $0)
                }
            }
        }
    }
}

/// The last answer a wait for a medium got: what its error shows when the
/// time is up.
private final class LastAnswer: Sendable {
    private let lock: Lock<UploadReceipt>

    init(_ answer: UploadReceipt) {
        lock = Lock(answer)
    }

    var answer: UploadReceipt {
        get { lock.withLock { $0 } }
        set { lock.withLock { $0 = newValue } }
    }
}
