import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A transport that hands the one it sends through only bodies that are
/// whole files: what a background `URLSession` takes, which refuses bytes
/// in memory and streams.
///
/// A body that is not a whole file already (a form's fields, file and
/// closing boundary; a tus `PATCH`'s chunk; an S3 part; bytes in memory,
/// such as a post's document) is written to a part file of its own in
/// ``folder``, exactly its bytes, before the request is sent, and the part
/// file is removed once the request ends, whatever its outcome: a retry
/// writes it again (unless ``removesParts`` is `false`: the transport it
/// sends through removes it then, once the request was handed on). A file
/// sent whole goes as it is, and a request with no body has none.
///
/// A part file is written from the body as it is at that moment: a file
/// that has shrunk fails the request with
/// ``UploadError/unreadableFile(_:reason:)``, before anything is sent, as
/// a stream that runs out does; a part file that cannot be written fails
/// it with ``UploadError/writeFailed(_:reason:)``.
final class FileBodyTransport: HTTPTransport {
    /// Where part files are written.
    let folder: URL
    /// Whether a part file is removed once its request ends; `false`
    /// leaves that to the transport it sends through, as a background
    /// transport does, whose task may outlive the request (its app was
    /// killed) and reads the file when it starts.
    let removesParts: Bool
    /// What sends the requests, their bodies files.
    private let transport: any HTTPTransport

    /// A transport that sends through `transport`, writing part files in
    /// `folder` (made when the first is written), and removing them once
    /// their requests end when `removesParts`.
    init(sendingThrough transport: any HTTPTransport, partsIn folder: URL, removesParts: Bool = true) {
        self.transport = transport
        self.folder = folder
        self.removesParts = removesParts
    }

    func send(_ request: HTTPRequest) -> Job<HTTPAnswer> {
        Job { [self] controller in
            var request = request
            let part: URL?
            do {
                (request.body, part) = try fileBody(of: request.body, task: request.taskDescription)
            } catch {
                controller.fail(with: error)
                return
            }
            // The transport sent through owns a part file it was handed
            // (unless this one removes them): one cancelled before it
            // was, is this one's to remove.
            let handed = Handed()
            let send = transport.send(request)
            let sending = Job<HTTPAnswer> { inner in
                handed.lock.withLock { $0 = true }
                inner.perform(send) { inner.complete(with: $0) }
            }
            controller.perform(sending) { [removesParts] outcome in
                // Ended (a cancel ends it too): the storage took the part
                // file's bytes or the request failed, and a retry writes
                // it again.
                if let part, removesParts || !handed.lock.withLock({ $0 }) {
                    try? FileManager.default.removeItem(at: part)
                }
                controller.complete(with: outcome)
            }
        }
    }

    /// Whether a request was handed to the transport sent through.
    private final class Handed: Sendable {
        let lock = Lock(false)
    }

    /// `body` as a whole file: as it is when it already is one (or has no
    /// bytes), else a new part file in ``folder`` holding its bytes, named
    /// after the description of the `task` that carries it, if it has one.
    private func fileBody(of body: HTTPBody, task: String?) throws(UploadError) -> (body: HTTPBody, part: URL?) {
        if body == .empty { return (body, nil) }
        // A file that cannot be read fails as its part file is written.
        if let (file, length) = body.fileFromItsStart, (try? Media.sizeOfReadableFile(at: file)) == length {
            return (body, nil)
        }
        let part = try newPartFile(named: task.map { Self.partFile(for: $0, in: folder) })
        do {
            try write(body, to: part)
        } catch {
            try? FileManager.default.removeItem(at: part)
            throw error
        }
        return (.file(part, offset: 0, length: body.count), part)
    }

    /// The part file of the task `description` in `folder`: named after
    /// it, so that a later launch finds the part files of its tasks.
    static func partFile(for description: String, in folder: URL) -> URL {
        let allowed = CharacterSet.alphanumerics.union(CharacterSet(charactersIn: "-_."))
        let name = String(description.unicodeScalars.map { allowed.contains($0) ? Character($0) : "_" })
        return folder.appendingPathComponent("\(name).part")
    }

    /// An empty part file in ``folder``, `named` or of a new name.
    private func newPartFile(named: URL?) throws(UploadError) -> URL {
        let part = named ?? folder.appendingPathComponent("\(UUID().uuidString).part")
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            throw .writeFailed(part, reason: error.localizedDescription)
        }
        guard FileManager.default.createFile(atPath: part.path, contents: nil) else {
            throw .writeFailed(part, reason: "it cannot be created")
        }
        return part
    }

    /// Writes the bytes of `body` to `part`: exactly `body.count` of them,
    /// read as a session would stream them (``BoundedFileStream``).
    private func write(_ body: HTTPBody, to part: URL) throws(UploadError) {
        let output: FileHandle
        do {
            output = try FileHandle(forWritingTo: part)
        } catch {
            throw .writeFailed(part, reason: error.localizedDescription)
        }
        defer { try? output.close() }
        func append(_ data: Data) throws(UploadError) {
            do {
                try output.write(contentsOf: data)
            } catch {
                throw .writeFailed(part, reason: error.localizedDescription)
            }
        }
        switch body {
        case .empty:
            return
        case .data(let data):
            try append(data)
        case .file, .segments:
            let segments = body.segments
            let stream = BoundedFileStream(segments: segments)
            stream.open()
            defer { stream.close() }
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while true {
                let count = buffer.withUnsafeMutableBufferPointer { stream.read($0.baseAddress!, maxLength: $0.count) }
                if count == 0 { return }
                guard count > 0 else {
                    let reason = stream.streamError.map { "\($0)" } ?? "it could not be read"
                    throw BoundedFileStream.failure(of: segments)
                        ?? .unreadableFile(stream.failedFile ?? part, reason: reason)
                }
                try append(Data(buffer[..<count]))
            }
        }
    }
}
