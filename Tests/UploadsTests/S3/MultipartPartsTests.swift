import Foundation
import JobKit
import JobKitTesting
import Testing

@testable import Uploads

/// The pieces of `S3Uploader` that need no storage: parts, the manifest,
/// S3's XML, progress across parts.
@Suite("Multipart pieces", .timeLimit(.minutes(1)))
struct MultipartPartsTests {
    static let mebibyte: Int64 = 1024 * 1024

    // MARK: - Parts

    @Test func aFileIsCutIntoPartsOfTheSizeWithAShortLastOne() {
        let parts = MultipartUpload.parts(size: 12 * Self.mebibyte + 5, partSize: 5 * Self.mebibyte)
        #expect(parts.map(\.number) == [1, 2, 3])
        #expect(parts.map(\.offset) == [0, 5 * Self.mebibyte, 10 * Self.mebibyte])
        #expect(parts.map(\.length) == [5 * Self.mebibyte, 5 * Self.mebibyte, 2 * Self.mebibyte + 5])
        #expect(MultipartUpload.parts(size: 10 * Self.mebibyte, partSize: 5 * Self.mebibyte).count == 2)
    }

    @Test func anUploadCountsAPartForEachPartInFlightAgainstAnOutboxsBudget() throws {
        let uploader = try S3Uploader(
            presigner: RefusingPresigner(), manifestFolder: URL(fileURLWithPath: "/tmp"),
            multipartThreshold: 8 * Self.mebibyte, partSize: 8 * Self.mebibyte, maxConcurrentParts: 4)
        let file = Media(
            file: URL(fileURLWithPath: "/videos/surf.mp4"), destination: destination("surf.mp4"),
            contentType: "video/mp4")
        #expect(uploader.bytesInFlight(uploading: file, size: 100 * Self.mebibyte) == 32 * Self.mebibyte)
        #expect(uploader.bytesInFlight(uploading: file, size: 10 * Self.mebibyte) == 10 * Self.mebibyte, "two parts")
        // 10,000 parts of 8 MiB cannot hold 100 GB: 11 MB parts.
        let huge: Int64 = 100_000_000_000
        #expect(uploader.bytesInFlight(uploading: file, size: huge) == 4 * ((huge + 9_999) / 10_000))
        #expect(uploader.bytesInFlight(uploading: file, size: 7 * Self.mebibyte) == 7 * Self.mebibyte, "one PUT")
        let bytes = Media(bytes: Data(count: 9), destination: destination("surf.mp4"), contentType: "video/mp4")
        #expect(uploader.bytesInFlight(uploading: bytes, size: 100 * Self.mebibyte) == 100 * Self.mebibyte)
    }

    @Test func aDestinationWithoutAPathNamesNoObjectAndIsRefusedBeforeAnyRequest() throws {
        let uploader = try S3Uploader(presigner: RefusingPresigner(), manifestFolder: URL(fileURLWithPath: "/tmp"))
        for destination in ["https://media.example.com", "https://media.example.com/"] {
            #expect(throws: UploadError.self) { try uploader.validate(destination: URL(string: destination)!) }
        }
        try uploader.validate(destination: URL(string: "https://media.example.com/posts/1/surf.mp4")!)
        let outcome = LockedValue<Job<UploadReceipt>.Outcome?>(nil)
        uploader.upload(
            Media(bytes: Data([1]), destination: URL(string: "https://media.example.com")!, contentType: "x")
        )
        .perform(on: ImmediateQueue()) { outcome.setValue($0) }
        guard case .failure(UploadError.invalidDestination(_, let reason)) = outcome.value else {
            Issue.record("expected invalidDestination, got \(String(describing: outcome.value))")
            return
        }
        #expect(reason == "it names no object (its path is empty)")
    }

    // MARK: - Manifest

