import Foundation
import JobKitTesting
import Uploads

/// Case 14: what opening an outbox costs. An `Outbox` kept in a folder of
/// `records` posts (three photos and a video each, read from files) is
/// opened and closed: it reads, checks and orders every record, and takes
/// the folder's lock. The hand-written rows are floors, not goals: reading
/// every record's bytes, then reading and parsing them with
/// `JSONSerialization`. Its queue is a `TestQueue` that never runs, so no
/// upload starts.
enum OutboxCase {
    static func run(records: Int, schedule: Schedule) throws -> CaseReport {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("JobKitOutbox-\(UUID())")
        defer { try? FileManager.default.removeItem(at: folder) }
        let outboxFolder = folder.appendingPathComponent("outbox")
        let media = try mediaFiles(in: folder.appendingPathComponent("media"))
        let uploader = URLSessionUploader(method: .put)
        do {
            let outbox = try Outbox(folder: outboxFolder, uploader: uploader, queue: TestQueue())
            defer { outbox.close() }
            for index in 0..<records {
                let base = URL(string: "https://media.example.com/posts/\(index)")!
                try outbox.add(
                    Post(
                        text: "Post \(index)",
                        photos: media.dropLast().enumerated().map { number, file in
                            Photo(file: file, destination: base.appendingPathComponent("photo-\(number + 1).jpg"))
                        },
                        videos: [Video(file: media[3], destination: base.appendingPathComponent("video.mp4"))],
                        destination: base.appendingPathExtension("json")))
            }
        }
        let posts = outboxFolder.appendingPathComponent("posts")
        let variants = [
            Variant(name: "JobKit `Outbox(folder:uploader:)`, then `close()`") { n in
                let outbox = try Outbox(folder: outboxFolder, uploader: uploader, queue: TestQueue())
                defer { outbox.close() }
                guard outbox.posts.count == n else { throw BenchmarkFailure("the outbox lost posts") }
            },
            Variant(name: "read every record (hand-written floor)") { n in
                let count = try recordFiles(in: posts).reduce(0) { count, file in
                    count + (try Data(contentsOf: file).isEmpty ? 0 : 1)
                }
                guard count == n else { throw BenchmarkFailure("read \(count) records of \(n)") }
            },
            Variant(name: "read and parse every record with JSONSerialization (hand-written)") { n in
                let count = try recordFiles(in: posts).reduce(0) { count, file in
                    count + (try JSONSerialization.jsonObject(with: Data(contentsOf: file)) is [String: Any] ? 1 : 0)
                }
                guard count == n else { throw BenchmarkFailure("parsed \(count) records of \(n)") }
            },
        ]
        var report = CaseReport(
            title: "14. Opening an outbox of \(records) posts (3 photos and a video each, from files)",
            unit: "ns/post",
            rows: try measureInterleaved(variants, n: records, schedule: schedule)
        )
        if let first = report.rows.first {
            report.notes = [
                "Opening and closing the outbox took \(format(first.median * Double(records) / 1e6, digits: 1)) ms "
                    + "(median), \(format(first.minimum * Double(records) / 1e6, digits: 1)) ms at best."
            ]
        }
        return report
    }

    /// The record files of an outbox's `posts` folder.
    private static func recordFiles(in posts: URL) throws -> [URL] {
        try FileManager.default.contentsOfDirectory(at: posts, includingPropertiesForKeys: nil)
            .filter { $0.pathExtension == "json" }
    }

    /// Three photos and a video, small: opening an outbox reads no medium.
    private static func mediaFiles(in folder: URL) throws -> [URL] {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        return try ["photo-1.jpg", "photo-2.jpg", "photo-3.jpg", "video.mp4"].map { name in
            let file = folder.appendingPathComponent(name)
            try Data(repeating: 7, count: 1_000).write(to: file)
            return file
        }
    }
}
