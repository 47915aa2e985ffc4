/// The job, or the jobs, that a combinator's job performs, held in an
/// object of their own.
///
/// A job nested a million deep (a `map` of a `map` of …, built as a value)
/// is a million closures, each holding the next job. Released as closures'
/// contexts, each inside the last one's release, they would take a million
/// nested calls and crash the thread. Each combinator's closure holds its
/// jobs in one of these instead, whose deinit hands them to
/// ``Trampoline/release(_:)``, which keeps that flat.
///
/// It holds jobs only (a `Job`, an array of them): a closure kept in a
/// generic value would be called through a conversion made on each read.
/// A combinator's closure captures its own closures and values as before.
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

    /// The job, or the jobs.
    @inline(__always)
    var value: Value {
        stored.unsafelyUnwrapped
    }

    deinit {
        // Boxed as an object: a group's jobs go once the group is released,
        // not at each of its performances.
        Trampoline.release(stored.take().map { $0 as AnyObject })
    }
}

/// One job that a combinator's job performs, held as ``Inner`` holds jobs,
/// in an object that is not generic: a generic class's type is looked up at
/// run time each time one is made in generic code (a `then` makes one for
/// each step of a loop), and its deinit looks up more.
///
/// Unchecked: `context` is set in `init`, read by the job's body, and
/// written only in `deinit`, when no other reference to the object is
/// left; a job's closure is `Sendable`.
final class InnerJob: @unchecked Sendable {
    private let code: UnsafeRawPointer
    @exclusivity(unchecked) private var context: AnyObject?

    init<Success>(_ job: Job<Success>) {
        let parts = ClosureParts(job.body)
        code = parts.code
        context = parts.context
    }

    /// The job, whose value is `Success`, as it was given.
    @inline(__always)
    func job<Success>(_: Success.Type = Success.self) -> Job<Success> {
        Job(ClosureParts(code: code, context: context).closure(as: Job<Success>.Body.self))
    }

    deinit {
        Trampoline.release(context.take())
    }
}

/// A closure as its two words: the address of its code, and its context,
/// the object that holds what it captured (`nil` for a closure that
/// captures nothing). Swift lays out every closure so, whatever its type:
/// taken apart and put together again as the same type, it is the same
/// closure. For objects that hold closures of types they do not know
/// without generics, whose types are looked up at run time in generic code.
struct ClosureParts {
    let code: UnsafeRawPointer
    let context: AnyObject?

    init(code: UnsafeRawPointer, context: AnyObject?) {
        self.code = code
        self.context = context
    }

    /// `closure`'s parts: they hold its context.
    @inline(__always)
    init<Closure>(_ closure: Closure) {
        self = unsafeBitCast(closure, to: ClosureParts.self)
    }

    /// The closure, of the type it was taken apart as.
    @inline(__always)
    func closure<Closure>(as _: Closure.Type) -> Closure {
        unsafeBitCast(self, to: Closure.self)
    }
}
