import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The session delegate of an ``InProcessTransport``: routes each task's events to
/// the request it belongs to.
final class URLSessionUploadDelegate: NSObject, URLSessionDataDelegate, Sendable {
    /// What one running request needs from the session's events.
    private struct Upload: Sendable {
        /// What its events make of it.
        var answer: TaskAnswer
        /// The segments the body streams from, when it reads files.
        var files: [BodySegment]?
        /// The bytes in memory a body streams from, when it is sent as a
        /// stream.
        var bytes: Data?
        /// Whether the transport may send the body again by itself (see
        /// ``register(_:answer:files:bytes:resendable:)``).
        var resendable: Bool
        /// The streams handed out so far.
        var streams = 0
        /// Body bytes handed to the connection, by the last stream.
        var bodyBytesSent: Int64 = 0
    }

    private let uploads = Lock<[Int: Upload]>([:])

    /// Routes the events of `task` to `answer`, the request's, whose body
    /// streams from `files` (segments that read files) or `bytes` when
    /// there is one.
    ///
    /// Unless it is `resendable`, the body is not streamed again once some
    /// of it went out: libcurl (FoundationNetworking's transport) sends a
    /// request again by itself when the connection it reused dies before
    /// an answer, which a request that is not idempotent (a tus `PATCH`
    /// whose bytes the server may have kept) must not be; it then fails
    /// instead, and its owner decides. (A connection that died before any
    /// byte of the body went out is one the server had closed: sent again.)
    func register(
        _ task: URLSessionTask,
        answer: TaskAnswer,
        files: [BodySegment]?,
        bytes: Data? = nil,
        resendable: Bool = true
    ) {
        let upload = Upload(answer: answer, files: files, bytes: bytes, resendable: resendable)
        uploads.withLock { $0[task.taskIdentifier] = upload }
    }

    /// Drops what is kept for `task`: its events no longer matter.
    func forget(_ task: URLSessionTask) {
        _ = uploads.withLock { $0.removeValue(forKey: task.taskIdentifier) }
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        needNewBodyStream completionHandler: @escaping (InputStream?) -> Void
    ) {
        // Exactly the `size` bytes the request's Content-Length declares,
        // whatever the file does meanwhile (see BoundedFileStream). Called
        // again for each retry of the request, for a fresh stream; a
        // request that is not resendable, some of whose body went out,
        // gets one that fails, so that the transfer fails (as a connection
        // lost) rather than going out twice (a nil stream would send the
        // headers and no body, and leave the server waiting for it).
        let (upload, refused) = uploads.withLock { uploads -> (Upload?, Bool) in
            guard var upload = uploads[task.taskIdentifier] else { return (nil, false) }
            let refused = !upload.resendable && upload.streams > 0 && upload.bodyBytesSent > 0
            upload.streams += 1
            upload.bodyBytesSent = 0
            uploads[task.taskIdentifier] = upload
            return (upload, refused)
        }
        guard let upload else {
            completionHandler(nil)
            return
        }
        if refused {
            completionHandler(BoundedFileStream.refusal())
        } else if let files = upload.files {
            completionHandler(BoundedFileStream(segments: files))
        } else if let bytes = upload.bytes {
            completionHandler(InputStream(data: bytes))
        } else {
            completionHandler(nil)
        }
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        let upload = uploads.withLock { uploads -> Upload? in
            uploads[task.taskIdentifier]?.bodyBytesSent = totalBytesSent
            return uploads[task.taskIdentifier]
        }
        guard let upload else { return }
        upload.answer.sent(totalBytesSent)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        uploads.withLock { uploads in
            uploads[dataTask.taskIdentifier]?.answer.received(data)
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let upload = uploads.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        // A BoundedFileStream that ran out of file (or could not open it)
        // aborts the transfer, which the session reports as URLError(.unknown)
        // and nothing more: say what happened.
        var fileFailure: UploadError?
        if let files = upload.files, (error as? URLError)?.code == .unknown {
            fileFailure = BoundedFileStream.failure(of: files)
        }
        upload.answer.ended(response: task.response, error: error, fileFailure: fileFailure)
    }
}
