import Testing

/// The tests that move tens or hundreds of megabytes through a server or
/// measure this process's memory, one at a time: the memory they measure
/// is the whole process's, and another's transfer would count in it.
@Suite("Large transfers", .serialized, .timeLimit(.minutes(2)))
enum LargeTransfers {}
