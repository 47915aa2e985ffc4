import Foundation
import Uploads

/// A post named `name`, its photos and videos in memory, `size` bytes each,
/// every destination its own.
func outboxPost(_ name: String, photos: Int = 2, videos: Int = 1, size: Int = 100) -> Post {
    Post(
        text: "post \(name)",
        photos: (0..<photos).map {
            Photo(bytes: patternedBytes(size, seed: UInt8($0)), destination: destination("\(name)/photo-\($0).jpg"))
        },
        videos: (0..<videos).map {
            Video(
                bytes: patternedBytes(size, seed: UInt8(50 + $0)), destination: destination("\(name)/video-\($0).mp4"))
        },
        destination: destination("\(name)/post.json"))
}

/// The bytes of `post`'s default document, named after `receipts`.
func documentBytes(_ post: Post, _ receipts: [UploadReceipt]) -> Data? {
    guard case .bytes(let bytes) = try? post.document(receipts: receipts).content else { return nil }
    return bytes
}
