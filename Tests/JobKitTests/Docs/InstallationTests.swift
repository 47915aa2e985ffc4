import Foundation
import TestSupport
import Testing

/// README.md's Installation section against Package.swift, on every
/// `swift test`.
///
/// That the snippet builds a package depending on this one is checked by
/// `.ci/check-installation`, a nested `swift build` too slow for a unit test.
/// These check what that build cannot see: on Linux SwiftPM ignores
/// `platforms:`, so a snippet declaring lower versions than JobKit builds here
/// and fails on a Mac; and the prose lists the libraries and platforms by hand.
@Suite("README installation", .timeLimit(.minutes(1)))
struct InstallationTests {
    private let root = PackageFolder.root

    @Test func namesEveryLibraryOfThePackageAndNoOther() throws {
        let section = try installationSection()
        let libraries = try manifest().matches(of: #/\.library\(\s*name: "(\w+)"/#).map { String($0.1) }
        #expect(!libraries.isEmpty)
        for library in libraries {
            #expect(section.contains("`\(library)`"), "README's Installation does not name the library \(library)")
        }
        let products = try snippet().matches(of: #/\.product\(name: "(\w+)", package: "JobKit"\)/#).map { String($0.1) }
        #expect(!products.isEmpty)
        #expect(Set(products).isSubset(of: libraries), "the snippet names a product Package.swift lacks")
    }

    @Test func snippetDeclaresAtLeastThePlatformsOfThePackage() throws {
        let required = platforms(in: try manifest())
        let declared = platforms(in: try snippet())
        #expect(!required.isEmpty)
        for (platform, version) in required {
            let snippetVersion = try #require(declared[platform], "the snippet does not declare \(platform)")
            #expect(
                !snippetVersion.lexicographicallyPrecedes(version),
                "the snippet declares \(platform) \(snippetVersion), below JobKit's \(version)")
        }
    }

    @Test func proseNamesTheSnippetsPlatforms() throws {
        let section = try installationSection()
        let declared = platforms(in: try snippet())
        #expect(!declared.isEmpty)
        for (platform, version) in declared {
            let name = "\(platform) \(version.map(String.init).joined(separator: "."))"
            #expect(section.contains(name), "README's Installation does not say \(name)")
        }
    }

    @Test func snippetAndProseNameTheToolsVersionOfThePackage() throws {
        let toolsVersion = #/^// swift-tools-version:\s*(\d+)\.(\d+)/#
        let required = try #require(try manifest().firstMatch(of: toolsVersion), "Package.swift has no tools version")
        let declared = try #require(try snippet().firstMatch(of: toolsVersion), "the snippet has no tools version")
        #expect(
            (declared.1, declared.2) == (required.1, required.2),
            "the snippet's tools version is \(declared.1).\(declared.2), JobKit's \(required.1).\(required.2)")
        let section = try installationSection()
        #expect(
            section.contains("Swift \(required.1).\(required.2) or later"),
            "README's Installation does not say which Swift JobKit needs")
        // Xcode 26 is the first with Swift 6.2.
        if (required.1, required.2) == ("6", "2") {
            #expect(section.contains("Xcode 26 or later"), "README's Installation does not say which Xcode")
        }
    }

    // MARK: - Reading the files

    private func manifest() throws -> String {
        try String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)
    }

    /// From "## Installation" to the next heading.
    private func installationSection() throws -> Substring {
        let readme = try String(contentsOf: root.appendingPathComponent("README.md"), encoding: .utf8)
        let start = try #require(readme.range(of: "\n## Installation\n"))
        let rest = readme[start.upperBound...]
        return rest.range(of: "\n## ").map { rest[..<$0.lowerBound] } ?? rest
    }

    /// The section's first Swift block, as `.ci/check-installation` extracts it.
    private func snippet() throws -> Substring {
        let section = try installationSection()
        let start = try #require(section.range(of: "```swift\n"))
        let rest = section[start.upperBound...]
        let end = try #require(rest.range(of: "\n```\n"))
        return rest[..<end.lowerBound]
    }

    /// The platforms a manifest declares, such as `.macOS(.v10_15)`, as
    /// `["macOS": [10, 15]]`.
    private func platforms(in manifest: some StringProtocol) -> [String: [Int]] {
        let platform = #/\.(iOS|macOS|macCatalyst|tvOS|watchOS|visionOS)\(\.v(\d+(?:_\d+)*)\)/#
        var found: [String: [Int]] = [:]
        for match in String(manifest).matches(of: platform) {
            found[String(match.1)] = match.2.split(separator: "_").compactMap { Int($0) }
        }
        return found
    }
}
