import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The session delegate of a ``URLSessionUploader``: routes each task's
/// events to the upload it belongs to.
final class URLSessionUploadDelegate: NSObject, URLSessionDataDelegate, Sendable {
    /// What one running upload needs from the session's events.
    private struct Upload: Sendable {
        var size: Int64
        /// The file the body streams from, when it is not in memory.
        var file: URL?
        var progress: @Sendable (UploadProgress) -> Void
        var complete: @Sendable (Result<Void, any Error>) -> Void
        /// The start of the server's answer, for the error of a failed
        /// upload.
        var answer = Data()
    }

    /// The most bytes of a server's answer kept for an error message.
    static let answerPrefixLength = 512

    private let uploads = Lock<[Int: Upload]>([:])

    /// Routes the events of `task` to this upload, whose body streams from
    /// `file` when there is one.
    func register(
        _ task: URLSessionTask,
        size: Int64,
        file: URL?,
        progress: @escaping @Sendable (UploadProgress) -> Void,
        complete: @escaping @Sendable (Result<Void, any Error>) -> Void
    ) {
        let upload = Upload(size: size, file: file, progress: progress, complete: complete)
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
        let file = uploads.withLock { $0[task.taskIdentifier]?.file }
        completionHandler(file.flatMap { InputStream(url: $0) })
    }

    func urlSession(
        _ session: URLSession,
        task: URLSessionTask,
        didSendBodyData bytesSent: Int64,
        totalBytesSent: Int64,
        totalBytesExpectedToSend: Int64
    ) {
        guard let upload = uploads.withLock({ $0[task.taskIdentifier] }) else { return }
        upload.progress(UploadProgress(bytesSent: min(totalBytesSent, upload.size), bytesTotal: upload.size))
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        uploads.withLock { uploads in
            guard var upload = uploads[dataTask.taskIdentifier] else { return }
            let room = Self.answerPrefixLength - upload.answer.count
            guard room > 0 else { return }
            upload.answer.append(data.prefix(room))
            uploads[dataTask.taskIdentifier] = upload
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        guard let upload = uploads.withLock({ $0.removeValue(forKey: task.taskIdentifier) }) else { return }
        if let error {
            upload.complete(.failure(error))
            return
        }
        let status = (task.response as? HTTPURLResponse)?.statusCode ?? 0
        guard (200...299).contains(status) else {
            let answer = String(decoding: upload.answer, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            upload.complete(.failure(UploadError.httpStatus(status, body: answer)))
            return
        }
        upload.progress(UploadProgress(bytesSent: upload.size, bytesTotal: upload.size))
        upload.complete(.success(()))
    }
}
