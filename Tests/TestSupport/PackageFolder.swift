import Foundation

/// The package's own folder, found from where this file is, so a test reads
/// the README, the sources or a fixture's script by its path in the
/// package, wherever the test's own file sits among the test folders.
public enum PackageFolder {
    /// The folder that holds `Package.swift`.
    public static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent()  // TestSupport
        .deletingLastPathComponent()  // Tests
        .deletingLastPathComponent()

    /// `path`, relative to the package's folder, as a URL.
    public static func file(_ path: String) -> URL {
        root.appendingPathComponent(path)
    }
}
