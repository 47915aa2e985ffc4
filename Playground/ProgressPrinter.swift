import Foundation
import JobKit
import Uploads

/// Shows a publishing's progress: a bar redrawn in place on a terminal,
/// plain lines otherwise; with `--verbose`, the tree of jobs too.
///
/// On a terminal, the bottom of the screen is a live region (the tree,
/// then the bar) redrawn in place; lines that stay (an upload done, an
/// attempt failed) are written above it. Every write happens under the
/// printer's lock, so reports from several threads never interleave.
final class ProgressPrinter: Sendable {
    private struct Shown: Sendable {
        var finished: Set<Int> = []
        /// How many of an outbox's post's media were stored at the last
        /// entry shown.
        var storedMediaCount: Int?
        var percent = -1
        var quarter = 0
        /// The last progress, to redraw the bar.
        var meter: Meter?
        /// The tree's lines in the live region (terminal only).
        var tree: [String] = []
        /// Set by `finish()`: nothing is drawn after it.
        var isFinished = false
    }

    /// What the bar shows.
    private struct Meter: Sendable {
        var fraction: Double
        var bytesSent: Int64
        var bytesTotal: Int64
        /// Uploads finished, or media stored.
        var finished: Int
        var count: Int
        var unit: String
    }

    let isTerminal: Bool
    private let base: URL
    /// What each upload is called, by its index; its destination below
    /// ``base`` when `nil`.
    private let names: [String]?
    private let shown = Lock(Shown())

    init(isTerminal: Bool, base: URL, names: [String]? = nil) {
        self.isTerminal = isTerminal
        self.base = base
        self.names = names
    }

    /// Shows a publishing's progress: a line for each upload that
    /// finished since the last call, and the bar.
    func show(_ progress: PublishProgress) {
        shown.withLock { shown in
            var lines: [String] = []
            for (index, upload) in progress.uploads.enumerated()
            where upload.isFinished && !shown.finished.contains(index) {
                shown.finished.insert(index)
                let name =
                    names.flatMap { $0.indices.contains(index) ? $0[index] : nil }
                    ?? Format.path(of: upload.destination, below: base)
                lines.append("  ✓ \(name)  \(Format.bytes(upload.bytesTotal))")
            }
            show(
                Meter(
                    fraction: progress.fractionCompleted, bytesSent: progress.bytesSent,
                    bytesTotal: progress.bytesTotal, finished: progress.finishedCount, count: progress.uploads.count,
                    unit: "uploads"),
                above: lines, in: &shown)
        }
    }

    /// Shows an outbox's post: a line each time more of its media are
    /// stored, and the bar.
    func show(_ entry: Outbox.Entry) {
        shown.withLock { shown in
            let count = entry.post.media.count
            var lines: [String] = []
            // The first entry is where the run starts, said already.
            if let stored = shown.storedMediaCount, entry.storedMediaCount > stored {
                lines.append("  ✓ \(entry.storedMediaCount) of \(count) media stored")
            }
            shown.storedMediaCount = entry.storedMediaCount
            show(
                Meter(
                    fraction: entry.fractionCompleted, bytesSent: entry.bytesSent, bytesTotal: entry.bytesTotal,
                    finished: entry.storedMediaCount, count: count, unit: "media"),
                above: lines, in: &shown)
        }
    }

    /// Writes `lines` to stay, and the bar: redrawn on a terminal, a line
    /// at each quarter otherwise.
    private func show(_ meter: Meter, above lines: [String], in shown: inout Shown) {
        guard !shown.isFinished else { return }
        var lines = lines
        let percent = Int(meter.fraction * 100)
        if isTerminal {
            shown.meter = meter
            guard !lines.isEmpty || percent != shown.percent else { return }
            shown.percent = percent
            write(redrawn(&shown, above: lines))
        } else {
            let quarter = percent / 25
            if quarter > shown.quarter && quarter < 4 {
                shown.quarter = quarter
                lines.append(
                    "  … \(quarter * 25)%  \(Format.bytes(meter.bytesSent)) of \(Format.bytes(meter.bytesTotal))")
            }
            if !lines.isEmpty { write(lines.map { $0 + "\n" }.joined()) }
        }
    }

