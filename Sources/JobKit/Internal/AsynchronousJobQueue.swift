import Dispatch

/// A queue whose `enqueue` never runs the work before it returns.
///
/// Combinators guard against queues that run work inline (a completion
/// that starts the next step inside itself would recurse) with a loop that
/// costs a lock round trip per step. On a queue that conforms here that
/// cannot happen, so they skip the loop. Checked once per performance.
package protocol AsynchronousJobQueue: JobQueue {}

extension DispatchQueue: AsynchronousJobQueue {}
