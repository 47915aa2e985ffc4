/// A random number generator that gives the same numbers for the same seed,
/// on every run and every machine: for tests that draw at random (jittered
/// retry waits, injected faults) and must still be exact.
///
/// ```swift
/// var generator = SeededRandomNumberGenerator(seed: 42)
/// let first = Int.random(in: 1...6, using: &generator)
/// var again = SeededRandomNumberGenerator(seed: 42)
/// assert(Int.random(in: 1...6, using: &again) == first)
/// ```
///
/// It is SplitMix64: small and fast, with good statistical quality for
/// tests and simulations; not for cryptography.
public struct SeededRandomNumberGenerator: RandomNumberGenerator, Sendable {
    private var state: UInt64

    /// Creates a generator whose numbers follow from `seed`.
    public init(seed: UInt64) {
        state = seed
    }

    /// The next 64 random bits.
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
