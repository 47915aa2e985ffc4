import Foundation
import TestSupport
import Testing

extension S3Storage {
    /// The Playground publishing to moto through `--s3`, killed mid-way and run
    /// again: a new process resumes the multipart uploads from their manifests.
    @Suite("Playground on S3", .startsProcesses, .timeLimit(.minutes(2)), S3Fixture.requirement)
    struct PlaygroundS3Tests {
        struct PartSent: Hashable {
            let key: String
            let number: Int
        }

        @Test func aPartThatAlwaysFailsIsSentOnceAndThenOncePerRetryTheRunAllows() async throws {
            let work = try TemporaryFolder()
            defer { work.remove() }
            try await S3Fixture.with { s3 in
                // The run: `--retries 2`, one upload at a time, and
                // part 2 of video-1 answering 500 every time. It used to be
                // sent 9 times: the uploader's 3 attempts per attempt of
                // publishing's 3.
                try await s3.setRules([
                    ["operation": "uploadPart", "key": "posts/beach-day/video-1.mp4", "partNumber": 2, "status": 500]
                ])
                let run = try PlaygroundProcess([
                    "--s3", s3.baseURL.appendingPathComponent("presign").absoluteString, "--work-folder",
                    work.url.path, "--retries", "2", "--concurrency", "1",
                ])
                #expect(await run.exit() != 0, "publishing failed")
                let printed = run.output
                #expect(
                    printed.contains(
                        "✗ posts/beach-day/video-1.mp4 (part 2): the server answered 500 Internal Server Error"))
                #expect(printed.contains("retry 2 of 2 in"))
                #expect(printed.contains("no retries left"))
                #expect(
                    printed.contains("When it failed, these were running, and were cancelled:\n    publish (running)\n")
                )
                #expect(!printed.contains("upload video-1.mp4"), "the error line names the upload that failed")
                let parts = try await s3.requests().filter {
                    $0.operation == "uploadPart" && $0.key == "posts/beach-day/video-1.mp4"
                }
                #expect(parts.filter { $0.partNumber == 2 }.count == 3)
                #expect(parts.filter { $0.partNumber == 1 }.count == 1)
            }
        }

        @Test func aKilledRunIsResumedByTheNextOneWhichSendsOnlyTheMissingParts() async throws {
            let work = try TemporaryFolder()
            defer { work.remove() }
            try await S3Fixture.with { s3 in
                let arguments = [
                    "--s3", s3.baseURL.appendingPathComponent("presign").absoluteString, "--work-folder", work.url.path,
                    "--concurrency", "1", "--keep",
                ]
                // Videos go one at a time, in 8 MiB parts: video-1 (18 MB) in
                // three, video-2 (26 MB) in four. The last part of video-2 is
                // held in flight, and the first run is killed once the six
                // others are stored: mid-way through video-2.
                try await s3.setRules([
                    ["operation": "uploadPart", "key": "posts/beach-day/video-2.mp4", "partNumber": 4, "holdFor": 30]
                ])
                let first = try PlaygroundProcess(arguments)
                let partsStored = try await s3.wait(for: "uploadPart", count: 6, timeout: 60)
                first.kill()
                let firstStatus = await first.exit()
                #expect(partsStored)
                #expect(firstStatus != 0, "killed before it finished")
                let firstRun = try await s3.requests()
                let stored = Set(
                    firstRun.filter { $0.operation == "uploadPart" && $0.status == 200 }
                        .compactMap { request in request.key.map { PartSent(key: $0, number: request.partNumber ?? 0) }
                        })
                let video2 = "posts/beach-day/video-2.mp4"
                let left = try await s3.uploads()
                #expect(left.map(\.key) == [video2], "video-2's upload was left to resume")
                // What the storage holds, not what the proxy saw answered: an
                // answer the killed run never read is recorded as a dropped
                // connection (status 0), though the storage kept the part.
                let upload = try #require(left.first)
                let storedOfVideo2 = Set(try await s3.parts(of: upload).map { PartSent(key: video2, number: $0) })
                #expect(storedOfVideo2.map(\.number).sorted() == [1, 2, 3])

                try await s3.reset()
                let second = try PlaygroundProcess(arguments)
                #expect(await second.exit() == 0)
                let secondRun = try await s3.requests()
                let resent = Set(
                    secondRun.filter { $0.operation == "uploadPart" }
                        .compactMap { request in request.key.map { PartSent(key: $0, number: request.partNumber ?? 0) }
                        })
                // video-1 was complete before the kill; publishing, which keeps
                // no record of finished media, sends it again whole.
                #expect(resent.isDisjoint(with: storedOfVideo2), "no stored part is sent again")
                #expect(resent.filter { $0.key == video2 }.map(\.number) == [4], "video-2 sent only its missing part")
                #expect(
                    secondRun.contains { $0.operation == "listParts" }, "the next run asked which parts were stored")
                #expect(try await s3.uploads().isEmpty)

                let media = work.url.appendingPathComponent("JobKitPlayground-s3/media")
                for video in 1...3 {
                    let object = try await s3.object("posts/beach-day/video-\(video).mp4")
                    let file = media.appendingPathComponent("video-\(video).mp4")
                    #expect(object.sha256 == (try await sha256(of: file)), "video-\(video).mp4 is intact")
                }
                if ProcessInfo.processInfo.environment["JOBKIT_PRINT_MEASUREMENTS"] != nil {
                    let partBytes = { (run: [S3Fixture.Request]) in
                        run.filter { $0.operation == "uploadPart" }.reduce(0) { $0 + $1.bytes }
                    }
                    print(
                        "resume: first run sent \(partBytes(firstRun)) bytes of parts, second run \(partBytes(secondRun))"
                            + " (\(stored.count) parts stored before the kill)")
                }
            }
        }
    }
}
