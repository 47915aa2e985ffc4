import Foundation

/// An option that cannot work: fewer than one upload at once, a part
/// smaller than the storage takes, a time limit that is not above zero.
///
/// Options are checked where they are made, and nothing is clamped or
/// changed to fit: the initializer of every uploader that takes such an
/// option throws it, and so does
/// ``Outbox/init(folder:uploader:options:queue:transfers:)``. Options whose
/// properties can change after they are made (``PublishOptions``,
/// ``UploadAttempts``) are checked where they are handed over: the
/// publishing, or the upload, fails with it before it sends anything.
///
/// ```swift
/// do {
///     _ = try DirectoryUploader(root: folder, chunkSize: 0)
/// } catch {
///     print(error)  // chunkSize must be at least 1, got 0
/// }
/// ```
public struct InvalidOptionError: Error, Hashable, Sendable {
    /// The option, named as the code that sets it names it:
    /// `partSize`, `retry.attempts`, `publishing.maxConcurrentUploads`.
    public let option: String
    /// What the option must be, and what it was: "must be at least 1,
    /// got 0".
    public let reason: String

    /// Creates the error of `option`, which must be as `reason` says.
    public init(option: String, reason: String) {
        self.option = option
        self.reason = reason
    }
}

extension InvalidOptionError: CustomStringConvertible, LocalizedError {
    /// One sentence: the option, what it must be, and what it was.
    public var description: String { "\(option) \(reason)" }

    /// One sentence: the option, what it must be, and what it was.
    public var errorDescription: String? { description }
}

extension InvalidOptionError {
    /// Throws the error of `option` unless `holds`.
    static func check(
        _ holds: Bool, _ option: String, _ reason: @autoclosure () -> String
    ) throws(InvalidOptionError) {
        guard holds else { throw InvalidOptionError(option: option, reason: reason()) }
    }

    /// Throws the error of `option`, a duration, when it is not above
    /// zero; `nil` (no limit) passes.
    static func check(positive duration: Duration?, _ option: String) throws(InvalidOptionError) {
        guard let duration else { return }
        try check(duration > .zero, option, "must be above zero, got \(duration)")
    }

    /// Runs `checks`, each option they name named within `owner`:
    /// `publishing.retry.attempts`.
    static func within(_ owner: String, _ checks: () throws(InvalidOptionError) -> Void) throws(InvalidOptionError) {
        do {
            try checks()
        } catch {
            throw InvalidOptionError(option: "\(owner).\(error.option)", reason: error.reason)
        }
    }
}
