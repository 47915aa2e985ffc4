/// The jobs that a combinator's job performs (a group's, a sequence's),
/// held in an object of their own.
///
/// A job nested a million deep (a group of a group of …, built as a value)
/// is a million closures, each holding the next job. Released as closures'
/// contexts, each inside the last one's release, they would take a million
/// nested calls and crash the thread. Each combinator's closure holds its
/// jobs in one of these instead, whose deinit releases them through
/// ``Trampoline/releasing(_:)``, which keeps that flat.
///
/// It holds jobs only (an array of them): a closure kept in a generic value
/// would be called through a conversion made on each read. A combinator's
/// closure captures its own closures and values as before.
///
/// Unchecked: `stored` is set in `init` and read by the job's body, and
/// written only in `deinit`, when no other reference to the object is left
/// (so without exclusivity checks, which would cost each read a call).
/// `Value` is `Sendable`.
final class Inner<Value: Sendable>: @unchecked Sendable {
    @exclusivity(unchecked) private var stored: Value?

    init(_ value: Value) {
        stored = value
    }

    /// The jobs.
    @inline(__always)
    var value: Value {
        stored.unsafelyUnwrapped
    }

    deinit {
        if !Trampoline.releasing({ stored = nil }) { Trampoline.holdRelease { [stored] in _ = stored } }
    }
}

/// The job that a combinator's job performs (a `map`'s, a `then`'s first
/// job), held as ``Inner`` holds jobs: its closure, kept as a closure of its
/// own type, so that reading it costs no conversion.
///
/// Unchecked: `body` is set in `init` and read by the job's body, and
/// written only in `deinit`, when no other reference to the object is
/// left; a job's closure is `Sendable`.
final class InnerJob<Success: Sendable>: @unchecked Sendable {
    @exclusivity(unchecked) private var body: Job<Success>.Body?

    init(_ job: Job<Success>) {
        body = job.body
    }

    /// The job.
    @inline(__always)
    var job: Job<Success> {
        Job(body.unsafelyUnwrapped)
    }

    deinit {
        if !Trampoline.releasing({ body = nil }) { Trampoline.holdRelease { [body] in _ = body } }
    }
}
