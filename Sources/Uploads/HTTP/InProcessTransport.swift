import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends HTTP requests with one `URLSession` of its own, in this
/// process, each as a job: the transport every HTTP uploader has of its
/// own.
///
/// A file body is streamed with a `Content-Length` and nothing else
/// framing it (see ``URLSessionUploader``); errors and receipts name the
/// destination the caller gives, never the request's URL, whose query may
/// hold a signature.
final class InProcessTransport: HTTPTransport {
    private let session: URLSession
    private let delegate: URLSessionUploadDelegate

    init(configuration: URLSessionConfiguration) {
        delegate = URLSessionUploadDelegate()
        // Without a cache, which an upload's answer has no use for. With
        // one, FoundationNetworking looks a task's request up in it before
        // the task starts, and a cancel that waited for that look-up can
        // land after the task completed, which traps ("a task that in not
        // in the registry").
        let configuration = configuration.copy() as? URLSessionConfiguration ?? configuration
        configuration.urlCache = nil
        session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
    }

    deinit {
        // The session holds its delegate until it is invalidated.
        session.finishTasksAndInvalidate()
    }

    /// A job that sends `request` through this transport's session (see
    /// ``HTTPTransport/send(_:)``).
    ///
    /// A body that must not be sent twice (not
    /// ``HTTPRequest/resendable``) is streamed, so that the session cannot
    /// send it again by itself (see ``URLSessionUploadDelegate``).
    func send(_ call: HTTPRequest) -> Job<HTTPAnswer> {
        let (request, body, destination, resendable) = (call.urlRequest, call.body, call.destination, call.resendable)
        // The job holds the transport, not just its session: a transport
        // whose last owner let go while a job of it waited for its queue would
        // invalidate the session, and making the task would then crash
        // (FoundationNetworking traps on a task made by an invalidated
        // session).
        return Job { [self] controller in
            var request = request
            let task: URLSessionTask
            var files: [BodySegment]?
            var streamed: Data?
            switch resendable || body != .empty ? body : .data(Data()) {
            case .empty:
                task = session.dataTask(with: request)
            case .data(let data) where resendable:
                task = session.uploadTask(with: request, from: data)
            case .data(let data):
                // Streamed, so that it is sent once (see `resendable`).
                request.setValue(String(data.count), forHTTPHeaderField: "Content-Length")
                request.frameStreamedBodyByLengthAlone()
                task = session.uploadTask(withStreamedRequest: request)
                streamed = data
            case .file, .segments:
                // Streamed from disk as it is sent, framed by Content-Length
                // alone. (`uploadTask(with:fromFile:)` is not used: on Linux,
                // cancelling one mid-way crashes FoundationNetworking; a
                // `Data` body, even memory-mapped, is copied whole.)
                request.setValue(String(body.count), forHTTPHeaderField: "Content-Length")
                request.frameStreamedBodyByLengthAlone()
                task = session.uploadTask(withStreamedRequest: request)
                files = body.segments
            }
            let url = request.url ?? destination
            let answer = TaskAnswer(call, size: body.count) { result in
                controller.complete(with: result.map { HTTPAnswer(url: url, receipt: $0.receipt, body: $0.body) })
            }
            delegate.register(task, answer: answer, files: files, bytes: streamed, resendable: resendable)
            controller.onCancel { [delegate] in
                delegate.forget(task)
                task.cancel()
            }
            // A job cancelled before this point has already cancelled the
            // task (`onCancel` runs at once then), so it is never resumed.
            // A cancel that lands between the check and `resume()` is still
            // safe: resuming a task that was cancelled sends nothing.
            if !controller.isCompleted {
                task.resume()
            }
        }
    }
}

extension URLRequest {
    /// Makes a streamed body with a `Content-Length` go out framed by it
    /// alone.
    mutating func frameStreamedBodyByLengthAlone() {
        #if canImport(FoundationNetworking)
        // FoundationNetworking gives libcurl a streamed body with no
        // length, so libcurl adds `Transfer-Encoding: chunked` beside
        // our Content-Length (invalid HTTP/1.1: strict servers answer
        // 400) and `Expect: 100-continue` (a one-second stall before
        // the body on a server that ignores it). libcurl replaces its
        // own header with one of ours of the same name, and sends
        // none when ours is blank; an empty value would go out as
        // `Expect:`, which servers answer with 417, so the value is a
        // space. A request that asks for `100-continue` itself keeps it.
        setValue(" ", forHTTPHeaderField: "Transfer-Encoding")
        if value(forHTTPHeaderField: "Expect")?.lowercased() != "100-continue" {
            setValue(" ", forHTTPHeaderField: "Expect")
        }
        #endif
    }
}
