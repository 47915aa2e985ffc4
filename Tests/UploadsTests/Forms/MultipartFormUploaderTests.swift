import Foundation
import JobKit
import JobKitTesting
import TestSupport
import Testing

@testable import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The bytes of a form, exactly: what the parsers below agree with.
@Suite("Multipart form encoding", .timeLimit(.minutes(1)))
struct MultipartFormTests {
    /// The text of a body that is bytes alone.
    static func text(of segments: [BodySegment]) -> String? {
        guard case .data(let data) = HTTPBody(segments: segments) else { return nil }
        return String(decoding: data, as: UTF8.self)
    }

    @Test func fieldsInTheirOrderThenTheFilePartEveryLineEndedByCRLF() {
        let form = MultipartForm(boundary: "b0undary")
        let parts = [
            FormData.Part(name: "media_ids[]", content: .text("1")),
            FormData.Part(name: "media_ids[]", content: .text("2")),
            FormData.Part(name: "description", content: .text("two\nlines, é")),
            FormData.Part(
                name: "file", content: .bytes(Data("JPEG".utf8)), filename: "beach.jpg", contentType: "image/jpeg"),
        ]

        let expected: String =
            "--b0undary\r\nContent-Disposition: form-data; name=\"media_ids[]\"\r\n\r\n1\r\n"
            + "--b0undary\r\nContent-Disposition: form-data; name=\"media_ids[]\"\r\n\r\n2\r\n"
            + "--b0undary\r\nContent-Disposition: form-data; name=\"description\"\r\n\r\ntwo\nlines, é\r\n"
            + "--b0undary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"beach.jpg\"\r\n"
            + "Content-Type: image/jpeg\r\n\r\nJPEG\r\n--b0undary--\r\n"
        #expect(Self.text(of: form.body(of: parts, fileSizes: [:])) == expected, "a value is sent as given")
        #expect(form.contentType == "multipart/form-data; boundary=b0undary")
    }

    @Test func eachFileIsReadFromDiskBetweenTheBytesAroundItWithItsSize() {
        let form = MultipartForm(boundary: "b")
        let (beach, dunes) = (URL(fileURLWithPath: "/photos/beach.jpg"), URL(fileURLWithPath: "/photos/dunes.png"))
        var data = FormData()
        data.append(fileAt: beach, named: "images[]")
        data.append("Dawn", named: "caption")
        data.append(
            fileAt: dunes, named: "images[]", filename: "dunes-2.png", headers: ["X-B": "2", "content-language": "fr"])
        data.append(Data("{}".utf8), named: "meta", contentType: "application/json")

        let segments = form.body(of: data.parts, fileSizes: [0: 1_000, 2: 2_000])

        #expect(segments.count == 5)
        #expect(segments[1] == .file(beach, offset: 0, length: 1_000))
        #expect(segments[3] == .file(dunes, offset: 0, length: 2_000))
        let first: String =
            "--b\r\nContent-Disposition: form-data; name=\"images[]\"; filename=\"beach.jpg\"\r\n"
            + "Content-Type: image/jpeg\r\n\r\n"
        let between: String =
            "\r\n--b\r\nContent-Disposition: form-data; name=\"caption\"\r\n\r\nDawn\r\n"
            + "--b\r\nContent-Disposition: form-data; name=\"images[]\"; filename=\"dunes-2.png\"\r\n"
            + "Content-Type: image/png\r\ncontent-language: fr\r\nX-B: 2\r\n\r\n"
        let last: String =
            "\r\n--b\r\nContent-Disposition: form-data; name=\"meta\"\r\nContent-Type: application/json\r\n\r\n"
            + "{}\r\n--b--\r\n"
        #expect(Self.text(of: [segments[0]]) == first)
        #expect(Self.text(of: [segments[2]]) == between, "the part's own headers after its type, by name")
        #expect(Self.text(of: [segments[4]]) == last)
    }

    @Test func aMediumsFileGoesBetweenItsFieldsAndTheFormsEnd() {
        let form = MultipartForm(boundary: "b")
        let file = URL(fileURLWithPath: "/videos/surf.mp4")
        let parts = [
            FormData.Part(name: "description", content: .text("Surf")),
            FormData.Part(name: "file", content: .file(file), filename: "surf.mp4", contentType: "video/mp4"),
        ]
        let head: String =
            "--b\r\nContent-Disposition: form-data; name=\"description\"\r\n\r\nSurf\r\n"
            + "--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"surf.mp4\"\r\n"
            + "Content-Type: video/mp4\r\n\r\n"
        let expected: [BodySegment] = [
            .bytes(Data(head.utf8)), .file(file, offset: 0, length: 18_000), .bytes(Data("\r\n--b--\r\n".utf8)),
        ]
        #expect(form.body(of: parts, fileSizes: [1: 18_000]) == expected, "the bytes a medium's form always had")
    }