    /// Shows the tree of jobs as it is now (`--verbose`): in the live
    /// region on a terminal, each line cut to fit; as a block of lines
    /// otherwise.
    func showTree(_ snapshot: JobSnapshot) {
        let lines = Self.indented(snapshot)
        shown.withLock { shown in
            guard !shown.isFinished else { return }
            if isTerminal {
                let columns = Terminal.columns()
                let rows = max(Terminal.rows() - 2, 1)
                var fitting = lines.prefix(rows).map { String($0.prefix(max(columns - 1, 1))) }
                if lines.count > rows { fitting[rows - 1] = "    …" }
                write(redrawn(&shown, above: [], tree: fitting))
            } else {
                write((["  jobs now:"] + lines).map { $0 + "\n" }.joined())
            }
        }
    }

    /// The tree, one job per line, indented under the run's own lines.
    static func indented(_ snapshot: JobSnapshot) -> [String] {
        snapshot.description.split(separator: "\n").map { "    " + $0 }
    }

    /// Writes `line` to stay, above the bar.
    func say(_ line: String) {
        shown.withLock { shown in
            guard !shown.isFinished else { return }
            write(isTerminal ? redrawn(&shown, above: [line]) : line + "\n")
        }
    }

    /// Clears the live region and stops drawing, so what follows starts
    /// on a line of its own.
    func finish() {
        shown.withLock { shown in
            guard !shown.isFinished else { return }
            if isTerminal { write(cleared(shown)) }
            shown.isFinished = true
        }
    }

    /// Prints a failed attempt above the bar: what went wrong, and whether
    /// and when a retry follows.
    func showFailure(of destination: URL, _ attempt: RetryPolicy.FailedAttempt, attempts: Int) {
        let next: String
        if let wait = attempt.nextRetryIn {
            next = "retry \(attempt.number) of \(attempts - 1) in \(Format.seconds(wait))"
        } else if attempt.number < attempts {
            next = "not retried: trying again cannot help"
        } else {
            next = attempts > 1 ? "no retries left" : "not retried (--retries 0)"
        }
        // A form's media all go to one endpoint: its error's receipt names
        // the file, which names the upload here.
        var name = Format.filename(in: attempt.error) ?? Format.path(of: destination, below: base)
        name += attempt.request.map { " (\($0))" } ?? ""
        let reason = Format.reason(attempt.error, naming: destination)
        let line = "  ✗ \(name): \(reason); \(next)"
        shown.withLock { shown in
            guard !shown.isFinished else { return }
            write(isTerminal ? redrawn(&shown, above: [line]) : line + "\n")
        }
    }

    /// What moves the cursor to the start of the live region and clears
    /// it and everything below.
    private func cleared(_ shown: Shown) -> String {
        "\r" + (shown.tree.isEmpty ? "" : "\u{1B}[\(shown.tree.count)A") + "\u{1B}[J"
    }

    /// What redraws the live region, with `lines` written above it to
    /// stay, and `tree` replacing the tree shown if given.
    private func redrawn(_ shown: inout Shown, above lines: [String], tree: [String]? = nil) -> String {
        var text = cleared(shown) + lines.map { $0 + "\n" }.joined()
        if let tree { shown.tree = tree }
        text += shown.tree.map { $0 + "\n" }.joined()
        return text + (shown.meter.map { bar($0) } ?? "")
    }

