// MARK: - Boxed values

// A zip's jobs are of any types, and a race's of a generic one: each runs
// as a child of a run of `any Sendable` (a ``ZipRun``, a group: specialized
// in this module), whose controllers box the value the job reports, and
// the combinator unboxes it as its job's type.

extension Job {
    /// This job as a job of `any Sendable`, for a zip or a race: its body
    /// runs with the controller's token typed as this job's, which boxes
    /// the value it reports. No state of its own, no queue hop.
    func boxingItsValue() -> Job<any Sendable> {
        Job<any Sendable> { controller in
            body(Job<Success>.Controller(controller.shared))
        }
    }
}

/// `boxed`, opened from its box, as the `Value` it is. A box made in code
/// generic over the job's value type holds a `Value`, even an existential
/// one: it is taken as it is, without a cast (which in unspecialized code
/// looks up the metadata of `Value?` and walks the runtime's casting
/// rules). A box made where `Value` was known to be an existential holds
/// the value inside it instead: that one is cast.
func unboxed<Boxed: Sendable, Value: Sendable>(_ boxed: Boxed) -> Value {
    Boxed.self == Value.self ? unsafeBitCast(boxed, to: Value.self) : cast(boxed)
}

/// `boxed` cast to `Value`, an existential that holds it. Apart, so that
/// only this path looks up the metadata of `Value?`.
@inline(never)
private func cast<Boxed: Sendable, Value: Sendable>(_ boxed: Boxed) -> Value {
    guard let value = boxed as? Value else {
        preconditionFailure("Internal inconsistency: a boxed \(Boxed.self) is not a \(Value.self)")
    }
    return value
}
