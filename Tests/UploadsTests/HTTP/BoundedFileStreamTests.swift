import Foundation
import JobKitTesting
import Testing

@testable import Uploads

/// The stream that sends a file, or one part of it, as a body: exactly its
/// bytes, then the end, whichever way it is read (polled, as
/// FoundationNetworking reads it, or told by run-loop events, as Apple's
/// URLSession reads it).
@Suite("Bounded file stream", .timeLimit(.minutes(1)))
struct BoundedFileStreamTests {
    /// A part whose end is not on a 64 KiB boundary, with bytes after it.
    static let offset = 777
    static let length = 8 * 1024 * 1024 + 12_345

    /// Reads `stream` to its end `bufferSize` bytes at a time; `nil` when a
    /// read fails.
    static func readAll(_ stream: InputStream, bufferSize: Int) -> Data? {
        var data = Data()
        var buffer = [UInt8](repeating: 0, count: bufferSize)
        while true {
            let count = stream.read(&buffer, maxLength: bufferSize)
            if count < 0 { return nil }
            if count == 0 { return data }
            data.append(contentsOf: buffer[0..<count])
        }
    }

    @Test(arguments: [1_000, 4_096, 65_536, 65_537, 1 << 20, 9 << 20])
    func aPartIsExactlyItsBytesThenTheEndWhateverTheBufferSize(bufferSize: Int) throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("surf.mp4")
        try writePatternedFile(file, size: Self.offset + Self.length + 100_000)
        let stream = BoundedFileStream(file: file, offset: Int64(Self.offset), length: Int64(Self.length))
        stream.open()
        #expect(stream.streamStatus == .open)

        let read = try #require(Self.readAll(stream, bufferSize: bufferSize))

