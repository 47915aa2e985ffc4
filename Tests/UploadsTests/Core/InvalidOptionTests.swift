import Foundation
import JobKit
import JobKitTesting
import Testing
import Uploads
import UploadsTesting

/// Options that cannot work are refused where they are made, with one
/// error that names the option: nothing is clamped to fit, and nothing is
/// written or sent.
@Suite("Invalid options", .timeLimit(.minutes(1)))
struct InvalidOptionTests {
    /// A folder no uploader or outbox here may create.
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("JobKit-never-\(UUID().uuidString)")

    static let readyAtOnce = MediaProcessing(statusURL: { _ in nil }, isReady: { _ in true })

    static func refused(_ option: String, _ reason: String) -> InvalidOptionError {
        InvalidOptionError(option: option, reason: reason)
    }

    @Test func anS3UploaderRefusesPartsSmallerThanS3TakesAndNoPartsAtOnce() throws {
        let presigner = RefusingPresigner()
        #expect(
            throws: Self.refused("partSize", "must be at least 5242880 bytes (5 MiB, S3's smallest part), got 1024")
        ) {
            try S3Uploader(presigner: presigner, manifestFolder: folder, partSize: 1024)
        }
        #expect(throws: Self.refused("maxConcurrentParts", "must be at least 1, got 0")) {
            try S3Uploader(presigner: presigner, manifestFolder: folder, maxConcurrentParts: 0)
        }
        #expect(throws: Self.refused("multipartThreshold", "must not be negative, got -1")) {
            try S3Uploader(presigner: presigner, manifestFolder: folder, multipartThreshold: -1)
        }
        let smallest = try S3Uploader(
            presigner: presigner, manifestFolder: folder, partSize: S3Uploader.minimumPartSize, maxConcurrentParts: 1)
        #expect(smallest.partSize == S3Uploader.minimumPartSize && smallest.maxConcurrentParts == 1)
        #expect(!FileManager.default.fileExists(atPath: folder.path))
    }

    @Test func aTusUploaderRefusesANegativeChunk() throws {
        #expect(throws: Self.refused("chunkSize", "must not be negative, got -1")) {
            try TusUploader(manifestFolder: folder, chunkSize: -1)
        }
        #expect(throws: Self.refused("creationWithUploadLimit", "must not be negative, got -1")) {
            try TusUploader(manifestFolder: folder, creationWithUploadLimit: -1)
        }
        let whole = try TusUploader(manifestFolder: folder, chunkSize: 0, creationWithUploadLimit: 0)
        #expect(
            whole.chunkSize == 0 && whole.creationWithUploadLimit == 0, "the rest of the file; no creation-with-upload")
    }

    @Test func aDirectoryUploaderRefusesAChunkOrASpeedBelowOne() throws {
        #expect(throws: Self.refused("chunkSize", "must be at least 1, got 0")) {
            try DirectoryUploader(root: folder, chunkSize: 0)
        }
        #expect(throws: Self.refused("bytesPerSecond", "must be at least 1, got 0")) {
            try DirectoryUploader(root: folder, bytesPerSecond: 0)
        }
        let slowest = try DirectoryUploader(root: folder, bytesPerSecond: 1, chunkSize: 1)
        #expect(slowest.bytesPerSecond == 1 && slowest.chunkSize == 1)
        #expect(!FileManager.default.fileExists(atPath: folder.path))
    }

    @Test func aFormUploaderAndAMastodonServerRefuseWaitsThatCannotBeMade() throws {
        var noTime = Self.readyAtOnce
        noTime.timeLimit = .zero
        var backwards = Self.readyAtOnce
        backwards.firstWait = .seconds(-1)
        var negativeCeiling = Self.readyAtOnce
        negativeCeiling.maximumWait = .seconds(-1)
        let cases = [
            (noTime, Self.refused("processing.timeLimit", "must be above zero, got 0.0 seconds")),
            (backwards, Self.refused("processing.firstWait", "must not be negative, got -1.0 seconds")),
            (negativeCeiling, Self.refused("processing.maximumWait", "must not be negative, got -1.0 seconds")),
        ]
        for (processing, error) in cases {
            #expect(throws: error) { try MultipartFormUploader(processing: processing) }
            #expect(throws: error) {
                try MastodonServer(url: URL(string: "https://social.example")!, token: "t", processing: processing)
            }
        }
        #expect(try MultipartFormUploader(processing: Self.readyAtOnce).processing != nil)
    }

    @Test func aFaultInjectingUploaderRefusesARateOutsideZeroToOne() throws {
        for rate in [-0.1, 1.5, .nan] {
            #expect(throws: InvalidOptionError.self) {
                try FaultInjectingUploader(wrapping: InMemoryUploader(), failureRate: rate)
            }
        }
        #expect(try FaultInjectingUploader(wrapping: InMemoryUploader(), failureRate: 1).failureRate == 1)
    }

    @Test func anOutboxRefusesOptionsThatCannotWorkBeforeItTouchesItsFolder() throws {
        var cases: [(Outbox.Options, InvalidOptionError)] = []
        func refusing(_ error: InvalidOptionError, _ change: (inout Outbox.Options) -> Void) {
            var options = Outbox.Options()
            change(&options)
            cases.append((options, error))
        }
        refusing(Self.refused("publishing.maxConcurrentUploads", "must be at least 1, got 0")) {
            $0.publishing.maxConcurrentUploads = 0
        }
        refusing(Self.refused("publishing.retry.attempts", "must be at least 1, got 0")) {
            $0.publishing.retry = RetryPolicy(attempts: 0)
        }
        refusing(Self.refused("publishing.uploadTimeout", "must be above zero, got 0.0 seconds")) {
            $0.publishing.uploadTimeout = .zero
        }
        refusing(Self.refused("maxBytesInFlight", "must be at least 1, got 0")) { $0.maxBytesInFlight = 0 }
        refusing(Self.refused("networkRetryDelay", "must be above zero, got 0.0 seconds")) {
            $0.networkRetryDelay = .zero
        }
        refusing(
            Self.refused("maxNetworkRetryDelay", "must be at least networkRetryDelay (30.0 seconds), got 10.0 seconds")
        ) {
            $0.maxNetworkRetryDelay = .seconds(10)
        }
        refusing(Self.refused("networkWakeWindow", "must not be negative, got -1.0 seconds")) {
            $0.networkWakeWindow = .seconds(-1)
        }
        refusing(Self.refused("pushbackDelay", "must not be negative, got -1.0 seconds")) {
            $0.pushbackDelay = .seconds(-1)
        }
        for (options, error) in cases {
            #expect(throws: error) { try Outbox(folder: folder, uploader: InMemoryUploader(), options: options) }
        }
        #expect(!FileManager.default.fileExists(atPath: folder.path))
    }

    @Test func theErrorSaysWhichOptionAndWhatItMustBe() {
        let error = Self.refused("partSize", "must be at least 1, got 0")
        #expect(error.localizedDescription == "partSize must be at least 1, got 0")
        #expect("\(error)" == "partSize must be at least 1, got 0")
    }
}
