import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A server that speaks Mastodon's API (Mastodon, Pleroma, Akkoma,
/// GoToSocial, Pixelfed, Friendica), and what posting to it takes: each
/// medium as a form to `/api/v2/media`, waited for until the server has
/// processed it, then the status as JSON to `/api/v1/statuses`, naming the
/// media's IDs, with the post's `Idempotency-Key`, all with the app's
/// access token.
///
/// ```swift
/// let server = try MastodonServer(url: URL(string: "https://social.example")!, token: token)
/// let post = server.post(
///     "Surf's up",
///     photos: [server.photo(file: beach, description: "Dawn over the bay")],
///     videos: [server.video(file: surf, description: "A wave breaking")])
/// let options = server.publishOptions()
/// let published = try await Job.publishing(post, using: server.mediaUploader, options: options).value
/// print(MastodonServer.statusURL(in: published.post) ?? "posted")
/// ```
///
/// Publishing stays one job, and an ``Outbox`` publishes the same post
/// with the same options (`Outbox.Options(publishing:
/// server.publishOptions())`): the media's IDs are their receipts, kept in
/// its journal, and the status is created once across kills and relaunches
/// (the server keeps an `Idempotency-Key` for an hour).
///
/// Each post goes to `/api/v1/statuses` with a fragment of its own
/// (`#<UUID>` unless the app names it), which is never sent: an ``Outbox``
/// tells posts apart by their destination.
public struct MastodonServer: Sendable {
    /// The server's address, such as `https://mastodon.social`.
    public let url: URL
    /// The uploader of the media: forms to `/api/v2/media`, each upload
    /// ending once the server has processed the medium
    /// (``MediaProcessing/mastodon``).
    public let mediaUploader: MultipartFormUploader
    /// The uploader of the statuses: JSON `POST`ed to
    /// `/api/v1/statuses`.
    public let statusUploader: URLSessionUploader

    /// Creates a server an app posts to with `token`.
    /// - Parameters:
    ///   - url: The server's address.
    ///   - token: The app's access token (with the `write:media` and
    ///     `write:statuses` scopes), sent as `Authorization: Bearer`.
    ///   - processing: How to wait for the media the server processes;
    ///     ``MediaProcessing/mastodon`` by default.
    ///   - configuration: The sessions' configuration; ephemeral (no
    ///     cache, no cookies kept) by default.
    /// - Throws: ``InvalidOptionError`` when `processing`'s waits are
    ///   negative or its time limit is not above zero.
    public init(
        url: URL,
        token: String,
        processing: MediaProcessing = .mastodon,
        configuration: URLSessionConfiguration = .ephemeral
    ) throws(InvalidOptionError) {
        self.url = url
        let authorization = ["Authorization": "Bearer \(token)"]
        mediaUploader = try MultipartFormUploader(
            headers: authorization, processing: processing, configuration: configuration)
        statusUploader = URLSessionUploader(method: .post, headers: authorization, configuration: configuration)
    }

    /// Where media go: `/api/v2/media`.
    public var mediaEndpoint: URL { url.appendingPathComponent("api/v2/media") }

    /// Where statuses go: `/api/v1/statuses`.
    public var statusesEndpoint: URL { url.appendingPathComponent("api/v1/statuses") }

    /// A photo from `file`, with its description (the alt text a screen
    /// reader reads), named after the file in its form and in snapshots.
    public func photo(file: URL, description: String? = nil, contentType: String = "image/jpeg") -> Photo {
        var photo = Photo(file: file, destination: mediaEndpoint, contentType: contentType)
        photo.media.filename = file.lastPathComponent
        photo.media.formFields = Self.fields(description)
        return photo
    }

    /// A photo from bytes in memory, named `filename`, with its
    /// description.
    public func photo(
        bytes: Data, filename: String, description: String? = nil, contentType: String = "image/jpeg"
    ) -> Photo {
        var photo = Photo(bytes: bytes, destination: mediaEndpoint, contentType: contentType)
        photo.media.filename = filename
        photo.media.formFields = Self.fields(description)
        return photo
    }

