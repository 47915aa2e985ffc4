import Foundation
import JobKit
import Uploads

/// Shows a publishing's progress: a bar redrawn in place on a terminal,
/// plain lines otherwise. Progress arrives one report at a time.
final class ProgressPrinter: Sendable {
    private struct Shown: Sendable {
        var finished: Set<Int> = []
        var percent = -1
        var quarter = 0
    }

    let isTerminal: Bool
    private let base: URL
    private let shown = Lock(Shown())

    init(isTerminal: Bool, base: URL) {
        self.isTerminal = isTerminal
        self.base = base
    }

    func show(_ progress: PublishProgress) {
        let lines = shown.withLock { shown -> [String] in
            var lines: [String] = []
            for (index, upload) in progress.uploads.enumerated()
            where upload.isFinished && !shown.finished.contains(index) {
                shown.finished.insert(index)
                lines.append(
                    "  ✓ \(Format.path(of: upload.destination, below: base))  \(Format.bytes(upload.bytesTotal))")
            }
            let percent = Int(progress.fractionCompleted * 100)
            if isTerminal {
                guard !lines.isEmpty || percent != shown.percent else { return [] }
                shown.percent = percent
            } else {
                let quarter = percent / 25
                if quarter > shown.quarter && quarter < 4 {
                    shown.quarter = quarter
                    lines.append(
                        "  … \(quarter * 25)%  \(Format.bytes(progress.bytesSent)) of \(Format.bytes(progress.bytesTotal))"
                    )
                }
            }
            return lines
        }
        if isTerminal {
            let clear = "\r\u{1B}[K"
            let above = lines.map { clear + $0 + "\n" }.joined()
            write(above + clear + bar(progress))
        } else if !lines.isEmpty {
            write(lines.map { $0 + "\n" }.joined())
        }
    }

    /// Ends the bar's line, so what follows starts on a line of its own.
    func finish() {
        if isTerminal { write("\r\u{1B}[K") }
    }

    private func bar(_ progress: PublishProgress) -> String {
        let width = 30
        let filled = Int(progress.fractionCompleted * Double(width))
        let percent = String(Int(progress.fractionCompleted * 100)).leftPadded(to: 3)
        return
            "  [\(String(repeating: "█", count: filled))\(String(repeating: "░", count: width - filled))] \(percent)%  "
            + "\(Format.bytes(progress.bytesSent)) of \(Format.bytes(progress.bytesTotal))  "
            + "\(progress.finishedCount)/\(progress.uploads.count) uploads"
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

    static func seconds(in duration: Duration) -> Double {
        let (seconds, attoseconds) = duration.components
        return Double(seconds) + Double(attoseconds) / 1e18
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
