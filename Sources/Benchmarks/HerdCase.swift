import Foundation
import UploadsTesting

/// Case 19: a herd of outboxes back online at once (`Herd`, in virtual
/// time). Each of N outboxes holds one post of four photos when an outage
/// ends; the server takes the backlog's requests in `minutes` at full
/// capacity and answers `503` with `Retry-After: 5` past it. Not a timing:
/// what the server saw, against the goals of an outbox that does not
/// stampede.
enum HerdCase {
    /// The goals: peak load after the first minute, time to publish every
    /// post against the ideal, rejected requests per useful one.
    static let goals = (peak: 2.0, time: 2.0, rejected: 1.0)

    static func run(counts: [Int], minutes: Int, pushbackDelay: Duration? = nil) throws -> CaseReport {
        var lines = [
            "| outboxes | capacity | ideal time | busiest second, first minute | busiest second, after "
                + "| peak load (10 s), after | published in | rejected per useful | run took |",
            "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        var summary: [String] = []
        for count in counts {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("JobKitHerd-\(UUID())")
            let started = now()
            var configuration = Herd.Configuration(outboxes: count, drainingIn: minutes)
            if let pushbackDelay {
                configuration.options = { index in
                    var options = Herd.Configuration.defaultOptions(index)
                    options.pushbackDelay = pushbackDelay
                    return options
                }
            }
            let report = try Herd.run(configuration, in: folder)
            let took = Double(now() - started) / 1e9
            let capacity = Double(report.capacity)
            let published =
                report.published == nil
                ? "\(report.publishedCount) of \(count) (MISSED)" : mark(report.timeRatio, goals.time)
            lines.append(
                "| \(count) | \(report.capacity)/s | \(format(report.ideal / .seconds(1), digits: 0)) s "
                    + "| \(format(Double(report.busiestSecondInFirstMinute) / capacity, digits: 1))× "
                    + "| \(format(report.busiestSecondRatio, digits: 2))× | \(mark(report.peakRatio, goals.peak)) "
                    + "| \(published) | \(mark(report.rejectedRatio, goals.rejected, unit: "")) | \(format(took, digits: 1)) s |"
            )
            summary.append(report.line)
        }
        var report = CaseReport(
            title: "19. A herd of outboxes back online at once, in virtual time (backlog drains in \(minutes) min"
                + (pushbackDelay.map { ", pushbackDelay \($0)" } ?? "") + ")",
            unit: "", rows: [])
        report.table = lines
        report.notes =
            [
                "Load is counted in virtual seconds; the peak, over any \(Herd.Report.peakWindow) seconds in a row. "
                    + "Goals: peak ≤ \(format(goals.peak, digits: 0))× capacity after the first minute, every post published "
                    + "within \(format(goals.time, digits: 0))× the ideal time, ≤ \(format(goals.rejected, digits: 0)) "
                    + "rejected request per useful one; a figure past its goal is marked MISSED.", "",
            ] + summary
        return report
    }

    private static func mark(_ value: Double, _ goal: Double, unit: String = "×") -> String {
        format(value, digits: 2) + unit + (value <= goal ? "" : " (MISSED)")
    }
}
