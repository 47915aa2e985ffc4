// `swift run Playground`: publishes a sample post with JobKit's Uploads and
// shows how it goes. Argument handling and printing only; the work is in
// the Uploads library.
import Foundation

/// The command: reads the arguments, then publishes the sample post at
/// once (``PublishRun``) or through a durable outbox (``OutboxRun``, with
/// `--outbox DIR`).
@main
enum PlaygroundCommand {
    static func main() async {
        let arguments: Arguments
        do {
            arguments = try Arguments.parse(CommandLine.arguments.dropFirst())
        } catch {
            fail("\(error)\nRun with --help to see the options.", code: 64)
        }
        if arguments.showsHelp {
            print(Arguments.usage)
            exit(0)
        }
        // Ctrl-C, SIGTERM and SIGHUP stop the run from here on, cleaning up.
        let stop = Stop()
        let workspace = Workspace.make(arguments, stop: stop)
        if arguments.outbox != nil {
            await OutboxRun(arguments: arguments, workspace: workspace, stop: stop).run()
        } else {
            await PublishRun(arguments: arguments, workspace: workspace, stop: stop).run()
        }
    }
}

/// Writes `error: message` to standard error, after everything printed so
/// far, and exits with `code`.
func fail(_ message: String, code: Int32) -> Never {
    fflush(nil)  // all streams: `stdout` itself is not concurrency-safe to name
    FileHandle.standardError.write(Data("error: \(message)\n".utf8))
    exit(code)
}
