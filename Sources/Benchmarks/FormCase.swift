import Foundation
import JobKit
import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Case 18: what a form costs an upload. The same file `POST`ed to Node's
/// test server on 127.0.0.1 as a multipart/form-data form
/// (`MultipartFormUploader`, with two fields) and as a raw body
/// (`URLSessionUploader`), interleaved; the figures are this process's CPU
/// time (every thread: the job, the session, libcurl) per MiB sent, and
/// the bytes on the wire against the file's.
///
/// Node's server hashes every body and answers at once; it does not parse
/// these forms (the tests do that): a client waiting for an answer after a
/// large body spins a core on Linux (FoundationNetworking), so the parser's
/// time would count as this process's CPU.
enum FormCase {
    static func run(megabytes: Int, schedule: Schedule) throws -> CaseReport {
        let (folder, file) = try writeVideo(megabytes: megabytes, in: "JobKitForms")
        defer { try? FileManager.default.removeItem(at: folder) }
        let size = megabytes * 1024 * 1024
        let server = try NodeServer.start()
        defer { server.stop() }
        // Parsing a form of many MiB takes the server a while after the
        // body arrived, and a client waiting for an answer after a large
        // body spins a core on Linux (see the notes): without this, the
        // figures would measure the wait.
        try server.rule("api/v2/media", ["parse_form": false])

        var formVideo = Video(file: file, destination: server.url.appendingPathComponent("api/v2/media"))
        formVideo.media.formFields = [
            FormField(name: "description", value: "Surf at dawn"), FormField(name: "focus", value: "0.0,0.0"),
        ]
        let rawVideo = Video(file: file, destination: server.url.appendingPathComponent("raw/video.mp4"))
        let form = "form: MultipartFormUploader"
        let raw = "raw body: URLSessionUploader, POST"
        func variant(_ name: String, _ video: Video, _ uploader: any Uploader) -> Variant {
            Variant(name: name) { _ in
                let done = Completion<Job<UploadReceipt>.Outcome>()
                Job.uploading(video, using: uploader).perform(on: DispatchQueue.global()) { done.complete($0) }
                let receipt = try done.wait(seconds: 120).get()
                guard receipt.status == 201 else { throw BenchmarkFailure("the server answered \(receipt.status)") }
            }
        }
        let rows = try measureInterleaved(
            [
                variant(form, formVideo, try MultipartFormUploader()),
                variant(raw, rawVideo, URLSessionUploader(method: .post)),
            ],
            n: megabytes, schedule: schedule, clock: processCPUTime)

        // What waiting costs: the raw body again, its answer 0.2 s late.
        try server.rule("raw/late.mp4", ["delay": 0.2])
        let lateVideo = Video(file: file, destination: server.url.appendingPathComponent("raw/late.mp4"))
        let late = try measureInterleaved(
            [variant("late", lateVideo, URLSessionUploader(method: .post))], n: 1,
            schedule: Schedule(warmups: 0, rounds: 3), clock: processCPUTime)

        // The bytes on the wire, from the server's records of the last
        // round: the body, and the request's headers as sent.
        let received = try server.received()
        let sizes = [form: "/api/v2/media", raw: "/raw/video.mp4"].mapValues { path in
            received.last { $0.path == path }.map { $0.length + $0.headerBytes } ?? 0
        }
        var report = CaseReport(
            title:
                "18. Forms: a \(megabytes) MiB file POSTed to a test server on 127.0.0.1, as a form and as a raw body",
            unit: "CPU µs/MiB",
            rows: rows.map { row in
                var row = row
                row.samples = row.samples.map { $0 / 1_000 }
                return row
            })
        report.notes = [
            "Ratio: the form's CPU time ÷ the raw body's, pair by pair (this process's, every thread).",
            "The server answers at once, without parsing: on Linux, FoundationNetworking spins a core while it waits "
                + "for the answer to a large body, which would count the server's time as the client's CPU. "
                + "The raw body answered 0.2 s late: \(Int(late[0].median / 1_000_000)) ms of CPU per upload, against "
                + "\(Int((rows.last?.median ?? 0) * Double(megabytes) / 1_000_000)) ms answered at once.",
            "On the wire (body and request headers) ÷ the file's bytes: form "
                + "\(String(format: "%.6f", Double(sizes[form] ?? 0) / Double(size))), raw "
                + "\(String(format: "%.6f", Double(sizes[raw] ?? 0) / Double(size))).",
        ]
        return report
    }
}

/// The nanoseconds of CPU this process has used, on all its threads.
func processCPUTime() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &time)
    return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
}
