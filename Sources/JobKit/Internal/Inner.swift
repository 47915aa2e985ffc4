/// The jobs that a group's, a race's, a zip's or a sequence's job performs,
/// held in an object of their own.
///
/// A job nested a million deep (a group of a group of …, built as a value)
/// is a million closures, each holding the next job. Released as closures'
/// contexts, each inside the last one's release, they would take a million
/// nested calls and crash the thread. Each such combinator's closure holds
/// its jobs in one of these instead, whose deinit releases them through
/// ``Trampoline/releasing(_:)``, which keeps that flat.
///
/// A combinator of one job (`map`, `then`, `timeout`, …) captures its job as
/// it is: one of these per step of a loop written as recursion would cost
/// each step an object, and each performance a look-up of its type. So a
/// value built of such combinators alone, thousands deep, is still released
/// one level inside the next; anywhere a job with several jobs comes in
/// between, at most the levels between two such jobs are.
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
