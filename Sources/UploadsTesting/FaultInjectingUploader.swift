import Foundation
import JobKit
import JobKitTesting
import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// An uploader that fails a share of the uploads it forwards, to see
/// retries and failure handling at work (the Playground's `--fail-rate`).
///
/// The choice of which attempts fail comes from a seeded generator, so a
/// run with the same seed and the same order of attempts fails the same
/// ones. A failing attempt fails before anything is forwarded, by default
/// as a server that is briefly unavailable would: with
/// `UploadError.httpStatus` of a 503 whose body says "injected fault",
/// which a `RetryPolicy` retries.
public final class FaultInjectingUploader: Uploader, Sendable {
    /// The uploader that does the uploads that don't fail.
    public let base: any Uploader
    /// The share of attempts that fail, from 0 to 1.
    public let failureRate: Double
    private let generator: Lock<SeededRandomNumberGenerator>
    private let fault: @Sendable (Media) -> any Error

    /// Creates an uploader that fails `failureRate` of the attempts and
    /// forwards the others to `base`.
    /// - Parameters:
    ///   - base: The uploader to forward to.
    ///   - failureRate: The share of attempts that fail, from 0 to 1.
    ///   - seed: Seeds the choice of failing attempts.
    ///   - fault: The error a failing attempt fails with; a 503 by default.
    /// - Throws: `InvalidOptionError` when `failureRate` is outside 0...1.
    public init(
        wrapping base: any Uploader,
        failureRate: Double,
        seed: UInt64 = 0x5EED,
        fault: @escaping @Sendable (Media) -> any Error = FaultInjectingUploader.serviceUnavailable
    ) throws(InvalidOptionError) {
        guard (0...1).contains(failureRate) else {
            throw InvalidOptionError(option: "failureRate", reason: "must be from 0 to 1, got \(failureRate)")
        }
        self.base = base
        self.fault = fault
        self.failureRate = failureRate
        generator = Lock(SeededRandomNumberGenerator(seed: seed))
    }

    /// Forwards the check to the base uploader.
    public func validate(destination: URL) throws(UploadError) {
        try base.validate(destination: destination)
    }

    /// Forwards the discard to the base uploader.
    public func discardResumableUpload(of media: Media) -> Job<Void> {
        base.discardResumableUpload(of: media)
    }

    /// Forwards the question to the base uploader.
    public func bytesInFlight(uploading media: Media, size: Int64) -> Int64 {
        base.bytesInFlight(uploading: media, size: size)
    }

    /// The default fault: the server answered 503 Service Unavailable, with
    /// "injected fault" for its body; the receipt names the medium's
    /// `Media.filename` when it has one, as a form's does.
    public static func serviceUnavailable(_ media: Media) -> any Error {
        var receipt = UploadReceipt(destination: media.destination, status: 503, body: Data("injected fault".utf8))
        receipt.filename = media.filename
        return UploadError.httpStatus(receipt)
    }

    /// A job that fails with the fault at the set rate, and otherwise
    /// performs the base uploader's upload.
    public func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<UploadReceipt> {
        let upload = base.upload(media, progress: progress)
        return Job { [self] controller in
            if let error = drawFault(for: media) {
                controller.fail(with: error)
            } else {
                controller.perform(upload) { controller.complete(with: $0) }
            }
        }
    }

    /// The base uploader's upload, retried as `attempts` says, with each
    /// of its attempts failing with the fault at the set rate: for an
    /// uploader that retries each request, each request's attempt. The
    /// faults go into the attempts that the base makes through
    /// `UploadAttempts.retrying(_:for:)`, as every uploader of this package
    /// does.
    public func upload(
        _ media: Media,
        attempts: UploadAttempts,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<UploadReceipt> {
        var faulty = attempts
        let earlier = attempts.fault
        faulty.fault = { [self] media in earlier?(media) ?? drawFault(for: media) }
        return base.upload(media, attempts: faulty, progress: progress)
    }

    /// The fault, at the set rate; `nil` otherwise.
    private func drawFault(for media: Media) -> (any Error)? {
        let draw = generator.withLock { Double($0.next() >> 11) / Double(1 << 53) }
        return draw < failureRate ? fault(media) : nil
    }
}
