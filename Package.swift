// swift-tools-version:6.2
import PackageDescription

let package = Package(
    name: "JobKit",
    platforms: [
        .macOS(.v15),
        .iOS(.v18),
        .tvOS(.v18),
        .watchOS(.v11),
    ],
    products: [
        .library(name: "JobKit", targets: ["JobKit"]),
        .library(name: "JobKitTesting", targets: ["JobKitTesting"]),
        .library(name: "Uploads", targets: ["Uploads"]),
        .library(name: "UploadsTesting", targets: ["UploadsTesting"]),
        .executable(name: "Playground", targets: ["Playground"]),
        .executable(name: "Benchmarks", targets: ["Benchmarks"]),
    ],
    traits: [
        .trait(
            name: "ExperimentalMainActorInVirtualTime",
            description: "TestQueue.drivingMainActor(_:): main-actor code in virtual time, on Swift 6.3's "
                + "experimental custom executors (SPI)."
        ),
        .default(enabledTraits: []),
    ],
    targets: [
        .target(name: "JobKit"),
        .target(name: "JobKitTesting", dependencies: ["JobKit"]),
        // What the test targets share: how they start child processes and
        // wait for what blocks, off Swift's cooperative threads. Not a product.
        .target(name: "TestSupport", dependencies: ["JobKitTesting"], path: "Tests/TestSupport"),
        .testTarget(name: "JobKitTests", dependencies: ["JobKit", "JobKitTesting", "TestSupport"]),
        .testTarget(name: "JobKitTestingTests", dependencies: ["JobKit", "JobKitTesting", "TestSupport"]),
        .target(name: "Uploads", dependencies: ["JobKit"], exclude: ["README.md"]),
        .target(name: "UploadsTesting", dependencies: ["Uploads", "JobKit", "JobKitTesting"]),
        .testTarget(
            name: "UploadsTests",
            dependencies: ["Uploads", "UploadsTesting", "JobKit", "JobKitTesting", "Playground", "TestSupport"],
            exclude: ["Fixtures"]
        ),
        .executableTarget(
            name: "Playground",
            dependencies: ["Uploads", "UploadsTesting", "JobKit", "JobKitTesting"],
            path: "Playground"
        ),
        .executableTarget(
            name: "Benchmarks", dependencies: ["JobKit", "JobKitTesting", "Uploads", "UploadsTesting"],
            exclude: ["README.md"]),
        .testTarget(
            name: "BenchmarksTests", dependencies: ["Benchmarks", "JobKit", "JobKitTesting", "TestSupport"]),
    ]
)

// Swift 6 language mode, with complete concurrency checking, for every target.
for target in package.targets {
    var settings = target.swiftSettings ?? []
    settings.append(.swiftLanguageMode(.v6))
    target.swiftSettings = settings
}