    /// The bar line, cut to fit `columns` so that it never wraps: the
    /// upload count goes first, then the bytes, then the bar narrows.
    private func bar(_ meter: Meter, columns: Int = Terminal.columns()) -> String {
        let room = max(columns - 1, 8)
        let percent = String(Int(meter.fraction * 100)).leftPadded(to: 3) + "%"
        let details = [
            "\(Format.bytes(meter.bytesSent)) of \(Format.bytes(meter.bytesTotal))",
            "\(meter.finished)/\(meter.count) \(meter.unit)",
        ]
        for kept in stride(from: details.count, through: 0, by: -1) {
            let text = ([" " + percent] + details.prefix(kept)).joined(separator: "  ")
            let width = min(30, room - 4 - text.count)
            guard width >= 10 || (kept == 0 && width >= 1) else { continue }
            let filled = Int(meter.fraction * Double(width))
            return "  [\(String(repeating: "█", count: filled))\(String(repeating: "░", count: width - filled))]" + text
        }
        return String(percent.trimmingCharacters(in: .whitespaces).prefix(room))
    }

    private func write(_ text: String) {
        Format.write(text)
    }
}

/// How the Playground writes sizes, times and destinations.
enum Format {
    /// Writes `text` to standard output at once, after what `print` wrote.
    static func write(_ text: String) {
        print(text, terminator: "")
        fflush(nil)  // all streams: `stdout` itself is not concurrency-safe to name
    }

    static func bytes(_ count: Int64) -> String {
        switch count {
        case ..<1_000: "\(count) B"
        case ..<1_000_000: String(format: "%.1f kB", Double(count) / 1_000)
        default: String(format: "%.1f MB", Double(count) / 1_000_000)
        }
    }

    static func seconds(_ duration: Duration) -> String {
        String(format: "%.2f s", seconds(in: duration))
    }

    /// `2`, `0.5`: a number of seconds as the user typed it.
    static func number(_ value: Double) -> String {
        value == value.rounded() ? String(Int(value)) : String(value)
    }

    /// Why an attempt failed, in one line, without the destination when
    /// the error's own description starts with it.
    static func reason(_ error: any Error, naming destination: URL) -> String {
        let text = error.localizedDescription
        guard let colon = text.range(of: ": ") else { return text }
        // "photo-1.jpg → api/v2/media" for a form's file: the endpoint is
        // its last part.
        let named = text[..<colon.lowerBound].components(separatedBy: " → ").last ?? ""
        guard destination.path.hasSuffix(named) else { return text }
        return String(text[colon.upperBound...])
    }

    /// The file an error's answer names: a form's.
    static func filename(in error: any Error) -> String? {
        switch error as? UploadError {
        case .httpStatus(let receipt)?, .notProcessed(let receipt, _)?: receipt.filename
        default: nil
        }
    }

    static func seconds(in duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
    }

    /// `count` and `noun`, plural unless one: "3 photos", "1 video".
    static func count(_ count: Int, _ noun: String) -> String {
        "\(count) \(noun)\(count == 1 ? "" : "s")"
    }

    /// `destination`'s path below `base`, or the whole URL when it is not
    /// below it.
    static func path(of destination: URL, below base: URL) -> String {
        let whole = destination.absoluteString
        let prefix = base.absoluteString.hasSuffix("/") ? base.absoluteString : base.absoluteString + "/"
        return whole.hasPrefix(prefix) ? String(whole.dropFirst(prefix.count)) : whole
    }
}

extension String {
    func leftPadded(to width: Int) -> String {
        String(repeating: " ", count: max(width - count, 0)) + self
    }
}

/// The terminal standard output writes to.
enum Terminal {
    /// Its width in columns, asked anew each time (the user may resize
    /// it); 80 when it does not say.
    static func columns() -> Int {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return 80 }
        return Int(size.ws_col)
    }

    /// Its height in rows, asked anew each time; 24 when it does not say.
    static func rows() -> Int {
        var size = winsize()
        guard ioctl(STDOUT_FILENO, UInt(TIOCGWINSZ), &size) == 0, size.ws_row > 0 else { return 24 }
        return Int(size.ws_row)
    }
}