        let expected = try Data(contentsOf: file)[Self.offset..<Self.offset + Self.length]
        #expect(read.count == Self.length)
        #expect(read == expected)
        #expect(stream.streamStatus == .atEnd)
        #expect(!stream.hasBytesAvailable, "the session ends the body here")
        var byte: UInt8 = 0
        #expect(stream.read(&byte, maxLength: 1) == 0, "and the end stays the end")
        stream.close()
    }

    @Test func tinyReadsOfAShortPartAreExactToo() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("photo.jpg")
        try writePatternedFile(file, size: 100_000)
        for bufferSize in [1, 7] {
            let stream = BoundedFileStream(file: file, offset: 3, length: 12_345)
            stream.open()
            #expect(try Self.readAll(stream, bufferSize: bufferSize) == Data(contentsOf: file)[3..<12_348])
        }
        let empty = BoundedFileStream(file: file, offset: 10, length: 0)
        empty.open()
        #expect(empty.streamStatus == .atEnd)
        #expect(Self.readAll(empty, bufferSize: 16) == Data())
    }

    @Test func aFileThatEndsSoonerFailsTheReadRatherThanEnding() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("shrunk.mp4")
        try writePatternedFile(file, size: 70_000)
        let stream = BoundedFileStream(file: file, offset: 1_000, length: 80_000)
        stream.open()
        #expect(Self.readAll(stream, bufferSize: 65_536) == nil)
        #expect(stream.streamStatus == .error)
        #expect(stream.hasBytesAvailable, "so that the session reads, fails, and aborts")
        #expect(
            stream.streamError as? BoundedFileStream.Failure == .fileEnded(found: 70_000, expected: 81_000))

        let missing = BoundedFileStream(file: folder.url.appendingPathComponent("gone.mp4"), length: 10)
        missing.open()
        #expect(missing.streamStatus == .error)
        #expect(missing.streamError != nil)
    }

    // MARK: - Bytes around the file (a form's fields and closing boundary)

    @Test(arguments: [1, 7, 100, 4_096, 65_536, 1 << 20])
    func aFileBetweenAHeadAndATailIsTheHeadThePartThenTheTailThenTheEnd(bufferSize: Int) throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("surf.mp4")
        try writePatternedFile(file, size: 300_000)
        let head = Data("--b\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n".utf8)
        let tail = Data("\r\n--b--\r\n".utf8)
        let stream = BoundedFileStream(file: file, offset: 11, length: 200_000, head: head, tail: tail)
        stream.open()

        let read = try #require(Self.readAll(stream, bufferSize: bufferSize))

        #expect(read == head + (try Data(contentsOf: file)[11..<200_011]) + tail)
        #expect(stream.streamStatus == .atEnd)
        #expect(!stream.hasBytesAvailable)
    }

    @Test func anEmptyFileOrAnEmptyHeadOrTailLeavesTheRestExact() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("empty.txt")
        try Data().write(to: file)
        let head = Data("head".utf8)
        let tail = Data("tail".utf8)
        for (head, tail) in [(head, tail), (head, Data()), (Data(), tail)] {
            let stream = BoundedFileStream(file: file, length: 0, head: head, tail: tail)
            stream.open()
            #expect(stream.streamStatus == .open, "bytes are left to read")
            #expect(Self.readAll(stream, bufferSize: 3) == head + tail)
            #expect(stream.streamStatus == .atEnd)
        }
    }

    @Test func aFileThatEndsSoonerBetweenAHeadAndATailFailsBeforeTheTail() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("shrunk.mp4")
        try writePatternedFile(file, size: 70_000)
        let stream = BoundedFileStream(
            file: file, offset: 0, length: 80_000, head: Data("head".utf8), tail: Data("tail".utf8))
        stream.open()
        #expect(Self.readAll(stream, bufferSize: 65_536) == nil)
        #expect(stream.streamStatus == .error)
        #expect(stream.streamError as? BoundedFileStream.Failure == .fileEnded(found: 70_000, expected: 80_000))
    }

    // MARK: - Several files (a form's)

    @Test(arguments: [1, 7, 4_096, 65_536, 1 << 20])
    func severalFilesAndTheBytesAroundThemAreEachInTurnThenTheEnd(bufferSize: Int) throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let (first, second) = (folder.url.appendingPathComponent("a.jpg"), folder.url.appendingPathComponent("b.mp4"))
        try writePatternedFile(first, size: 70_000)
        try Data(repeating: 0xAB, count: 130_001).write(to: second)
        let stream = BoundedFileStream(segments: [
            .file(first, offset: 0, length: 70_000), .bytes(Data("between".utf8)), .bytes(Data()),
            .file(second, offset: 1, length: 130_000), .file(first, offset: 5, length: 0), .bytes(Data("end".utf8)),
        ])
        stream.open()

        let read = try #require(Self.readAll(stream, bufferSize: bufferSize))

        var expected = try Data(contentsOf: first)
        expected += Data("between".utf8)
        expected += Data(repeating: 0xAB, count: 130_000)
        expected += Data("end".utf8)
        #expect(read == expected)
        #expect(stream.streamStatus == .atEnd)
    }

    @Test func theDigestOfABodyInSegmentsIsThatOfItsBytesInTurn() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = try folder.file("a.jpg", bytes: patternedBytes(200_000))
        let body = HTTPBody.segments([
            .bytes(Data("head".utf8)), .file(file, offset: 7, length: 150_000), .bytes(Data()),
            .file(file, offset: 0, length: 70_000), .bytes(Data("tail".utf8)),
        ])
        var bytes = Data("head".utf8)
        bytes += patternedBytes(200_000)[7..<150_007]
        bytes += patternedBytes(70_000)
        bytes += Data("tail".utf8)

        #expect(try body.digest(MD5.self) == MD5.digest(of: bytes))
        #expect(try body.digest(SHA1.self) == SHA1.digest(of: bytes))
        let beyond = HTTPBody.segments([.bytes(Data("h".utf8)), .file(file, offset: 150_000, length: 60_000)])
        #expect(
            throws: UploadError.unreadableFile(file, reason: "it shrank from 210000 to 200000 bytes during the upload")
        ) {
            try beyond.digest(MD5.self)
        }
    }

    @Test func aSecondFileThatIsMissingFailsTheReadThatReachesIt() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let first = folder.url.appendingPathComponent("a.jpg")
        let missing = folder.url.appendingPathComponent("gone.mp4")
        try writePatternedFile(first, size: 1_000)
        let segments: [BodySegment] = [
            .bytes(Data("head".utf8)), .file(first, offset: 0, length: 1_000), .file(missing, offset: 0, length: 10),
        ]
        let stream = BoundedFileStream(segments: segments)
        stream.open()
        #expect(stream.streamStatus == .open)
        var buffer = [UInt8](repeating: 0, count: 2_000)
        #expect(stream.read(&buffer, maxLength: 2_000) == 4)
        #expect(stream.read(&buffer, maxLength: 2_000) == 1_000)
        #expect(stream.streamStatus == .error, "the next file cannot be opened")
        #expect(stream.read(&buffer, maxLength: 2_000) == -1)
        #expect(stream.failedFile == missing)
        #expect(BoundedFileStream.failure(of: segments) == .fileNotFound(missing))
    }

    #if os(Linux)
    @Test func oneFileIsOpenAtATimeHoweverManyTheBodyReads() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let files = try (0..<3).map { index in
            try folder.file("\(index).jpg", bytes: patternedBytes(10_000, seed: UInt8(index)))
        }
        let stream = BoundedFileStream(segments: files.map { .file($0, offset: 0, length: 10_000) })
        /// The descriptors of this process open on the folder's files.
        func openHere() throws -> Int {
            try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").filter { fd in
                let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(fd)")
                return target?.hasPrefix(folder.url.resolvingSymlinksInPath().path) == true
            }.count
        }
        stream.open()
        var buffer = [UInt8](repeating: 0, count: 6_000)
        #expect(try openHere() == 1)
        for _ in 0..<4 { _ = stream.read(&buffer, maxLength: 6_000) }
        #expect(try openHere() == 1, "the files before it are closed, those after it not yet opened")
        while stream.read(&buffer, maxLength: 6_000) > 0 {}
        #expect(stream.streamStatus == .atEnd)
        #expect(try openHere() == 0)
    }
    #endif

    @Test func aMiddleFileThatEndsSoonerFailsTheReadBeforeTheRest() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let (first, second) = (folder.url.appendingPathComponent("a.jpg"), folder.url.appendingPathComponent("b.mp4"))
        try writePatternedFile(first, size: 1_000)
        try writePatternedFile(second, size: 5_000)
        let segments: [BodySegment] = [
            .file(first, offset: 0, length: 1_000), .file(second, offset: 0, length: 9_000), .bytes(Data("end".utf8)),
        ]
        let stream = BoundedFileStream(segments: segments)
        stream.open()
        #expect(Self.readAll(stream, bufferSize: 4_096) == nil)
        #expect(stream.streamError as? BoundedFileStream.Failure == .fileEnded(found: 5_000, expected: 9_000))
        #expect(stream.failedFile == second)
        guard case .unreadableFile(second, let reason)? = BoundedFileStream.failure(of: segments) else {
            Issue.record("expected the second file to be named")
            return
        }
        #expect(reason == "it shrank from 9000 to 5000 bytes during the upload")
    }

    // MARK: - Run-loop events

    /// What a delegate that reads on each event saw.
    struct Told: Sendable {
        var events: [String] = []
        var bytes = Data()
        var readFailed = false
    }

    /// Schedules a stream of `length` bytes of `file` from `offset` in the
    /// run loop of a thread of its own, reads it as Apple's URLSession
    /// does (on each `hasBytesAvailable`, 64 KiB at most), and returns what
    /// its delegate was told, once the stream ended or failed, or the
    /// thread's time ran out.
    static func readByEvents(_ file: URL, offset: Int64, length: Int64) async -> Told {
        await readByEvents([.file(file, offset: offset, length: length)])
    }

    /// ``readByEvents(_:offset:length:)``, of a stream of `segments`.
    static func readByEvents(_ segments: [BodySegment]) async -> Told {
        await withCheckedContinuation { continuation in
            let thread = Thread {
                final class Reader: NSObject, StreamDelegate {
                    var told = Told()
                    var done = false
                    func stream(_ stream: Stream, handle event: Stream.Event) {
                        switch event {
                        case .openCompleted: told.events.append("open")
                        case .hasBytesAvailable:
                            told.events.append("bytes")
                            var buffer = [UInt8](repeating: 0, count: 65_536)
                            let count = (stream as? InputStream)?.read(&buffer, maxLength: buffer.count) ?? -1
                            if count > 0 { told.bytes.append(contentsOf: buffer[0..<count]) }
                            if count < 0 { told.readFailed = true }
                        case .endEncountered:
                            told.events.append("end")
                            done = true
                        case .errorOccurred:
                            told.events.append("error")
                            done = true
                        default: told.events.append("other")
                        }
                    }
                }
                let reader = Reader()
                let stream = BoundedFileStream(segments: segments)
                stream.delegate = reader
                stream.schedule(in: .current, forMode: .default)
                stream.open()
                let deadline = Date(timeIntervalSinceNow: 20)
                while !reader.done, Date() < deadline {
                    _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.1))
                }
                // Events that would come after the last one: none may.
                _ = RunLoop.current.run(mode: .default, before: Date(timeIntervalSinceNow: 0.05))
                stream.close()
                continuation.resume(returning: reader.told)
            }
            thread.start()
        }
    }

    @Test func aScheduledStreamTellsItsDelegateUntilItsLastByteThenTheEndOnce() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("surf.mp4")
        let length = 1024 * 1024 + 12_345
        try writePatternedFile(file, size: 5 + length + 1_000)

        let told = await Self.readByEvents(file, offset: 5, length: Int64(length))

        #expect(told.bytes == (try Data(contentsOf: file)[5..<5 + length]))
        #expect(told.events.first == "open")
        #expect(told.events.last == "end")
        #expect(told.events.filter { $0 == "end" }.count == 1)
        #expect(told.events.dropFirst().dropLast().allSatisfy { $0 == "bytes" })
        #expect(told.events.count == 2 + (length + 65_535) / 65_536, "one event per read, nothing after the end")
        #expect(!told.readFailed)
    }

    @Test func aScheduledStreamWhoseFileEndsSoonerTellsOfTheErrorOnce() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("shrunk.mp4")
        try writePatternedFile(file, size: 100_000)

        let told = await Self.readByEvents(file, offset: 0, length: 200_000)

        #expect(told.bytes == (try Data(contentsOf: file)))
        #expect(told.readFailed)
        #expect(told.events.last == "error")
        #expect(told.events.filter { $0 == "error" }.count == 1)
        #expect(!told.events.contains("end"))
    }

    @Test func aScheduledStreamOfSeveralFilesTellsOfEachReadThenOfTheEndOrOfTheErrorOnce() async throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let first = try folder.file("a.jpg", bytes: patternedBytes(100_000, seed: 1))
        let second = try folder.file("b.jpg", bytes: patternedBytes(70_000, seed: 2))
        let segments: [BodySegment] = [
            .bytes(Data("head".utf8)), .file(first, offset: 0, length: 100_000), .bytes(Data("between".utf8)),
            .file(second, offset: 0, length: 70_000), .bytes(Data("tail".utf8)),
        ]
        var expected = Data("head".utf8)
        expected += patternedBytes(100_000, seed: 1)
        expected += Data("between".utf8)
        expected += patternedBytes(70_000, seed: 2)

        let whole = await Self.readByEvents(segments)
        let missing = await Self.readByEvents(
            segments.dropLast() + [.file(folder.url.appendingPathComponent("gone.mp4"), offset: 0, length: 10)])

        #expect(whole.bytes == expected + Data("tail".utf8))
        #expect(whole.events.first == "open" && whole.events.last == "end")
        #expect(whole.events.filter { $0 == "end" }.count == 1)
        #expect(whole.events.dropFirst().dropLast().allSatisfy { $0 == "bytes" })
        #expect(!whole.readFailed)
        #expect(missing.bytes == expected, "every byte before the file that is missing")
        #expect(missing.events.first == "open" && missing.events.last == "error")
        #expect(missing.events.filter { $0 == "error" }.count == 1)
        #expect(!missing.events.contains("end"))
    }
}
