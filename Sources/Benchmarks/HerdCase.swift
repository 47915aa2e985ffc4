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
        pushbackDelay: Duration? = nil, holdGrowth: Double? = nil, seeds: Int = 1, requestsFolder: URL? = nil
    ) throws -> CaseReport {
        if let requestsFolder {
            try FileManager.default.createDirectory(at: requestsFolder, withIntermediateDirectories: true)
        }
        var written: [String] = []
        var lines = [
            "| server | D | outboxes | capacity | busiest 10 s, first minute | busiest 10 s, after a tenth of D "
                + "| busiest 10 s, after the first minute | last post ÷ D | rejected per useful | rejected per phone "
                + "| rejected bytes ÷ useful | rejected of one phone, first minute "
                + "| toward a held host, of one phone, first minute | run took |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
        ]
        var summary: [String] = []
        for server in servers {
            for minutes in minutes {
                for count in counts {
                    var reports: [Herd.Report] = []
                    let started = now()
                    for seed in 1...max(seeds, 1) {
                        let configuration = configuration(
                            server, count: count, minutes: minutes, seed: seed, pushbackDelay: pushbackDelay,
                            holdGrowth: holdGrowth, recordsRequests: requestsFolder != nil)
                        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                            "JobKitHerd-\(UUID())")
                        let report = try Herd.run(configuration, in: folder)
                        reports.append(report)
                        summary.append(report.line + (seeds > 1 ? ", seed \(seed)" : ""))
                        if let requestsFolder {
                            let file = requestsFolder.appendingPathComponent(
                                fileName(server, count: count, minutes: minutes, seed: seeds > 1 ? seed : nil))
                            try Data(report.requestsCSV.utf8).write(to: file)
                            written.append(file.path)
                        }
                    }
                    let took = Double(now() - started) / 1e9
                    lines.append(row(reports, minutes: minutes, took: took))
                }
            }
        }
        let lone = try lonePhoneLines()
        var report = CaseReport(
            title: "19. Herds of outboxes back online at once, in virtual time"
                + (pushbackDelay.map { " (pushbackDelay \($0))" } ?? "")
                + (holdGrowth.map { " (holds grow \($0)× the time held)" } ?? "")
                + (seeds > 1 ? " (\(seeds) seeds each)" : ""),
            unit: "", rows: [])
        report.table = lines
        report.notes =
            [
                "D is the time the backlog takes at the server's capacity. Load is counted in virtual seconds, over any "
                    + "\(Herd.Report.peakWindow) seconds in a row. A figure past its goal (`Herd.Report.goals`) is "
                    + "marked MISSED; a figure without a goal for its server is in brackets."
            ]
            + (seeds > 1
                ? [
                    "Each figure is the median of \(seeds) herds that differ only in their seeds (when each phone "
                        + "hears of the network, and each outbox's generator), then [the least, the most] of them; "
                        + "MISSED when the median is past its goal. \"run took\" is all of them."
                ] : []) + [""] + summary
            + [""] + lone
            + (written.isEmpty ? [] : ["", "Every request each server saw: " + written.joined(separator: ", ")])
        return report
    }

    /// A lone phone back online to an idle server (`Herd.lonePhone`), with
    /// no wake window and with the default one: when its first request
    /// went, and how long its post took from then, against the requests'
    /// own time (MISSED when longer).
    static func lonePhoneLines() throws -> [String] {
        try [Duration.zero, .seconds(10)].map { window in
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("JobKitHerd-\(UUID())")
            let phone = try Herd.lonePhone(wakeWindow: window, in: folder)
            let seconds = { (duration: Duration) in String(format: "%.2f s", duration / .seconds(1)) }
            let missed = phone.publishing > phone.requestsOwnTime ? " MISSED" : ""
            return "A lone phone, idle server, wake window \(seconds(window)): first request "
                + "\(seconds(phone.firstRequest)) after the network came back, published \(seconds(phone.publishing)) after it\(missed) (the requests' "
                + "own time: \(seconds(phone.requestsOwnTime)))."
        }
    }

    /// The herd of `count` outboxes whose backlog takes `minutes` against
    /// `server`. Seed 1 is the herd's default; another seed draws when
    /// each phone hears of the network, and seeds each outbox's
    /// generator, differently. `pushbackDelay` and `holdGrowth` replace
    /// the outboxes' defaults when given.
    static func configuration(
        _ server: Herd.Server, count: Int, minutes: Int, seed: Int, pushbackDelay: Duration?, holdGrowth: Double?,
        recordsRequests: Bool
    ) -> Herd.Configuration {
        var configuration = Herd.Configuration(outboxes: count, drainingIn: minutes)
        configuration.server = server
        configuration.recordsRequests = recordsRequests
        configuration.seed = UInt64(seed)
        let offset = (seed - 1) * count
        configuration.options = { index in
            var options = Herd.Configuration.defaultOptions(offset + index)
            if let pushbackDelay { options.pushbackDelay = pushbackDelay }
            if let holdGrowth { options.holdCeilingGrowth = holdGrowth }
            return options
        }
        return configuration
    }

    /// The file of a herd's requests: `herd-1000-retry-after-5min.csv`,
    /// `herd-1000-slots-60min.csv`, `herd-1000-slots-60min-seed2.csv`.
    static func fileName(_ server: Herd.Server, count: Int, minutes: Int, seed: Int? = nil) -> String {
        let name =
            switch server {
            case .retryAfter: "retry-after"
            case .slots: "slots"
            }
        return "herd-\(count)-\(name)-\(minutes)min" + (seed.map { "-seed\($0)" } ?? "") + ".csv"
    }

    /// The herd's row: each figure marked against its goal for the server,
    /// or in brackets when the server has none for it. Of several herds
    /// (seeds), each figure is their median, then [the least, the most].
    private static func row(_ reports: [Herd.Report], minutes: Int, took: Double) -> String {
        let first = reports[0]
        let goals = Dictionary(first.goals.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        func figure(
            _ name: String, _ value: (Herd.Report) -> Double, digits: Int = 2, unit: String = "×", goal: Bool = true
        ) -> String {
            let values = reports.map(value)
            let median = values.median
            var text = format(median, digits: digits) + unit
            if values.count > 1, let least = values.min(), let most = values.max() {
                text += " [\(format(least, digits: digits))–\(format(most, digits: digits))]"
            }
            guard goal else { return text }
            guard let limit = goals[name]?.limit else { return "(\(text))" }
            return median <= limit ? text : text + " (MISSED)"
        }
        let unpublished = reports.filter { $0.published == nil }
        let published =
            unpublished.isEmpty
            ? figure("last post ÷ ideal", \.timeRatio)
            : "\(unpublished[0].publishedCount) of \(first.outboxes) (MISSED)"
        let cells = [
            "\(first.server)", "\(minutes) min", "\(first.outboxes)", format(first.capacity, digits: 2) + "/s",
            figure("", \.peakInFirstMinute, digits: 1, goal: false),
            figure("peak after the first tenth", \.peakAfterFirstTenth),
            figure("peak after the first minute", \.peakRatio), published,
            figure("rejected per useful", \.rejectedRatio, unit: ""),
            figure("rejected per phone", \.rejectedPerPhone, unit: ""),
            figure("rejected bytes ÷ useful", \.rejectedBytesRatio, digits: 3, unit: ""),
            figure(
                "rejected of one phone, first minute", { Double($0.mostRejectedOfOnePhoneInFirstMinute) }, digits: 0,
                unit: ""),
            figure(
                "toward a held host, of one phone, first minute",
                { Double($0.mostTowardAHeldHostOfOnePhoneInFirstMinute) }, digits: 0, unit: ""),
            format(took, digits: 1) + " s",
        ]
        return "| " + cells.joined(separator: " | ") + " |"
    }
}