    @Test func aManifestIsFoundAgainOnlyForItsFileAndDestination() throws {
        typealias Manifest = ManifestFile<MultipartManifest>
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let file = folder.url.appendingPathComponent("surf.mp4")
        let destination = URL(string: "https://media.example.com/videos/surf.mp4")!
        let location = Manifest.location(in: folder.url, file: file, destination: destination)
        var manifest = Manifest(
            file: file, destination: destination, identity: FileIdentity(size: 12, modified: 1_700_000_000.25),
            manifest: MultipartManifest(uploadID: "upload-1", partSize: S3Uploader.minimumPartSize))
        manifest.manifest.parts = [1: "\"etag-1\"", 2: "\"etag-2\""]
        try manifest.save(to: location)

        #expect(Manifest.load(from: location, file: file, destination: destination) == manifest)
        let elsewhere = URL(string: "https://media.example.com/videos/other.mp4")!
        #expect(Manifest.location(in: folder.url, file: file, destination: elsewhere) != location)
        #expect(Manifest.load(from: location, file: file, destination: elsewhere) == nil)
        #expect(folder.files() == [location.lastPathComponent], "nothing beside it: written atomically, renamed")

        Manifest.remove(at: location, ifItNames: "a newer upload")
        #expect(folder.files() == [location.lastPathComponent], "another upload's manifest is left alone")
        Manifest.remove(at: location, ifItNames: "upload-1")
        #expect(folder.files().isEmpty)

        for unusable in [
            { (manifest: inout Manifest) in manifest.version = 99 },
            { $0.manifest.partSize = 0 },
            { $0.manifest.partSize = S3Uploader.minimumPartSize - 1 },
            { $0.fileSize = S3Uploader.minimumPartSize * Int64(S3Uploader.maximumPartCount) + 1 },
        ] {
            var changed = manifest
            unusable(&changed)
            try changed.save(to: location)
            #expect(Manifest.load(from: location, file: file, destination: destination) == nil)
        }
    }

    @Test func aManifestThatCannotBeWrittenIsATypedError() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let blocker = try folder.file("not-a-folder", bytes: Data("x".utf8))
        let manifest = ManifestFile(
            file: URL(fileURLWithPath: "/f"), destination: URL(string: "https://d/f")!,
            identity: FileIdentity(size: 1, modified: 0), manifest: MultipartManifest(uploadID: "u", partSize: 1))
        #expect {
            try manifest.save(to: blocker.appendingPathComponent("m.json"))
        } throws: { error in
            guard case .writeFailed(let url, _) = error as? UploadError else { return false }
            return url.lastPathComponent == "m.json"
        }
    }

    // MARK: - XML

    @Test func s3AnswersAreRead() throws {
        let listed = Data(
            """
            <?xml version="1.0" encoding="UTF-8"?>
            <ListPartsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
              <UploadId>abc</UploadId><IsTruncated>true</IsTruncated><NextPartNumberMarker>2</NextPartNumberMarker>
              <Part><PartNumber>1</PartNumber><ETag>&quot;e1&quot;</ETag><Size>5242880</Size></Part>
              <Part><PartNumber>2</PartNumber><ETag>"e2"</ETag><Size>42</Size></Part>
            </ListPartsResult>
            """.utf8)
        let root = try #require(XMLTree.parse(listed))
        #expect(root.name == "ListPartsResult")
        #expect(root["IsTruncated"]?.text == "true")
        #expect(root.all("Part").map { $0["ETag"]?.text } == ["\"e1\"", "\"e2\""])
        #expect(root.all("Part").map { $0["Size"]?.text } == ["5242880", "42"])

        let error = Data(
            "<?xml version=\"1.0\"?><Error><Code>NoSuchUpload</Code><Message>The upload does not exist.</Message></Error>"
                .utf8)
        #expect(XMLErrorDocument.read(error)?.code == "NoSuchUpload")
        #expect(XMLErrorDocument.read(error)?.message == "The upload does not exist.")
        #expect(XMLErrorDocument.read(listed) == nil)
        #expect(XMLErrorDocument.read(Data("stored".utf8)) == nil)
        #expect(XMLTree.parse(Data("<unclosed>".utf8)) == nil)
        #expect(XMLTree.parse(Data("<a><b><![CDATA[x & y]]></b></a>".utf8))?["b"]?.text == "x & y")
    }

    @Test func theCompletionBodyListsThePartsInOrderEscaped() throws {
        let body = S3XML.completeMultipartUpload([(1, "\"a&b\""), (2, "\"c\"")])
        let root = try #require(XMLTree.parse(body))
        #expect(root.name == "CompleteMultipartUpload")
        #expect(root.all("Part").map { $0["PartNumber"]?.text } == ["1", "2"])
        #expect(root.all("Part").map { $0["ETag"]?.text } == ["\"a&b\"", "\"c\""])
    }

    @Test func s3ErrorsReadWell() {
        let receipt = XMLErrorDocument.reading(
            UploadReceipt(
                destination: URL(string: "https://media.example.com/videos/surf.mp4?X-Amz-Signature=secret")!,
                status: 400,
                body: Data(
                    "<Error><Code>InvalidPart</Code><Message>One or more parts could not be found.</Message></Error>"
                        .utf8)))
        #expect(
            UploadError.httpStatus(receipt).localizedDescription
                == "videos/surf.mp4: the server answered 400 Bad Request (InvalidPart: One or more parts could not be found.)"
        )
        let file = URL(fileURLWithPath: "/videos/surf.mp4")
        #expect(
            UploadError.fileChanged(file, reason: "it was 12 bytes when its upload began, and is 13 now")
                .localizedDescription
                == "/videos/surf.mp4: changed during its upload: it was 12 bytes when its upload began, and is 13 now")
        #expect(
            UploadError.invalidAnswer(receipt.destination, reason: "no ETag for part 2").localizedDescription
                == "videos/surf.mp4: the server's answer could not be understood: no ETag for part 2")
        let internalError = XMLErrorDocument.reading(
            UploadReceipt(
                destination: receipt.destination, status: 200,
                body: Data("\n<Error><Code>InternalError</Code><Message>Try again.</Message></Error>".utf8)))
        #expect(UploadError.httpStatus(internalError).isTransient, "S3's InternalError, even with a 200")
        #expect(!UploadError.httpStatus(receipt).isTransient, "InvalidPart is for good")
        #expect(!UploadError.fileChanged(file, reason: "").isTransient)
        #expect(!UploadError.invalidAnswer(file, reason: "").isTransient)
    }

    // MARK: - Progress

    @Test func progressAcrossPartsNeverGoesBackwardsWhenAPartIsSentAgain() {
        let reports = LockedValue<[Int64]>([])
        let merged = ProgressMerger(totals: [10, 10, 10]) { report in
            #expect(report.bytesTotal == 30)
            reports.withValue { $0.append(report.bytesSent) }
        }
        merged.finish([0])  // the storage holds part 1: it counts whole
        merged.update(1, bytesSent: 4)
        merged.update(2, bytesSent: 6)
        merged.update(1, bytesSent: 0)  // part 2 is sent again
        merged.update(1, bytesSent: 3)
        merged.update(1, bytesSent: 10)
        merged.update(2, bytesSent: 10)
        merged.update(0, bytesSent: 1)
        #expect(reports.value == [10, 14, 20, 26, 30])
    }
}

