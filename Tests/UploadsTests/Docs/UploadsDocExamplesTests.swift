import Foundation
import JobKit
import JobKitTesting
import Testing
import Uploads
import UploadsTesting

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// The examples of the Uploads module's doc comments and DocC catalog,
// verbatim, each between BEGIN DOC and END DOC. JobKitTests'
// DocExamplesCompileTests checks that every one of them is in this file.

/// The app's client of its backend, in the doc examples.
protocol MediaAPI: Sendable {
    func presign(_ action: String, key: String, uploadID: String?, partNumber: Int?) async throws -> URL
}

// BEGIN DOC
struct Presigner: S3Presigner {
    let api: any MediaAPI  // the app's client of its own backend

    func presignedURL(for operation: S3Operation, object: URL) async throws -> URL {
        try await api.presign(
            operation.action, key: object.path, uploadID: operation.uploadID, partNumber: operation.partNumber)
    }
}
// END DOC

@Suite("Doc comment examples: Uploads", .timeLimit(.minutes(1)))
struct UploadsDocExamplesTests {
    private static func photo(_ name: String) -> Photo {
        Photo(bytes: Data(name.utf8), destination: URL(string: "https://uploads.example.com/\(name).jpg")!)
    }

    @Test func mediaExample() throws {
        let error = #expect(throws: UploadError.self) {
            // BEGIN DOC
            let clip = Media(
                file: URL(fileURLWithPath: "/videos/surf.mov"),
                destination: URL(string: "https://uploads.example.com/surf.mov")!,
                contentType: "video/quicktime")
            let size = try clip.byteCount()
            // END DOC
            _ = size
        }
        #expect(error == .fileNotFound(URL(fileURLWithPath: "/videos/surf.mov")))
    }

    @Test func outboxExample() async throws {
        let temporary = try TemporaryFolder()
        defer { temporary.remove() }
        let applicationSupport = temporary.url
        let uploader = InMemoryUploader()
        let post = Post(
            text: "Surf's up", photos: [Self.photo("beach")],
            destination: URL(string: "https://uploads.example.com/posts/42.json")!)
        // BEGIN DOC
        let outbox = try Outbox(folder: applicationSupport.appendingPathComponent("outbox"), uploader: uploader)
        try outbox.add(post, priority: .high)
        for await posts in outbox.changes {
            print(posts.map { "\($0.id): \($0.state)" })
            if posts.allSatisfy({ [.published, .failed].contains($0.state) }) { break }
        }
        // END DOC
        #expect(uploader.uploads.map(\.destination) == [post.photos[0].media.destination, post.destination!])
        outbox.close()
    }

    @Test func outboxOptionsExample() throws {
        let temporary = try TemporaryFolder()
        defer { temporary.remove() }
        // BEGIN DOC
        let options = Outbox.Options(
            publishing: PublishOptions(maxConcurrentUploads: 2, retry: RetryPolicy(attempts: 4)),
            maxBytesInFlight: 16 * 1024 * 1024)
        // END DOC
        let outbox = try Outbox(folder: temporary.url, uploader: InMemoryUploader(), options: options)
        #expect(outbox.options.publishing.maxConcurrentUploads == 2 && outbox.options.publishing.retry.attempts == 4)
        #expect(outbox.options.maxBytesInFlight == 16 * 1024 * 1024)
        outbox.close()
    }

    @Test func postAndInMemoryUploaderExamples() throws {
        let beach = Self.photo("beach")
        let sunset = Self.photo("sunset")
        let surf = Video(bytes: Data("surf".utf8), destination: URL(string: "https://uploads.example.com/surf.mov")!)
        let uploader = InMemoryUploader()
        // BEGIN DOC
        let post = Post(
            text: "Surf's up",
            photos: [beach, sunset],
            videos: [surf],
            destination: URL(string: "https://uploads.example.com/posts/42.json")!)
        Job.publishing(post, using: uploader).perform { outcome in print(outcome) }
        // END DOC
        let queue = TestQueue()
        do {
            // BEGIN DOC
            let uploader = InMemoryUploader(latency: .seconds(1))
            uploader.fail(beach.media.destination, with: URLError(.timedOut), times: 1)
            Job.publishing(post, using: uploader, options: PublishOptions(retry: RetryPolicy(attempts: 2)))
                .perform(on: queue) { outcome in print(outcome) }
            try queue.advance(by: .seconds(5))
            #expect(uploader.uploads.map(\.destination).last == post.destination)
            // END DOC
        }
    }

    @Test func publishingWithProgressAndReceiptsExample() async throws {
        let post = Post(
            text: "hello", photos: [Self.photo("a")], videos: [],
            destination: URL(string: "https://uploads.example.com/posts/1.json")!)
        let uploader = InMemoryUploader()
        // BEGIN DOC
        let options = PublishOptions(retry: RetryPolicy(attempts: 3))
        let published = try await Job.publishing(post, using: uploader, options: options) { progress in
            print("\(Int(progress.fractionCompleted * 100))%")
        }.value
        print(published.post.finalURL, published.media.map(\.etag))
        // END DOC
        #expect(published.media.count == 1)
        #expect(published.post.destination == post.destination)
        do {
            // BEGIN DOC
            let published = try await Job.publishing(post, using: uploader).value
            for receipt in published.media { print(receipt.finalURL, receipt.etag ?? "") }
            // END DOC
        }
    }

    @Test func receiptAndErrorExamples() async throws {
        let photo = Self.photo("beach")
        let uploader = InMemoryUploader()
        // BEGIN DOC
        let receipt = try await Job.uploading(photo, using: uploader).value
        print(receipt.status, receipt.etag ?? "no ETag", receipt.finalURL)
        // END DOC
        #expect(receipt.status == 201)
        // BEGIN DOC
        let error = UploadError.httpStatus(
            UploadReceipt(destination: URL(string: "https://media.example.com/posts/1/video.mp4")!, status: 413))
        print(error.localizedDescription)  // posts/1/video.mp4: the server answered 413 Payload Too Large
        // END DOC
        #expect(error.localizedDescription == "posts/1/video.mp4: the server answered 413 Payload Too Large")
    }

    @Test func decodedExample() throws {
        let receipt = UploadReceipt(
            destination: URL(string: "https://social.example/api/v2/media")!, status: 200,
            body: Data(#"{"id":"109","type":"image"}"#.utf8))
        // BEGIN DOC
        struct Attachment: Decodable { let id: String }
        let attachment = try receipt.decoded(as: Attachment.self)
        // END DOC
        #expect(attachment.id == "109")
    }

    @Test func invalidOptionExample() {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("JobKit-never-written")
        // BEGIN DOC
        do {
            _ = try DirectoryUploader(root: folder, chunkSize: 0)
        } catch {
            print(error)  // chunkSize must be at least 1, got 0
        }
        // END DOC
        #expect(throws: InvalidOptionError(option: "chunkSize", reason: "must be at least 1, got 0")) {
            try DirectoryUploader(root: folder, chunkSize: 0)
        }
    }

    @Test func uploadFailureExample() {
        // BEGIN DOC
        struct QuotaError: ClassifiedUploadError {
            var resetsIn: Duration?
            var failure: UploadFailure { resetsIn.map { .pushback(retryAfter: $0) } ?? .permanent }
        }
        // END DOC
        let resetting = QuotaError(resetsIn: .seconds(60))
        #expect(UploadFailure(resetting) == .pushback(retryAfter: .seconds(60)))
        #expect(RetryPolicy.isTransient(resetting))
        #expect(!RetryPolicy.isTransient(QuotaError(resetsIn: nil)))
        let policy = RetryPolicy(random: AtTheCeiling())
        let wait = policy.delay(beforeRetry: 1, after: resetting)
        #expect(
            wait.map { $0 > .seconds(119) && $0 <= .seconds(120) } == true, "the wait asked for, then as much again")
    }

    @Test func retryPolicyExamples() async throws {
        // BEGIN DOC
        var policy = RetryPolicy(attempts: 4, initialDelay: .seconds(1), maximumDelay: .seconds(30))
        // A device without network fails at once, for the app to try again when
        // the network is back, rather than being tried again in vain.
        policy.isRetryable = { error in UploadFailure(error) != .offline && RetryPolicy.isTransient(error) }
        let options = PublishOptions(retry: policy)
        // END DOC
        #expect(!options.retry.isRetryable(URLError(.notConnectedToInternet)))
        #expect(options.retry.isRetryable(URLError(.networkConnectionLost)))
        #expect(!options.retry.isRetryable(URLError(.badURL)))

        let video = Video(bytes: Data("v".utf8), destination: URL(string: "https://uploads.example.com/v.mp4")!)
        let uploader = InMemoryUploader()
        do {
            // BEGIN DOC
            let attempts = UploadAttempts(retry: RetryPolicy(attempts: 5))
            let receipt = try await Job.uploading(video, using: uploader, attempts: attempts).value
            // END DOC
            #expect(receipt.destination == video.media.destination)
        }
        struct API: Sendable {
            func uploadToken() async throws -> String { "t-1" }
        }
        let api = API()
        // BEGIN DOC
        let token = try await Job.task { try await api.uploadToken() }.retry(RetryPolicy(attempts: 3)).value
        // END DOC
        #expect(token == "t-1")
    }

    @Test func uploadAttemptsExample() async throws {
        let video = Video(bytes: Data("v".utf8), destination: URL(string: "https://uploads.example.com/v.mp4")!)
        let uploader = InMemoryUploader()
        // BEGIN DOC
        let attempts = UploadAttempts(retry: RetryPolicy(attempts: 4), timeout: .seconds(60))
        let receipt = try await uploader.upload(video.media, attempts: attempts).value
        // END DOC
        #expect(receipt.destination == video.media.destination)
        #expect(uploader.uploads.count == 1)
    }

    @Test func md5Example() {
        // BEGIN DOC
        var md5 = MD5()
        md5.update(Data("The quick brown fox ".utf8))
        md5.update(Data("jumps over the lazy dog".utf8))
        let contentMD5 = md5.finalize().base64EncodedString()  // "nhB9nTcrtoJr2B01QqQZ1g=="
        // END DOC
        #expect(contentMD5 == "nhB9nTcrtoJr2B01QqQZ1g==")
    }

    @Test func sha1Example() {
        // BEGIN DOC
        var sha1 = SHA1()
        sha1.update(Data("The quick brown fox ".utf8))
        sha1.update(Data("jumps over the lazy dog".utf8))
        let checksum = sha1.finalize().base64EncodedString()  // "L9ThxnotKPzthJ7hu3bnORuT6xI="
        // END DOC
        #expect(checksum == "L9ThxnotKPzthJ7hu3bnORuT6xI=")
    }

    @Test func publishOptionsExamples() throws {
        // BEGIN DOC
        let options = PublishOptions(
            maxConcurrentUploads: 3,
            retry: RetryPolicy(attempts: 4),
            uploadTimeout: .seconds(60),
            onFailedAttempt: { destination, attempt in
                print("\(destination.lastPathComponent): \(attempt.error.localizedDescription)")
            })
        // END DOC
        #expect(options.maxConcurrentUploads == 3)
        let post = Post(
            text: "ids", photos: [Self.photo("a"), Self.photo("b")],
            destination: URL(string: "https://uploads.example.com/posts/9.json")!)
        let counter = LockedValue(0)
        let uploader = InMemoryUploader { media, _ in
            let id = counter.withValue { count -> Int in
                count += 1
                return count
            }
            return UploadReceipt(destination: media.destination, body: Data("{\"id\": \"m\(id)\"}".utf8))
        }
        do {
            // BEGIN DOC
            struct Stored: Decodable { let id: String }
            var options = PublishOptions()
            options.document = { post, receipts in
                let ids = try receipts.map { try JSONDecoder().decode(Stored.self, from: $0.body).id }
                return try JSONEncoder().encode(["text": post.text, "media": ids.joined(separator: ",")])
            }
            // END DOC
            Job.publishing(post, using: uploader, options: options).perform(on: ImmediateQueue()) { _ in }
        }
        let document = try #require(uploader.uploads.last)
        let json = try JSONSerialization.jsonObject(with: document.bytes) as? [String: String]
        #expect(json?["media"] == "m1,m2" || json?["media"] == "m2,m1")
        #expect(json?["text"] == "ids")
    }

    @Test func mediaProcessingExample() throws {
        let token = "t-1"
        // BEGIN DOC
        let uploader = try MultipartFormUploader(
            headers: ["Authorization": "Bearer \(token)"], processing: .mastodon)
        // END DOC
        #expect(uploader.processing != nil)
    }

    @Test func formFieldExample() {
        let beach = URL(fileURLWithPath: "/photos/beach.jpg")
        let mediaEndpoint = URL(string: "https://social.example/api/v2/media")!
        // BEGIN DOC
        var photo = Photo(file: beach, destination: mediaEndpoint)
        photo.media.formFields = [FormField(name: "description", value: "Dawn over the bay")]
        // END DOC
        #expect(photo.media.formFields.map(\.name) == ["description"])
        #expect(photo.media.defaultFilename == "beach.jpg")
    }

    /// What the progress example shows: a view model on the main actor.
    @MainActor final class UploadModel {
        var progress = 0.0
    }

    /// Compiled, not run: the examples of "Coming from Alamofire", which
    /// need a server.
    private func alamofireExamples(
        photos: [URL], token: String, albumURL: URL, model: UploadModel, form: FormData, uploader: MultipartFormUploader
    ) async throws {
        do {
            // BEGIN DOC
            var form = FormData()
            form.append(Data(#"{"album":"Summer"}"#.utf8), named: "meta", contentType: "application/json")
            for photo in photos {
                form.append(fileAt: photo, named: "images[]")
            }
            let uploader = try MultipartFormUploader(method: .put, headers: ["Authorization": "Bearer \(token)"])
            let receipt = try await Job.uploading(form, to: albumURL, using: uploader).value
            // END DOC
            _ = receipt
        }
        do {
            // BEGIN DOC
            let upload = Job.uploading(form, to: albumURL, using: uploader) { progress in
                Task { @MainActor in model.progress = progress.fractionCompleted }
            }
            // END DOC
            _ = upload
        }
        do {
            // BEGIN DOC
            do {
                let receipt = try await Job.uploading(form, to: albumURL, using: uploader).value
                print("stored at \(receipt.finalURL)")
            } catch UploadError.httpStatus(let answer) where answer.status == 413 {
                print("too large: \(answer.bodyText)")
            }
            // END DOC
        }
        do {
            // BEGIN DOC
            let upload = Job.uploading(form, to: albumURL, using: uploader)
            let receipt = try await upload.retry(RetryPolicy(attempts: 4)).value
            // END DOC
            _ = receipt
        }
        do {
            // BEGIN DOC
            struct Album: Decodable, Sendable {
                let id: String
                let photoCount: Int
            }
            let decoder = JSONDecoder()
            decoder.keyDecodingStrategy = .convertFromSnakeCase
            let upload = Job.uploading(form, to: albumURL, using: uploader)
            let album = try await upload.decoding(Album.self, using: decoder).value
            // END DOC
            _ = album
        }
        do {
            let photo = Photo(file: photos[0], destination: albumURL)
            // BEGIN DOC
            struct Attachment: Decodable, Sendable { let id: String }
            let attachment = try await Job.uploading(photo, using: uploader).decoding(Attachment.self).value
            // END DOC
            _ = attachment
        }
        do {
            let draft = (id: UUID(), text: "")
            // BEGIN DOC
            let plain = try MultipartFormUploader(sendsIdempotencyKey: false)
            let keyed = try MultipartFormUploader(headers: ["Idempotency-Key": draft.id.uuidString])
            // END DOC
            _ = (plain, keyed)
        }
    }

    /// Compiled, not run: these need a server.
    private func serverExamples(video: Video, post: Post, token: String, beach: URL) async throws {
        do {
            let (dunes, metadata) = (beach, Data("{}".utf8))
            let endpoint = URL(string: "https://example.com/albums/1/photos")!
            // BEGIN DOC
            var form = FormData()
            form.append("Dawn over the bay", named: "caption")
            form.append(metadata, named: "meta", contentType: "application/json")
            form.append(fileAt: beach, named: "images[]")
            form.append(fileAt: dunes, named: "images[]", headers: ["Content-Language": "fr"])
            let receipt = try await Job.uploading(form, to: endpoint, using: MultipartFormUploader()).value
            // END DOC
            _ = receipt
        }
        do {
            let surf = beach
            // BEGIN DOC
            let server = try MastodonServer(url: URL(string: "https://social.example")!, token: token)
            let post = server.post(
                "Surf's up",
                photos: [server.photo(file: beach, description: "Dawn over the bay")],
                videos: [server.video(file: surf, description: "A wave breaking")])
            let options = server.publishOptions()
            let published = try await Job.publishing(post, using: server.mediaUploader, options: options).value
            print(MastodonServer.statusURL(in: published.post) ?? "posted")
            // END DOC
        }
        do {
            // BEGIN DOC
            let uploader = try MultipartFormUploader(headers: ["Authorization": "Bearer \(token)"])
            var photo = Photo(file: beach, destination: URL(string: "https://social.example/api/v2/media")!)
            photo.media.formFields = [FormField(name: "description", value: "Dawn over the bay")]
            let receipt = try await Job.uploading(photo, using: uploader).value
            // END DOC
            _ = receipt
        }
        do {
            // BEGIN DOC
            let uploader = URLSessionUploader(headers: ["Authorization": "Bearer \(token)"])
            let receipt = try await Job.uploading(video, using: uploader).value
            // END DOC
            _ = receipt
        }
        // BEGIN DOC
        let uploader = URLSessionUploader(headers: ["Authorization": "Bearer \(token)"])
        let options = PublishOptions(
            maxConcurrentUploads: 3, retry: RetryPolicy(attempts: 3), uploadTimeout: .seconds(120))
        let handle = Job.publishing(post, using: uploader, options: options) { progress in
            print("\(Int(progress.fractionCompleted * 100))%")
        }
        .perform { outcome in
            switch outcome {
            case .success(let published): print("published at \(published.post.finalURL)")
            case .failure(let error): print("error: \(error.localizedDescription)")
            }
        }
        // END DOC
        handle.cancel()
    }

    /// Compiled, not run: this needs object storage.
    private func s3Example(video: Video, api: any MediaAPI, applicationSupport: URL) async throws {
        // BEGIN DOC
        let uploader = try S3Uploader(
            presigner: Presigner(api: api),
            manifestFolder: applicationSupport.appendingPathComponent("uploads"))
        let receipt = try await Job.uploading(video, using: uploader).value
        print(receipt.etag ?? "", receipt.finalURL)
        // END DOC
    }

    /// Compiled, not run: this needs a tus server on the internet (the
    /// same calls run against two in TusUploaderTests).
    private func tusExample(clip: URL, token: String, applicationSupport: URL) async throws {
        // BEGIN DOC
        let uploader = try TusUploader(
            manifestFolder: applicationSupport.appendingPathComponent("tus"),
            headers: ["Authorization": "Bearer \(token)"])
        let video = Video(file: clip, destination: URL(string: "https://tus.example.com/files/")!)
        let receipt = try await Job.uploading(video, using: uploader).value
        print(receipt.finalURL)  // the upload's URL
        // END DOC
    }

    /// Compiled, not run: these need the services.
    private func tusServicesExample(applicationSupport: URL, accessToken: String) throws -> [TusUploader] {
        // BEGIN DOC
        let vimeo = try TusUploader(
            manifestFolder: applicationSupport.appendingPathComponent("tus"), createsUploads: false)
        let supabase = try TusUploader(
            manifestFolder: applicationSupport.appendingPathComponent("tus"), chunkSize: 6 * 1024 * 1024,
            headers: ["Authorization": "Bearer \(accessToken)", "x-upsert": "true"],
            metadata: { media in ["bucketName": "videos", "objectName": media.defaultFilename] })
        // END DOC
        return [vimeo, supabase]
    }
}
