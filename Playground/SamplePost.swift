import Foundation
import JobKitTesting
import Uploads

/// A post with photos and videos of realistic sizes, generated on the fly:
/// what the Playground publishes, and a quick way to try an uploader.
///
/// The files hold pseudo-random bytes, the same for every call (so a run can
/// be compared with another), written a megabyte at a time.
enum SamplePost {
    /// The sizes of the sample photos, in bytes, before scaling.
    static let photoSizes = [2_400_000, 3_100_000, 1_800_000, 4_200_000, 2_700_000, 3_600_000]
    /// The sizes of the sample videos, in bytes, before scaling.
    static let videoSizes = [18_000_000, 26_000_000, 12_000_000]
    /// What the sample photos show, for a server that takes descriptions.
    static let photoDescriptions = [
        "Children building a sandcastle at low tide", "A striped umbrella against a blue sky",
        "Footprints leading to the water", "A lifeguard tower at noon", "Seagulls over the pier",
        "The sun setting behind the dunes",
    ]
    /// What the sample videos show.
    static let videoDescriptions = [
        "Waves rolling onto the shore", "A surfer riding a wave", "A kite dancing in the wind",
    ]

    /// Writes the sample media into `folder` and returns the post.
    ///
    /// Destinations lie below `destinationBase`:
    /// `posts/beach-day/photo-1.jpg` … `posts/beach-day/video-3.mp4`, and the
    /// post's own document at `posts/beach-day.json`.
    ///
    /// - Parameters:
    ///   - folder: Where to write the media files; created if needed.
    ///   - destinationBase: The server (or pretend server) the uploads go to.
    ///   - scale: Multiplies every size: `0.01` makes a post of under a
    ///     megabyte, for tests. At least one byte per file.
    ///   - reusingFiles: Keep a file already there with the size it would
    ///     have (its bytes are the same), rather than write it again.
    ///   - isCancelled: Asked before each file; `true` stops with
    ///     `CancellationError`.
    ///   - mastodon: A Mastodon-compatible server to post to instead: then
    ///     the post has three photos and a video, each with its
    ///     description, and its status is named `beach-day`.
    ///   - tus: A tus server's creation endpoint to upload to instead: the
    ///     destination of every medium, and of the post's document, told
    ///     apart by its fragment, `#beach-day.json`.
    /// - Returns: A post of six photos and three videos, read from `folder`.
    /// - Throws: The file system's error when a file cannot be written.
    static func make(
        in folder: URL, destinationBase: URL, scale: Double = 1, reusingFiles: Bool = false,
        isCancelled: () -> Bool = { false }, mastodon: MastodonServer? = nil, tus: URL? = nil
    ) throws -> Post {
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let base = destinationBase.appendingPathComponent("posts")
        var generator = SeededRandomNumberGenerator(seed: 2026)
        let noise = randomBlock(using: &generator)

        func write(_ name: String, size: Int, header: [UInt8]) throws -> (file: URL, destination: URL) {
            if isCancelled() { throw CancellationError() }
            let file = folder.appendingPathComponent(name)
            let start = Int(generator.next() % UInt64(noise.count))
            let size = max(Int(Double(size) * scale), 1)
            let existing = try? FileManager.default.attributesOfItem(atPath: file.path)[.size] as? NSNumber
            // The same bytes as last time: left as they are, so that an
            // upload of them can resume.
            if reusingFiles, existing?.intValue == size { return (file, destination(name)) }
            try writeFile(file, size: size, header: header, noise: noise, start: start)
            return (file, destination(name))
        }
        func destination(_ name: String) -> URL {
            tus ?? base.appendingPathComponent("beach-day").appendingPathComponent(name)
        }
        if let mastodon {
            let photos = try photoSizes.prefix(3).enumerated().map { index, size in
                let written = try write("photo-\(index + 1).jpg", size: size, header: [0xFF, 0xD8, 0xFF, 0xE0])
                return mastodon.photo(file: written.file, description: photoDescriptions[index])
            }
            let written = try write("video-1.mp4", size: videoSizes[0], header: Array("\0\0\0\u{18}ftypmp42".utf8))
            let video = mastodon.video(file: written.file, description: videoDescriptions[0])
            return mastodon.post(
                "A day at the beach: three photos and a clip.", photos: photos, videos: [video], id: "beach-day")
        }
        let photos = try photoSizes.enumerated().map { index, size in
            let written = try write("photo-\(index + 1).jpg", size: size, header: [0xFF, 0xD8, 0xFF, 0xE0])
            return Photo(file: written.file, destination: written.destination)
        }
        let videos = try videoSizes.enumerated().map { index, size in
            let written = try write("video-\(index + 1).mp4", size: size, header: Array("\0\0\0\u{18}ftypmp42".utf8))
            return Video(file: written.file, destination: written.destination)
        }
        return Post(
            text: "A day at the beach: six photos and three clips.",
            photos: photos,
            videos: videos,
            destination: tus.flatMap { URL(string: "#beach-day.json", relativeTo: $0)?.absoluteURL }
                ?? base.appendingPathComponent("beach-day.json")
        )
    }

    /// A megabyte of pseudo-random bytes; files are cut from it at
    /// different offsets, which is cheap even in a debug build.
    private static func randomBlock(using generator: inout SeededRandomNumberGenerator) -> Data {
        var words = [UInt64](repeating: 0, count: (1 << 20) / 8)
        for index in words.indices { words[index] = generator.next() }
        return words.withUnsafeBytes { Data($0) }
    }

    private static func writeFile(_ file: URL, size: Int, header: [UInt8], noise: Data, start: Int) throws {
        guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file.path])
        }
        let handle = try FileHandle(forWritingTo: file)
        defer { try? handle.close() }
        try handle.write(contentsOf: Data(header.prefix(size)))
        var remaining = size - min(header.count, size)
        var offset = start
        while remaining > 0 {
            let count = min(remaining, noise.count - offset)
            try handle.write(contentsOf: noise[offset..<offset + count])
            remaining -= count
            offset = (offset + count) % noise.count
        }
    }
}