    /// A video from `file`, with its description, named after the file.
    public func video(file: URL, description: String? = nil, contentType: String = "video/mp4") -> Video {
        var video = Video(file: file, destination: mediaEndpoint, contentType: contentType)
        video.media.filename = file.lastPathComponent
        video.media.formFields = Self.fields(description)
        return video
    }

    /// A post of `text` and media, its status going to
    /// ``statusesEndpoint`` with `id` as its fragment (never sent), so
    /// that an ``Outbox`` tells it from the others.
    ///
    /// Mastodon takes at most 4 media per status by default; a server
    /// answers a status with more `422` ("Cannot attach more than 4
    /// files").
    ///
    /// - Parameters:
    ///   - text: The status's text.
    ///   - photos: Its photos, from ``photo(file:description:contentType:)``.
    ///   - videos: Its videos, from ``video(file:description:contentType:)``.
    ///   - id: The post's name among the app's posts; a new UUID by
    ///     default. Give the same one to make the same post again (after a
    ///     relaunch, say), so that an ``Outbox`` finds it.
    public func post(
        _ text: String, photos: [Photo] = [], videos: [Video] = [], id: String = UUID().uuidString
    ) -> Post {
        var destination = URLComponents(url: statusesEndpoint, resolvingAgainstBaseURL: true)
        destination?.fragment = id
        return Post(text: text, photos: photos, videos: videos, destination: destination?.url ?? statusesEndpoint)
    }

    /// `options`, with the status as the post's document and
    /// ``statusUploader`` as its uploader: for publishing, and for an
    /// ``Outbox`` (``Outbox/Options/publishing``).
    public func publishOptions(_ options: PublishOptions = PublishOptions()) -> PublishOptions {
        var options = options
        options.document = Self.status
        options.documentUploader = statusUploader
        return options
    }

    /// The status of `post`: `{"status": text, "media_ids": [...]}`, the
    /// IDs of its media from `receipts` (the server's answers, photos
    /// first), in order.
    ///
    /// - Throws: ``UploadError/invalidAnswer(_:reason:)`` when an answer
    ///   has no ID.
    public static func status(of post: Post, receipts: [UploadReceipt]) throws -> Data {
        let ids = try receipts.map { receipt throws(UploadError) in
            guard let id = mediaID(in: receipt) else {
                throw .invalidAnswer(receipt.destination, reason: "no media ID in the server's answer")
            }
            return id
        }
        // Strings and an array of strings always encode.
        return (try? JSONSerialization.data(withJSONObject: ["status": post.text, "media_ids": ids])) ?? Data()
    }

    /// The ID of the medium the server answered with `receipt` (its
    /// `id`).
    public static func mediaID(in receipt: UploadReceipt) -> String? {
        topLevelString("id", in: receipt.body)
    }

    /// The URL of the status the server answered with `receipt` (its
    /// `url`).
    public static func statusURL(in receipt: UploadReceipt) -> URL? {
        topLevelString("url", in: receipt.body).flatMap(URL.init(string:))
    }

    /// The string (or number) `key` of the JSON object `body` holds. An
    /// outbox's journal written before receipts kept whole answers holds
    /// their first 4 KiB, and a status with its account and media can be
    /// longer: then the first `"key":"..."` of the text, which in
    /// Mastodon's answers comes before any nested object.
    static func topLevelString(_ key: String, in body: Data) -> String? {
        if let object = try? JSONSerialization.jsonObject(with: body) as? [String: Any] {
            return object[key] as? String ?? (object[key] as? Int).map(String.init)
        }
        let text = String(decoding: body, as: UTF8.self)
        guard let start = text.range(of: "\"\(key)\":\"")?.upperBound,
            let end = text[start...].firstIndex(of: "\"")
        else { return nil }
        let value = String(text[start..<end])
        return value.isEmpty || value.contains("\\") ? nil : value
    }

    private static func fields(_ description: String?) -> [FormField] {
        description.map { [FormField(name: "description", value: $0)] } ?? []
    }
}
