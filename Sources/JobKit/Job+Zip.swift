// MARK: - zip

extension Job {
    /// A job that performs `jobs`, of any number and any types, together,
    /// and finishes with all their values, in argument order.
    ///
    /// "The profile and the avatar at once" is one job, however many jobs
    /// and of whatever types:
    ///
    /// ```swift
    /// let (user, avatar) = try await Job.zip(fetchUser(id), fetchAvatar(id)).value
    /// ```
    ///
    /// The first failure fails the zip with that error and cancels the
    /// jobs still running; cancelling the zip cancels them all. A zip of no
    /// jobs is a `Job<Void>` that finishes at once, and a zip of one job
    /// has that job's value.
    ///
    /// The jobs start one after another, in argument order, in the work
    /// item of the zip's queue that starts the zip, as a race's do: each
    /// job's body is expected to start its work (a request, a timer, a task)
    /// and return. A job that computes in its body holds back the jobs
    /// after it; give that work a queue of its own to run it beside them.
    ///
    /// - Parameter jobs: The jobs, of any types.
    /// - Returns: A job whose value holds each job's value, in argument
    ///   order.
    public static func zip<each T: Sendable>(
        _ jobs: repeat Job<each T>
    ) -> Job<(repeat each T)> where Success == (repeat each T) {
        var boxed: [Job<any Sendable>] = []
        for job in repeat each jobs { boxed.append(job.boxingItsValue()) }
        let inner = Inner(boxed)
        return Job<(repeat each T)> { controller in
            GroupRun(
                jobs: inner.value,
                maxConcurrent: .max,
                role: .zip,
                queue: controller.queue,
                owner: controller.shared,
                report: { owner, outcome in
                    let controller = Job<(repeat each T)>.Controller(owner)
                    switch outcome {
                    case .success(.collected(let values)):
                        var unboxing = Unboxing(values)
                        controller.finish(with: (repeat unboxing.next((each T).self)))
                    case .failure(let error):
                        controller.fail(with: error)
                    case .success(let other):
                        preconditionFailure("Internal inconsistency: a zip ended with \(other)")
                    }
                }
            ).start { controller.token.attach($0) }
        }
    }
}

/// Takes a zip's boxed values out, in order, as the types of its jobs.
private struct Unboxing {
    private let values: [(any Sendable)?]
    private var index = 0

    init(_ values: [(any Sendable)?]) {
        self.values = values
    }

    /// The next value, which the zip's job of type `Value` reported.
    mutating func next<Value: Sendable>(_: Value.Type) -> Value {
        defer { index += 1 }
        guard let boxed = values[index] else {
            preconditionFailure("Internal inconsistency: a zip's value \(index) is missing")
        }
        return unboxed(boxed)
    }
}
