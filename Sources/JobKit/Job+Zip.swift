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
        // Made once, with the zip: a closure made in the body, which is
        // generic over the pack of types, would be allocated at each
        // performance, to capture them.
        let report: @Sendable (ControllerToken, Result<ZipRun, any Error>) -> Void = { owner, outcome in
            let controller = Job<(repeat each T)>.Controller(owner)
            switch outcome {
            case .success(let run):
                var unboxing = Unboxing(run)
                controller.finish(with: (repeat unboxing.next((each T).self)))
            case .failure(let error):
                controller.fail(with: error)
            }
        }
        return Job<(repeat each T)> { controller in
            // The controller's token, untyped: asked as a controller of the
            // tuple, it would look up the tuple type's metadata.
            ZipRun(jobs: inner.value, owner: controller.shared, report: report).start()
        }
    }
}

/// Takes a zip's values out of its run, in order, as the types of its
/// jobs.
private struct Unboxing {
    private let run: ZipRun
    private var index = 0

    init(_ run: ZipRun) {
        self.run = run
    }

    /// The next value, which the zip's job of type `Value` reported.
    mutating func next<Value: Sendable>(_: Value.Type) -> Value {
        defer { index += 1 }
        return run.takeValue(at: index, as: Value.self)
    }
}
