import Foundation

// Thin: everything lives in BenchmarkSuite, which the tests drive too.
exit(BenchmarkSuite.main(Array(CommandLine.arguments.dropFirst())))