extension MultipartPartsTests {
    @Test func aRequestCancelledWhileItWaitsForItsURLCompletesAtOnceAndLeavesThePresignerToEnd() async throws {
        let presigner = HeldPresigner()
        let uploader = try S3Uploader(
            presigner: presigner, manifestFolder: URL(fileURLWithPath: "/tmp"))
        let outcome = LockedValue<Job<UploadReceipt>.Outcome?>(nil)
        let handle = uploader.upload(
            Media(
                bytes: Data([1, 2, 3]), destination: URL(string: "https://media.example.com/a.jpg")!,
                contentType: "image/jpeg")
        )
        .perform(on: ImmediateQueue()) { outcome.setValue($0) }
        try await withTimeLimit(.seconds(10)) { await presigner.asked.first { _ in true } }

        handle.cancel()
        guard case .failure(is CancellationError) = outcome.value else {
            Issue.record("expected a cancelled upload at once, got \(String(describing: outcome.value))")
            return
        }
        presigner.answer()
        let sawCancel = try await withTimeLimit(.seconds(10)) { await presigner.ended.first { _ in true } }
        #expect(sawCancel == false, "the presigner's task was not cancelled: it ran to its end")
        guard case .failure(is CancellationError) = outcome.value else {
            Issue.record("a late answer changed nothing, got \(String(describing: outcome.value))")
            return
        }
    }
}

/// A presigner that waits until the test answers, then says whether its
/// task was cancelled meanwhile.
private final class HeldPresigner: S3Presigner {
    let (asked, askedContinuation) = AsyncStream.makeStream(of: Void.self)
    let (ended, endedContinuation) = AsyncStream.makeStream(of: Bool.self)
    private let (gate, gateContinuation) = AsyncStream.makeStream(of: Void.self)

    func answer() {
        gateContinuation.yield()
    }

    func presignedURL(for operation: S3Operation, object: URL) async throws -> URL {
        askedContinuation.yield()
        // A cancelled task leaves this wait at once.
        _ = await gate.first { _ in true }
        endedContinuation.yield(Task.isCancelled)
        return URL(string: "http://127.0.0.1:9/never-sent")!
    }
}
