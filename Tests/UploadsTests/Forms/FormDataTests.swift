import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing

@testable import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Forms of several files and fields in one request (`FormData`), read by
/// parsers nobody here wrote: Node's `Request.formData()` (undici's), and
/// Werkzeug's and the standard library's `email` parser in Python.
@Suite("Forms of several parts", .startsProcesses, .serialized, .timeLimit(.minutes(1)))
struct FormDataTests {
    /// A name an app could give a part or a file: a quote, CR, LF, an
    /// emoji and letters that are not ASCII.
    static let awkwardName = "Plage \"à l'aube\"\r\nbis 🌅 Ærø.jpg"
    static let caption = "Dawn, \"golden\" 🌊\r\nsecond line"
    /// The caption's name: a quote, CR, LF and letters that are not ASCII.
    static let captionName = "légende \"du jour\"\r\n✍️"
    static let metadata = Data(#"{"album":"Été","tags":["sea"]}"#.utf8)
    /// A file that ends off any 64 KiB boundary.
    static let largeSize = 4 * 1024 * 1024 + 12_345

    /// The files a form sends, and the form: the uploader's field, a
    /// caption, a JSON part, a large file, a file with an awkward name
    /// and headers of its own, and bytes sent as a file.
    struct Sample {
        let folder: TemporaryFolder
        let large: URL
        let small: URL
        let thumbnail: URL
        let form: FormData

        init() throws {
            folder = try TemporaryFolder()
            large = folder.url.appendingPathComponent("surf.mp4")
            small = folder.url.appendingPathComponent("beach.jpg")
            thumbnail = folder.url.appendingPathComponent("thumbnail.png")
            try writePatternedFile(large, size: FormDataTests.largeSize)
            try writePatternedFile(small, size: 70_001)
            try patternedBytes(3_000, seed: 7).write(to: thumbnail)
            var form = FormData()
            form.append(FormDataTests.caption, named: FormDataTests.captionName)
            form.append(FormDataTests.metadata, named: "meta", contentType: "application/json")
            form.append(fileAt: large, named: "media[]")
            form.append(
                fileAt: small, named: "media[]", filename: FormDataTests.awkwardName,
                headers: ["Content-Language": "fr", "X-Checksum": "none"])
            form.append(
                patternedBytes(3_000, seed: 7), named: "thumbnail", filename: "thumb.png", contentType: "image/png")
            self.form = form
        }
    }

    static let uploaderFields = [FormField(name: "upload_preset", value: "posts")]

    @Test func severalFilesAndFieldsArriveInOneRequestByteExactThroughNodesFormData() async throws {
        try await TransferGate.sharing {
            try await FixtureServer.with { server in
                let sample = try Sample()
                defer { sample.folder.remove() }
                let uploader = try MultipartFormUploader(
                    method: .put, fields: Self.uploaderFields, headers: ["Authorization": "Bearer s3cret"])
                let reports = LockedValue<[UploadProgress]>([])

                let receipt = try await withTimeLimit(.seconds(40)) {
                    try await Job.uploading(sample.form, to: server.url("albums/1"), using: uploader) { progress in
                        reports.withValue { $0.append(progress) }
                    }.value
                }

                let received = try await server.received()
                #expect(received.count == 1, "one request")
                let upload = try #require(received.first)
                #expect(upload.formError == nil)
                let form = try #require(upload.form)
                #expect(
                    form.entries.map(\.name) == [
                        "upload_preset", Self.captionName, "meta", "media[]", "media[]", "thumbnail",
                    ], "names arrive as the app gave them")
                #expect(
                    form.fields == [
                        ["upload_preset", "posts"], [Self.captionName, Self.caption],
                        ["meta", String(decoding: Self.metadata, as: UTF8.self)],
                    ])
                #expect(form.files.map(\.filename) == ["surf.mp4", Self.awkwardName, "thumb.png"])
                #expect(form.files.map(\.type) == ["video/mp4", "image/jpeg", "image/png"])
                #expect(form.files.map(\.size) == [Self.largeSize, 70_001, 3_000])
                #expect(form.files[0].sha256 == (try await sha256(of: sample.large)))
                #expect(form.files[1].sha256 == (try await sha256(of: sample.small)))
                #expect(form.files[2].sha256 == (try await sha256(of: sample.thumbnail)))
                #expect(upload.method == "PUT")
                #expect(upload.headers["authorization"] == "Bearer s3cret")
                #expect(upload.headers["content-length"] == "\(upload.length)", "exactly the body's length")
                #expect(upload.headers["transfer-encoding"] == nil, "never chunked")
                #expect(upload.headers["idempotency-key"] != nil)
                #expect(receipt.filename == "surf.mp4, \(Self.awkwardName), thumb.png", "errors name the files")
                let progress = reports.value
                #expect(progress.last?.bytesSent == Int64(upload.length), "progress counts the whole form")
                #expect(zip(progress, progress.dropFirst()).allSatisfy { $0.bytesSent <= $1.bytesSent })
            }
        }
    }

    @Test(WerkzeugFormServer.requirement)
    func theSameFormThroughWerkzeugAndTheEmailParserWithEveryPartsHeaders() async throws {
        try await TransferGate.sharing {
            try await WerkzeugFormServer.with { server in
                let sample = try Sample()
                defer { sample.folder.remove() }
                let uploader = try MultipartFormUploader(method: .patch, fields: Self.uploaderFields)

                let receipt = try await withTimeLimit(.seconds(40)) {
                    try await Job.uploading(sample.form, to: server.url("albums/1"), using: uploader).value
                }

                let form = try JSONDecoder().decode(ParsedForm.self, from: receipt.body)
                #expect(form.method == "PATCH")
                #expect(form.contentLength != nil && form.contentLength == form.received, "exactly the body's length")
                #expect(form.transferEncoding == nil, "never chunked")
                // Werkzeug: fields first, then files, each in order. It
                // decodes `%22` in names, but leaves `%0D` and `%0A` as they
                // came: what it gives for a browser's form too.
                #expect(
                    form.fields == [
                        ["upload_preset", "posts"], ["légende \"du jour\"%0D%0A✍️", Self.caption],
                        ["meta", String(decoding: Self.metadata, as: UTF8.self)],
                    ])
                #expect(form.files.map(\.size) == [Self.largeSize, 70_001, 3_000])
                #expect(form.files[0].sha256 == (try await sha256(of: sample.large)))
                #expect(form.files[1].sha256 == (try await sha256(of: sample.small)))
                #expect(form.files[1].headers?.contains(["Content-Language", "fr"]) == true)
                #expect(form.files[1].headers?.contains(["X-Checksum", "none"]) == true)

                // The email parser: every part in order, with every header.
                let parts = try #require(form.parts)
                #expect(
                    parts.map(\.name) == [
                        "upload_preset", "légende %22du jour%22%0D%0A✍️", "meta", "media[]", "media[]", "thumbnail",
                    ])
                let types: [String?] = [nil, nil, "application/json", "video/mp4", "image/jpeg", "image/png"]
                #expect(parts.map(\.type) == types, "a field has no type; bytes have theirs")
                #expect(parts[2].size == Self.metadata.count)
                #expect(parts.map(\.size)[3...] == [Self.largeSize, 70_001, 3_000])
                #expect(parts[3].sha256 == (try await sha256(of: sample.large)))
                #expect(parts[4].sha256 == (try await sha256(of: sample.small)))
                #expect(parts[5].sha256 == (try await sha256(of: sample.thumbnail)))
                // It reads names as sent: `"`, CR and LF escaped, the rest
                // in UTF-8.
                #expect(parts[4].filename == "Plage %22à l'aube%22%0D%0Abis 🌅 Ærø.jpg")
                #expect(
                    parts[4].headers == [
                        [
                            "Content-Disposition",
                            "form-data; name=\"media[]\"; filename=\"Plage %22à l'aube%22%0D%0Abis 🌅 Ærø.jpg\"",
                        ],
                        ["Content-Type", "image/jpeg"], ["Content-Language", "fr"], ["X-Checksum", "none"],
                    ], "the part's own headers after its type, in the order of their names")
                #expect(
                    parts[1].headers == [["Content-Disposition", "form-data; name=\"légende %22du jour%22%0D%0A✍️\""]])
            }
        }
    }

    @Test func aFormCanGoWithoutAnIdempotencyKeyAndWithoutFiles() async throws {
        try await FixtureServer.with { server in
            let uploader = try MultipartFormUploader(sendsIdempotencyKey: false)
            let form = FormData(parts: [
                FormData.Part(name: "page", content: .text("1")), FormData.Part(name: "empty", content: .text("")),
            ])
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            var withAnEmptyFile = FormData()
            withAnEmptyFile.append(fileAt: try folder.file("empty.txt", bytes: Data()), named: "notes")
            withAnEmptyFile.append("after", named: "then")
            let emptyFile = withAnEmptyFile

            let receipt = try await withTimeLimit(.seconds(20)) {
                try await Job.uploading(form, to: server.url("search"), using: uploader).value
            }

            let upload = try #require(try await server.received().first)
            #expect(upload.method == "POST")
            #expect(upload.headers["idempotency-key"] == nil)
            #expect(upload.form?.fields == [["page", "1"], ["empty", ""]])
            #expect(receipt.filename == nil, "no file to name")

            _ = try await withTimeLimit(.seconds(20)) {
                try await Job.uploading(emptyFile, to: server.url("notes"), using: uploader).value
            }
            let second = try #require(try await server.received().last?.form)
            #expect(second.files.map(\.size) == [0] && second.files.first?.type == "text/plain")
            #expect(second.fields == [["then", "after"]])
        }
    }

    @Test func aMissingFileABadHeaderOrABadDestinationFailsBeforeAByteIsSent() async throws {
        try await FixtureServer.with { server in
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            let present = folder.url.appendingPathComponent("beach.jpg")
            try writePatternedFile(present, size: 1_000)
            let missing = folder.url.appendingPathComponent("gone.mp4")
            let destination = server.url("albums/1")
            let uploader = try MultipartFormUploader()
            var withMissing = FormData()
            withMissing.append(fileAt: present, named: "media[]")
            withMissing.append(fileAt: missing, named: "media[]")
            var withFolder = FormData()
            withFolder.append(fileAt: folder.url, named: "media[]")
            var withBadHeader = FormData()
            withBadHeader.append(fileAt: present, named: "media[]", headers: ["X-Note": "one\r\nX-Injected: 1"])

            await #expect(throws: UploadError.fileNotFound(missing)) {
                try await Job.uploading(withMissing, to: destination, using: uploader).value
            }
            await #expect(throws: UploadError.unreadableFile(folder.url, reason: "not a regular file")) {
                try await Job.uploading(withFolder, to: destination, using: uploader).value
            }
            let error = await #expect(throws: UploadError.self) {
                try await Job.uploading(withBadHeader, to: destination, using: uploader).value
            }
            #expect(
                error?.localizedDescription
                    == "albums/1: the form cannot be sent: part 1 (\"media[]\")'s header X-Note has a line break or a NUL in its value"
            )
            let ftp = URL(string: "ftp://example.com/albums/1")!
            await #expect(throws: UploadError.invalidDestination(ftp, reason: "not an http or https URL")) {
                try await Job.uploading(withMissing, to: ftp, using: uploader).value
            }
            #expect(try await server.received().isEmpty)
        }
    }

    @Test func aFormRetriedAsAnyJobIsSentWholeAgainWithTheSameIdempotencyKey() async throws {
        try await FixtureServer.with { server in
            try await server.setRule("albums/1", ["status": 503, "times": 1])
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            let file = folder.url.appendingPathComponent("beach.jpg")
            try writePatternedFile(file, size: 200_000)
            var form = FormData()
            form.append("Dawn", named: "caption")
            form.append(fileAt: file, named: "media[]")
            let reports = LockedValue<[UploadProgress]>([])
            let upload = Job.uploading(form, to: server.url("albums/1"), using: try MultipartFormUploader()) {
                progress in reports.withValue { $0.append(progress) }
            }

            let receipt = try await withTimeLimit(
                .seconds(20), performing: upload.retry(RetryPolicy(attempts: 2, initialDelay: .milliseconds(1))))

            let received = try await server.received()
            #expect(receipt.status == 201)
            #expect(received.count == 2)
            #expect(received.allSatisfy { $0.form?.files.first?.size == 200_000 }, "both forms whole")
            #expect(Set(received.map { $0.headers["content-type"] }).count == 2, "a new boundary per attempt")
            #expect(Set(received.map { $0.headers["idempotency-key"] }).count == 1)
            let progress = reports.value
            #expect(progress.last?.bytesSent == Int64(received[1].length), "the whole form")
            #expect(zip(progress, progress.dropFirst()).allSatisfy { $0.bytesSent <= $1.bytesSent }, "never back")
        }
    }

    @Test func aFormEndsOnceTheServerSaysItsMediumIsReadyWhenTheUploaderWaits() async throws {
        try await MastodonFixture.with(processingPolls: 2) { fixture in
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            let video = folder.url.appendingPathComponent("surf.mp4")
            try writePatternedFile(video, size: 50_000)
            let uploader = try MultipartFormUploader(
                headers: ["Authorization": "Bearer \(MastodonFixture.token)"], processing: MastodonTests.quick)
            var form = FormData()
            form.append(fileAt: video, named: "file")
            form.append("A wave breaking", named: "description")
            let upload = Job.uploading(
                form, to: fixture.baseURL.appendingPathComponent("api/v2/media"), using: uploader)

            let receipt = try await withTimeLimit(.seconds(20)) {
                try await upload.value
            }

            let medium = try #require(try await fixture.state().media.first)
            #expect(receipt.status == 200, "the answer that said ready")
            #expect(medium.ready && medium.questions == 2)
            #expect(medium.filename == "surf.mp4" && medium.description == "A wave breaking")
            #expect(medium.sha256 == (try await sha256(of: video)))
        }
    }

    @Test func aSnapshotNamesTheFormByItsDestinationWithTheBytesSent() throws {
        let queue = TestQueue()
        var form = FormData()
        form.append("Dawn", named: "caption")
        let upload = Job.uploading(
            form, to: URL(string: "http://127.0.0.1:9/albums/1/photos")!, using: try MultipartFormUploader())
        let handle = upload.perform(on: queue) { _ in }
        #expect(queue.runNext())  // the upload's body, which performs its request job
        #expect(handle.snapshot().line == "upload form to albums/1/photos (running, nothing sent yet)")
        handle.cancel()
    }
}