    @Test func aPartsDefaultsAreWhatABrowserSends() {
        var form = FormData()
        form.append(fileAt: URL(fileURLWithPath: "/a/Clip.MOV"), named: "video")
        form.append(fileAt: URL(fileURLWithPath: "/a/notes"), named: "notes")
        form.append(Data("x".utf8), named: "thumb", filename: "thumb")
        form.append(Data("x".utf8), named: "raw")
        form.append("v", named: "field")
        form.append(Data("x".utf8), named: "small", filename: "small.PNG")
        form.append(fileAt: URL(fileURLWithPath: "/a/beach.jpg"), named: "photo", filename: "upload")
        form.append(fileAt: URL(fileURLWithPath: "/a/beach.jpg"), named: "photo", filename: "upload.png")

        let filenames: [String?] = ["Clip.MOV", "notes", "thumb", nil, nil, "small.PNG", "upload", "upload.png"]
        #expect(form.parts.map(\.filename) == filenames)
        let types: [String?] = [
            "video/quicktime", "application/octet-stream", "application/octet-stream", nil, nil, "image/png",
            "image/jpeg", "image/png",
        ]
        #expect(form.parts.map(\.contentType) == types, "by the name sent, else the file's own")
        #expect(form.parts[0].content == .file(URL(fileURLWithPath: "/a/Clip.MOV")))
        #expect(FormData.contentType(ofFileNamed: "beach.JPG") == "image/jpeg")
        #expect(FormData.contentType(ofFileNamed: "archive.tar.gz") == "application/gzip")
        #expect(FormData.contentType(ofFileNamed: "notes.unknown") == "application/octet-stream")
        #expect(FormData.contentType(ofFileNamed: ".jpg") == "image/jpeg")
    }

    @Test(arguments: [
        (["X Y": "1"], "part 1 (\"meta\") has a header named \"X Y\", not a valid name"),
        (["": "1"], "part 1 (\"meta\") has a header named \"\", not a valid name"),
        (["Ünicode": "1"], "part 1 (\"meta\") has a header named \"Ünicode\", not a valid name"),
        (["X-A": "1\r\nX-B: 2"], "part 1 (\"meta\")'s header X-A has a line break or a NUL in its value"),
        (
            ["content-disposition": "form-data; name=\"x\""],
            "part 1 (\"meta\") sets Content-Disposition, which the form writes from its name and file name"
        ),
        (
            ["Content-Type": "text/plain"],
            "part 1 (\"meta\") sets Content-Type in its headers: give it as its content type"
        ),
        (["X-A": "1", "x-a": "2"], "part 1 (\"meta\") has two headers named x-a"),
    ])
    func aHeaderAPartCannotCarryIsRefusedWithWhy(headers: [String: String], reason: String) {
        let destination = URL(string: "https://social.example/api/v2/media")!
        let parts = [FormData.Part(name: "meta", content: .text("{}"), headers: headers)]
        #expect(throws: UploadError.invalidForm(destination, reason: reason)) {
            try MultipartForm.validate(parts, to: destination)
        }
        let fine = [FormData.Part(name: "meta", content: .text("{}"), headers: ["X-Ok_1.~": "é; a=\"b\""])]
        #expect(throws: Never.self) { try MultipartForm.validate(fine, to: destination) }
    }

    @Test func aContentTypeGoesAsGivenUnlessItIsNotOneLine() throws {
        let destination = URL(string: "https://example.com/albums/1")!
        let json = FormData.Part(name: "meta", content: .text("{}"), contentType: "application/json; charset=\"utf-8\"")
        try MultipartForm.validate([json], to: destination)
        let head = String(decoding: MultipartForm(boundary: "b").head(of: json), as: UTF8.self)
        #expect(head.hasSuffix("\r\nContent-Type: application/json; charset=\"utf-8\"\r\n\r\n"))
        let injected = FormData.Part(name: "meta", content: .text("{}"), contentType: "text/plain\r\nX-Injected: 1")
        #expect(
            throws: UploadError.invalidForm(
                destination, reason: "part 2 (\"meta\")'s content type has a line break or a NUL")
        ) {
            try MultipartForm.validate([json, injected], to: destination)
        }
    }

    @Test func namesAndFilenamesEscapeQuotesCRAndLFAsTheHTMLStandardDoesAndNothingElse() {
        #expect(MultipartForm.escaped("a\"b\rc\nd") == "a%22b%0Dc%0Ad")
        #expect(MultipartForm.escaped("é 😀 100% \\ ; = '") == "é 😀 100% \\ ; = '")
        #expect(MultipartForm.escaped("\r\n") == "%0D%0A")
        let form = MultipartForm(boundary: "b")
        let field = form.head(of: FormData.Part(name: "x\"y", content: .text("v\"")))
        let file = form.head(
            of: FormData.Part(name: "f\n", content: .bytes(Data()), filename: "a\".jpg", contentType: "image/jpeg"))
        #expect(String(decoding: field, as: UTF8.self).contains("name=\"x%22y\"\r\n\r\n"))
        #expect(String(decoding: file, as: UTF8.self).contains("name=\"f%0A\"; filename=\"a%22.jpg\"\r\n"))
        let body = Self.text(of: form.body(of: [FormData.Part(name: "x", content: .text("v\""))], fileSizes: [:]))
        #expect(body?.contains("\r\n\r\nv\"\r\n") == true, "the value is not escaped")
    }

    @Test func eachFormHasABoundaryOf128RandomBits() {
        let boundaries = (0..<200).map { _ in MultipartForm().boundary }
        #expect(Set(boundaries).count == boundaries.count)
        for boundary in boundaries {
            #expect(boundary.hasPrefix("JobKit-"))
            let bits = boundary.dropFirst("JobKit-".count)
            #expect(bits.count == 32 && bits.allSatisfy(\.isHexDigit), "\(boundary)")
        }
        // Every one of the 128 bits varies: none is fixed across forms.
        let values = boundaries.map { UInt128($0.dropFirst("JobKit-".count), radix: 16) ?? 0 }
        #expect(values.reduce(UInt128(0)) { $0 | $1 } == ~UInt128(0))
        #expect(values.reduce(~UInt128(0)) { $0 & $1 } == 0)
    }
}

