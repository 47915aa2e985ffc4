import Foundation
import UploadsTesting

/// Case 19: herds of outboxes back online at once (`Herd`, in virtual
/// time). Each of N outboxes holds one post of four photos when an outage
/// ends; the server takes the backlog's requests in D minutes at full
/// capacity and answers `503` past it, with `Retry-After: 5` or a slot of
/// each client's own. Not a timing: what the server saw, against the goals
/// of an outbox that does not stampede (`Herd.Report.goals`).
enum HerdCase {
    static func run(
        counts: [Int], minutes: [Int], servers: [Herd.Server] = [.retryAfter(.seconds(5)), .slots],
        pushbackDelay: Duration? = nil, requestsFolder: URL? = nil
    ) throws -> CaseReport {
        if let requestsFolder {
            try FileManager.default.createDirectory(at: requestsFolder, withIntermediateDirectories: true)
        }
        var written: [String] = []
        var lines = [
            "| server | D | outboxes | capacity | busiest 10 s, first minute | busiest 10 s, after a tenth of D "
                + "| busiest 10 s, after the first minute | last post ÷ D | rejected per useful | rejected per phone "
                + "| rejected bytes ÷ useful | rejected of one phone, first minute | run took |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        var summary: [String] = []
        for server in servers {
            for minutes in minutes {
                for count in counts {
                    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("JobKitHerd-\(UUID())")
                    let started = now()
                    var configuration = Herd.Configuration(outboxes: count, drainingIn: minutes)
                    configuration.server = server
                    configuration.recordsRequests = requestsFolder != nil
                    if let pushbackDelay {
                        configuration.options = { index in
                            var options = Herd.Configuration.defaultOptions(index)
                            options.pushbackDelay = pushbackDelay
                            return options
                        }
                    }
                    let report = try Herd.run(configuration, in: folder)
                    let took = Double(now() - started) / 1e9
                    lines.append(row(report, minutes: minutes, took: took))
                    summary.append(report.line)
                    if let requestsFolder {
                        let file = requestsFolder.appendingPathComponent(
                            fileName(server, count: count, minutes: minutes))
                        try Data(report.requestsCSV.utf8).write(to: file)
                        written.append(file.path)
                    }
                }
            }
        }
        var report = CaseReport(
            title: "19. Herds of outboxes back online at once, in virtual time"
                + (pushbackDelay.map { " (pushbackDelay \($0))" } ?? ""),
            unit: "", rows: [])
        report.table = lines
        report.notes =
            [
                "D is the time the backlog takes at the server's capacity. Load is counted in virtual seconds, over any "
                    + "\(Herd.Report.peakWindow) seconds in a row. A figure past its goal (`Herd.Report.goals`) is "
                    + "marked MISSED; a figure without a goal for its server is in brackets.", "",
            ] + summary
            + (written.isEmpty ? [] : ["", "Every request each server saw: " + written.joined(separator: ", ")])
        return report
    }

    /// The file of a herd's requests: `herd-1000-retry-after-5min.csv`,
    /// `herd-1000-slots-60min.csv`.
    static func fileName(_ server: Herd.Server, count: Int, minutes: Int) -> String {
        let name =
            switch server {
            case .retryAfter: "retry-after"
            case .slots: "slots"
            }
        return "herd-\(count)-\(name)-\(minutes)min.csv"
    }

    /// The herd's row: each figure marked against its goal for the server,
    /// or in brackets when the server has none for it.
    private static func row(_ report: Herd.Report, minutes: Int, took: Double) -> String {
        let goals = Dictionary(report.goals.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        func figure(_ name: String, _ value: Double, digits: Int = 2, unit: String = "×") -> String {
            let text = format(value, digits: digits) + unit
            guard let goal = goals[name] else { return "(\(text))" }
            return goal.isMet ? text : text + " (MISSED)"
        }
        let published =
            report.published == nil
            ? "\(report.publishedCount) of \(report.outboxes) (MISSED)"
            : figure("last post ÷ ideal", report.timeRatio)
        let cells = [
            "\(report.server)", "\(minutes) min", "\(report.outboxes)", format(report.capacity, digits: 2) + "/s",
            format(report.peakInFirstMinute, digits: 1) + "×",
            figure("peak after the first tenth", report.peakAfterFirstTenth),
            figure("peak after the first minute", report.peakRatio), published,
            figure("rejected per useful", report.rejectedRatio, unit: ""),
            figure("rejected per phone", report.rejectedPerPhone, unit: ""),
            figure("rejected bytes ÷ useful", report.rejectedBytesRatio, digits: 3, unit: ""),
            figure(
                "rejected of one phone, first minute", Double(report.mostRejectedOfOnePhoneInFirstMinute), digits: 0,
                unit: ""),
            format(took, digits: 1) + " s",
        ]
        return "| " + cells.joined(separator: " | ") + " |"
    }
}
