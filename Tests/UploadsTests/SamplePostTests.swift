import Foundation
import Testing
import Uploads

@Suite("SamplePost", .timeLimit(.minutes(1)))
struct SamplePostTests {
    @Test func makesSixPhotosAndThreeVideosOfTheScaledSizes() throws {
        let folder = try TemporaryFolder()
        defer { folder.remove() }
        let post = try SamplePost.make(
            in: folder.url,
            destinationBase: URL(string: "https://uploads.example.com")!,
            scale: 0.01
        )

        #expect(try post.photos.map { try $0.media.byteCount() } == SamplePost.photoSizes.map { Int64($0 / 100) })
        #expect(try post.videos.map { try $0.media.byteCount() } == SamplePost.videoSizes.map { Int64($0 / 100) })
        #expect(
            post.photos.first?.media.destination.absoluteString
                == "https://uploads.example.com/posts/beach-day/photo-1.jpg")
        #expect(
            post.videos.last?.media.destination.absoluteString
                == "https://uploads.example.com/posts/beach-day/video-3.mp4")
        #expect(post.destination?.absoluteString == "https://uploads.example.com/posts/beach-day.json")
        #expect(post.photos.first?.media.contentType == "image/jpeg")
        #expect(post.videos.first?.media.contentType == "video/mp4")
    }

    @Test func writesTheSameBytesEveryTimeAndDifferentBytesPerFile() throws {
        let first = try TemporaryFolder()
        let second = try TemporaryFolder()
        defer {
            first.remove()
            second.remove()
        }
        let base = URL(string: "https://uploads.example.com")!
        let one = try SamplePost.make(in: first.url, destinationBase: base, scale: 0.01)
        let two = try SamplePost.make(in: second.url, destinationBase: base, scale: 0.01)

        func contents(_ post: Post) throws -> [Data] {
            try post.media.map { media in
                guard case .file(let url) = media.content else { return Data() }
                return try Data(contentsOf: url)
            }
        }
        let files = try contents(one)
        #expect(files == (try contents(two)))
        #expect(Set(files).count == files.count)
        #expect(files.first?.prefix(4) == Data([0xFF, 0xD8, 0xFF, 0xE0]))
    }
}
