import Synchronization

/// A reference to an object made on first use, by whichever thread comes
/// first, and read without a lock.
///
/// Every access is sequentially consistent, as an ``OutcomeLatch`` is won:
/// where an attachment makes or installs a table and then reads a latch or
/// an "over" flag, and the completion sets that and then looks for the
/// table, at least one of the two sees the other, and no attachment is
/// lost.
///
/// An object taken out of it (``take()``, ``remove(_:)``) may be released
/// while another thread loads it. So a reference is either never emptied
/// (a job's table, a token's, the group's slots themselves), or emptied,
/// and read, only under its owner's lock (a group's slot for a child's
/// table, which the child fills with ``install(_:)`` alone).
struct LazyReference<Object: AnyObject & Sendable>: ~Copyable, Sendable {
    /// The object, retained by this reference while here.
    private let reference = Atomic<Unmanaged<Object>?>(nil)

    init() {}

    /// The object, if here.
    var existing: Object? {
        reference.load(ordering: .sequentiallyConsistent)?.takeUnretainedValue()
    }

    /// The object, made now with `make` if none is here.
    func made(by make: () -> Object) -> Object {
        if let object = existing { return object }
        let object = make()
        if install(object) { return object }
        // Another thread made one first.
        return existing ?? object
    }

    /// Calls `body` with the object, if here, without retaining it for the
    /// call: for a reference that is never emptied, whose owner the caller
    /// holds, and so the reference the object. A loop's every step reads
    /// its job's table; a retain and its release are atomic.
    @inline(__always)
    func withExisting<Result>(_ body: (Object) -> Result) -> Result? {
        guard let object = reference.load(ordering: .sequentiallyConsistent) else { return nil }
        return object._withUnsafeGuaranteedRef(body)
    }

    /// ``made(by:)``, calling `body` with the object as ``withExisting(_:)``
    /// does, on the same terms.
    @inline(__always)
    func withMade<Result>(by make: () -> Object, _ body: (Object) -> Result) -> Result {
        if let object = reference.load(ordering: .sequentiallyConsistent) {
            return object._withUnsafeGuaranteedRef(body)
        }
        return body(made(by: make))
    }

    /// Puts `object` here, retained, if nothing is.
    /// - Returns: `true` if it was put here.
    func install(_ object: Object) -> Bool {
        // Something is here already: no retain to undo.
        if reference.load(ordering: .sequentiallyConsistent) != nil { return false }
        let retained = Unmanaged.passRetained(object)
        let installed = reference.compareExchange(
            expected: nil, desired: retained, ordering: .sequentiallyConsistent
        ).exchanged
        if !installed { retained.release() }
        return installed
    }

    /// Takes the object out, if one is here.
    func take() -> Object? {
        reference.exchange(nil, ordering: .sequentiallyConsistent)?.takeRetainedValue()
    }

    /// Takes `object` out if it is the one here.
    func remove(_ object: Object) {
        let expected = Unmanaged.passUnretained(object)
        if reference.compareExchange(expected: expected, desired: nil, ordering: .sequentiallyConsistent).exchanged {
            expected.release()
        }
    }

    deinit {
        reference.load(ordering: .acquiring)?.release()
    }
}