/// `MultipartFormUploader` against Node's `http` server, its forms parsed
/// by Node's own `Request.formData()`, and against Werkzeug's parser: two
/// parsers nobody here wrote.
@Suite("MultipartFormUploader", .startsProcesses, .serialized, .timeLimit(.minutes(1)))
struct MultipartFormUploaderTests {
    /// A name an app could give a file: a quote, CR, LF, an emoji and
    /// letters that are not ASCII.
    static let awkwardName = "Plage \"à l'aube\"\r\nbis 🌅 Ærø.jpg"
    /// A file part that ends off any 64 KiB boundary.
    static let largeSize = 8 * 1024 * 1024 + 12_345

    /// The video the form carries, its fields, and the uploader's.
    static func video(at file: URL, to destination: URL) -> Video {
        var video = Video(file: file, destination: destination, contentType: "video/mp4")
        video.media.filename = awkwardName
        video.media.formFields = [
            FormField(name: "description", value: "Surf at dawn, \"golden\" 🌊\nsecond line"),
            FormField(name: "media_ids[]", value: "101"), FormField(name: "media_ids[]", value: "102"),
        ]
        return video
    }

    static let uploaderFields = [FormField(name: "upload_preset", value: "posts")]

    @Test func aLargeFileArrivesByteExactAfterItsFieldsThroughNodesFormData() async throws {
        try await TransferGate.sharing {
            try await FixtureServer.with { server in
                let folder = try TemporaryFolder()
                defer { folder.remove() }
                let file = folder.url.appendingPathComponent("surf.mp4")
                try writePatternedFile(file, size: Self.largeSize)
                let uploader = try MultipartFormUploader(
                    fields: Self.uploaderFields, headers: ["Authorization": "Bearer s3cret"])
                let video = Self.video(at: file, to: server.url("api/v2/media"))
                let reports = LockedValue<[UploadProgress]>([])

                let receipt = try await withTimeLimit(.seconds(40)) {
                    try await Job.uploading(video, using: uploader) { progress in
                        reports.withValue { $0.append(progress) }
                    }.value
                }

                let upload = try #require(try await server.received().first)
                #expect(upload.formError == nil)
                let form = try #require(upload.form)
                #expect(
                    form.fields == [
                        ["upload_preset", "posts"], ["description", "Surf at dawn, \"golden\" 🌊\nsecond line"],
                        ["media_ids[]", "101"], ["media_ids[]", "102"],
                    ])
                #expect(form.entries.last?.name == "file", "the file's part comes last")
                let part = try #require(form.files.first)
                #expect(form.files.count == 1)
                #expect(part.filename == Self.awkwardName, "the name arrives as the app gave it")
                #expect(part.type == "video/mp4")
                #expect(part.size == Self.largeSize)
                #expect(part.sha256 == (try await sha256(of: file)))
                #expect(upload.method == "POST")
                #expect(upload.headers["authorization"] == "Bearer s3cret")
                #expect(upload.headers["content-type"]?.hasPrefix("multipart/form-data; boundary=JobKit-") == true)
                #expect(upload.headers["content-length"] == "\(upload.length)", "exactly the body's length")
                #expect(upload.headers["transfer-encoding"] == nil, "never chunked")
                #expect(upload.headers["idempotency-key"] != nil)
                #expect(try JSONDecoder().decode(ParsedForm.self, from: receipt.body) == form, "the server's answer")
                let progress = reports.value
                #expect(progress.last?.bytesSent == Int64(upload.length), "progress counts the whole form")
                #expect(progress.last?.bytesTotal == Int64(upload.length))
                #expect(zip(progress, progress.dropFirst()).allSatisfy { $0.bytesSent <= $1.bytesSent })
            }
        }
    }

    @Test(WerkzeugFormServer.requirement)
    func theSameFormThroughWerkzeugsParser() async throws {
        try await TransferGate.sharing {
            try await WerkzeugFormServer.with { server in
                let folder = try TemporaryFolder()
                defer { folder.remove() }
                let file = folder.url.appendingPathComponent("surf.mp4")
                try writePatternedFile(file, size: Self.largeSize)
                let uploader = try MultipartFormUploader(fields: Self.uploaderFields)
                let video = Self.video(at: file, to: server.url("api/v2/media"))

                let receipt = try await withTimeLimit(.seconds(40)) {
                    try await Job.uploading(video, using: uploader).value
                }

                let form = try JSONDecoder().decode(ParsedForm.self, from: receipt.body)
                #expect(
                    form.fields == [
                        ["upload_preset", "posts"], ["description", "Surf at dawn, \"golden\" 🌊\nsecond line"],
                        ["media_ids[]", "101"], ["media_ids[]", "102"],
                    ])
                let part = try #require(form.files.first)
                // Werkzeug decodes `%22` (and `\"`), but leaves `%0D` and
                // `%0A` as they came: what it gives for a browser's form too.
                #expect(part.filename == "Plage \"à l'aube\"%0D%0Abis 🌅 Ærø.jpg")
                #expect(part.name == "file")
                #expect(part.type == "video/mp4")
                #expect(part.size == Self.largeSize)
                #expect(part.sha256 == (try await sha256(of: file)))
                #expect(form.contentLength != nil && form.contentLength == form.received, "exactly the body's length")
                #expect(form.transferEncoding == nil, "never chunked")
            }
        }
    }

    @Test func bytesInMemoryAreAFileNamedAfterTheDestinationUnlessTheAppNamesIt() async throws {
        try await FixtureServer.with { server in
            let uploader = try MultipartFormUploader(fileField: "image")
            let jpeg = patternedBytes(70_000)
            let unnamed = Photo(bytes: jpeg, destination: server.url("media/beach.jpg"))
            var named = Photo(bytes: jpeg, destination: server.url("media"), contentType: "image/png")
            named.media.filename = "dawn.png"
            let photos = [unnamed, named]

            try await withTimeLimit(.seconds(20)) {
                for photo in photos { _ = try await Job.uploading(photo, using: uploader).value }
            }

            let received = try await server.received()
            #expect(received.count == 2)
            let forms = received.compactMap(\.form)
            #expect(forms.map(\.entries.count) == [1, 1], "no fields: the file alone")
            #expect(forms.flatMap(\.files).map(\.name) == ["image", "image"])
            #expect(forms.flatMap(\.files).map(\.filename) == ["beach.jpg", "dawn.png"])
            #expect(forms.flatMap(\.files).map(\.type) == ["image/jpeg", "image/png"])
            #expect(forms.flatMap(\.files).map(\.size) == [70_000, 70_000])
            #expect(received.allSatisfy { $0.headers["content-length"] == "\($0.length)" })
        }
    }

    @Test func aRetriedFormIsBuiltAfreshWithTheSameIdempotencyKey() async throws {
        try await FixtureServer.with { server in
            try await server.setRule("api/v2/media", ["status": 503, "times": 1])
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            let file = folder.url.appendingPathComponent("beach.jpg")
            try writePatternedFile(file, size: 200_000)
            let photo = Photo(file: file, destination: server.url("api/v2/media"))
            let attempts = UploadAttempts(retry: RetryPolicy(attempts: 2, initialDelay: .milliseconds(1)))

            let receipt = try await withTimeLimit(.seconds(20)) {
                try await Job.uploading(photo, using: MultipartFormUploader(), attempts: attempts).value
            }

            let received = try await server.received()
            #expect(received.count == 2)
            #expect(receipt.status == 201)
            #expect(received.allSatisfy { $0.form?.files.first?.size == 200_000 }, "both forms whole")
            #expect(Set(received.map { $0.headers["content-type"] }).count == 2, "a new boundary per attempt")
            #expect(Set(received.map { $0.headers["idempotency-key"] }).count == 1)
            #expect(received[0].headers["idempotency-key"] != nil)
        }
    }

    @Test func theFormsContentTypeWinsOverOneInTheHeaders() async throws {
        try await FixtureServer.with { server in
            let uploader = try MultipartFormUploader(headers: ["content-type": "application/json", "X-App": "1"])
            let photo = Photo(bytes: Data("jpeg".utf8), destination: server.url("media"))
            try await withTimeLimit(.seconds(20)) {
                _ = try await Job.uploading(photo, using: uploader).value
            }
            let upload = try #require(try await server.received().first)
            #expect(upload.headers["content-type"]?.hasPrefix("multipart/form-data; boundary=") == true)
            #expect(upload.headers["x-app"] == "1")
            #expect(upload.form?.files.first?.size == 4)
        }
    }

    @Test func aMissingFileOrABadDestinationFailsBeforeAByteIsSent() async throws {
        try await FixtureServer.with { server in
            let folder = try TemporaryFolder()
            defer { folder.remove() }
            let missing = folder.url.appendingPathComponent("gone.mp4")
            let uploader = try MultipartFormUploader()
            let video = Video(file: missing, destination: server.url("api/v2/media"))
            let ftp = Photo(bytes: Data("x".utf8), destination: URL(string: "ftp://example.com/media")!)

            await #expect(throws: UploadError.fileNotFound(missing)) {
                try await Job.uploading(video, using: uploader).value
            }
            await #expect(
                throws: UploadError.invalidDestination(ftp.media.destination, reason: "not an http or https URL")
            ) {
                try await Job.uploading(ftp, using: uploader).value
            }
            #expect(try await server.received().isEmpty)
        }
    }

    @Test(arguments: [
        (413, "File is too large", "413 Payload Too Large"),
        (422, "Validation failed: File content type is invalid", "422 Unprocessable Content"),
    ])
    func aRefusalNamesTheFileAndQuotesTheServersErrorAndIsNotRetried(
        status: Int, said: String, statusLine: String
    ) async throws {
        try await FixtureServer.with { server in
            let answer = String(data: try JSONSerialization.data(withJSONObject: ["error": said]), encoding: .utf8)!
            try await server.setRule(
                "api/v2/media", ["status": status, "times": 5, "answer": answer, "answer_type": "application/json"])
            var photo = Photo(bytes: Data("jpeg".utf8), destination: server.url("api/v2/media"))
            photo.media.filename = "beach.jpg"
            let attempts = UploadAttempts(retry: RetryPolicy(attempts: 3, initialDelay: .milliseconds(1)))

            let error = await #expect(throws: UploadError.self) {
                try await Job.uploading(photo, using: MultipartFormUploader(), attempts: attempts).value
            }

            #expect(
                error?.localizedDescription
                    == "beach.jpg → api/v2/media: the server answered \(statusLine) (\"\(said)\")")
            guard case .httpStatus(let receipt) = error else {
                Issue.record("not a status: \(String(describing: error))")
                return
            }
            #expect(receipt.status == status)
            #expect(receipt.filename == "beach.jpg")
            #expect(try await server.received().count == 1, "a refusal is not retried")
        }
    }

    @Test func aReceiptNamesTheFileItsFormSent() async throws {
        try await FixtureServer.with { server in
            let photo = Photo(bytes: Data("jpeg".utf8), destination: server.url("api/v2/media/beach.jpg"))
            let receipt = try await withTimeLimit(.seconds(20)) {
                try await Job.uploading(photo, using: MultipartFormUploader()).value
            }
            #expect(receipt.filename == "beach.jpg")
            #expect(try await Job.uploading(photo, using: URLSessionUploader()).value.filename == nil)
        }
    }
}
