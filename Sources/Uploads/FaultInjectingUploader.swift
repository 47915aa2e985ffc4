import Foundation
import JobKit

/// An uploader that fails a share of the uploads it forwards, to see
/// retries and failure handling at work (the Playground's `--fail-rate`).
///
/// The choice of which attempts fail comes from a seeded generator, so a
/// run with the same seed and the same order of attempts fails the same
/// ones. A failing attempt fails with ``UploadError/injectedFault(_:)``
/// before anything is forwarded.
public final class FaultInjectingUploader: Uploader, Sendable {
    /// The uploader that does the uploads that don't fail.
    public let base: any Uploader
    /// The share of attempts that fail, from 0 to 1.
    public let failureRate: Double
    private let generator: Lock<SplitMix64>

    /// Creates an uploader that fails `failureRate` of the attempts and
    /// forwards the others to `base`.
    /// - Parameters:
    ///   - base: The uploader to forward to.
    ///   - failureRate: The share of attempts that fail, clamped to 0...1.
    ///   - seed: Seeds the choice of failing attempts.
    public init(wrapping base: any Uploader, failureRate: Double, seed: UInt64 = 0x5EED) {
        self.base = base
        self.failureRate = min(max(failureRate, 0), 1)
        generator = Lock(SplitMix64(seed: seed))
    }

    /// Forwards the check to the base uploader.
    public func validate(destination: URL) throws(UploadError) {
        try base.validate(destination: destination)
    }

    /// A job that fails with ``UploadError/injectedFault(_:)`` at the set
    /// rate, and otherwise performs the base uploader's upload.
    public func upload(_ media: Media, progress: @escaping @Sendable (UploadProgress) -> Void) -> Job<Void> {
        let upload = base.upload(media, progress: progress)
        return Job { [self] controller in
            let draw = generator.withLock { Double($0.next() >> 11) / Double(1 << 53) }
            if draw < failureRate {
                controller.fail(with: UploadError.injectedFault(media.destination))
            } else {
                controller.perform(upload) { controller.complete(with: $0) }
            }
        }
    }
}

/// A small, fast, seedable generator (SplitMix64).
struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64

    init(seed: UInt64) {
        state = seed
    }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
