import Foundation
import JobKit
import JobKitTesting
import Uploads

/// A server double on a test's queue: each request takes `latency`, and
/// `answer` says how it ends from its destination and how many requests to
/// that destination came before it.
final class ScriptedServer: Uploader, Sendable {
    /// How a request ends.
    enum Answer: Sendable {
        case status(Int, retryAfter: Int? = nil)
        case offline
    }

    /// One request, when it came and how it ended.
    struct Request: Sendable {
        let destination: URL
        let at: Duration
        let answer: Answer

        var status: Int? {
            if case .status(let status, _) = answer { status } else { nil }
        }
    }

    let queue: TestQueue
    let latency: Duration
    private let answer: LockedValue<@Sendable (URL, Int) -> Answer>
    private let log = LockedValue<[Request]>([])

    /// Requests of one upload, one after another, each retried on its own,
    /// as the parts of an `S3Uploader`'s multipart upload are.
    let requestsPerUpload: Int

    init(
        queue: TestQueue, latency: Duration = .seconds(1), requestsPerUpload: Int = 1,
        answer: @escaping @Sendable (URL, Int) -> Answer
    ) {
        self.queue = queue
        self.latency = latency
        self.requestsPerUpload = requestsPerUpload
        self.answer = LockedValue(answer)
    }

    /// One request per upload, retried whole; or `requestsPerUpload`
    /// requests, each retried on its own.
    func upload(
        _ media: Media, attempts: UploadAttempts, progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        let request = attempts.retrying(upload(media, progress: progress), for: media)
        return (1..<max(requestsPerUpload, 1)).reduce(request) { job, _ in job.then { _ in request } }
    }

    /// Every request so far, in the order they came.
    var requests: [Request] { log.value }

    /// The times requests to `host` came.
    func times(toward host: String) -> [Duration] {
        requests.filter { $0.destination.host == host }.map(\.at)
    }

    /// Answers every later request with `answer`.
    func answer(_ answer: @escaping @Sendable (URL, Int) -> Answer) {
        self.answer.withValue { $0 = answer }
    }

    func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
        Job { [self] controller in
            let destination = media.destination
            let decide = answer.value
            let request = log.withValue { log in
                let request = Request(
                    destination: destination, at: queue.now,
                    answer: decide(destination, log.filter { $0.destination == destination }.count))
                log.append(request)
                return request
            }
            let timer = queue.enqueue(after: latency) {
                switch request.answer {
                case .offline:
                    controller.fail(with: UploadError.network(destination, URLError(.notConnectedToInternet)))
                case .status(let status, let retryAfter):
                    let headers = retryAfter.map { ["Retry-After": "\($0)"] } ?? [:]
                    let receipt = UploadReceipt(destination: destination, status: status, headers: headers)
                    if (200..<300).contains(status) {
                        controller.finish(with: receipt)
                    } else {
                        controller.fail(with: UploadError.httpStatus(receipt))
                    }
                }
            }
            controller.onCancel { timer.cancel() }
        }
    }
}
