import Foundation
import JobKit
import Uploads

/// Sends each destination to its own uploader.
struct RoutingUploader: Uploader {
    let routes: [URL: any Uploader]
    let fallback: any Uploader

    func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
        (routes[media.destination] ?? fallback).upload(media, progress: progress)
    }
}
