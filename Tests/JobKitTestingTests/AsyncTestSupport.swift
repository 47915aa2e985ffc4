/// An error a test throws on purpose, told apart by `id`.
struct TestError: Error, Equatable {
    var id = 0
}
