import Foundation
import JobKit
import JobKitTesting
import Testing
import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

// The examples of the Uploads module's doc comments and DocC catalog,
// verbatim, each between BEGIN DOC and END DOC. JobKitTests'
// DocExamplesCompileTests checks that every one of them is in this file.

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
            Job.publishing(post, using: uploader, options: PublishOptions(attempts: 2))
                .perform(on: queue) { outcome in print(outcome) }
            try queue.advance(by: .seconds(5))
            #expect(uploader.uploads.map(\.destination).last == post.destination)
            // END DOC
        }
    }

    @Test func publishingWithProgressExample() async throws {
        let post = Post(
            text: "hello", photos: [Self.photo("a")], videos: [],
            destination: URL(string: "https://uploads.example.com/posts/1.json")!)
        let uploader = InMemoryUploader()
        let done = LockedValue(false)
        // BEGIN DOC
        Job.publishing(post, using: uploader, options: PublishOptions(attempts: 3)) { progress in
            print("\(Int(progress.fractionCompleted * 100))%")
        }
        .perform { outcome in print(outcome) }
        // END DOC
        Job.publishing(post, using: uploader).perform { _ in done.setValue(true) }
        try await withTimeLimit(.seconds(10)) {
            while !done.value && !Task.isCancelled { await Task.yield() }
        }
    }

    @Test func samplePostExample() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let mediaFolder = folder.url
        // BEGIN DOC
        let post = try SamplePost.make(in: mediaFolder, destinationBase: URL(string: "https://uploads.example.com")!)
        // 6 photos of 1.8–4.2 MB and 3 videos of 12–26 MB, about 74 MB in all
        // END DOC
        #expect(post.photos.count == 6)
        #expect(post.videos.count == 3)
    }

    /// Compiled, not run: these need a server.
    private func serverExamples(video: Video, post: Post, token: String) async throws {
        do {
            // BEGIN DOC
            let uploader = URLSessionUploader(headers: ["Authorization": "Bearer \(token)"])
            try await Job.uploading(video, using: uploader).value
            // END DOC
        }
        // BEGIN DOC
        let uploader = URLSessionUploader(headers: ["Authorization": "Bearer \(token)"])
        let options = PublishOptions(maxConcurrentUploads: 3, attempts: 3, uploadTimeout: .seconds(120))
        let handle = Job.publishing(post, using: uploader, options: options) { progress in
            print("\(Int(progress.fractionCompleted * 100))%")
        }
        .perform { outcome in
            if case .failure(let error) = outcome { print("error: \(error)") }
        }
        // END DOC
        handle.cancel()
    }
}
