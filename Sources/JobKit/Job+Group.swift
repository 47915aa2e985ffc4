/// What a group does when one of its children fails.
public enum FailurePolicy: Sendable, Equatable {
    /// The first failure completes the group at once with that error and
    /// cancels the children still running; children not started yet never
    /// start.
    case failFast
    /// Every child runs to completion; then the group fails with the first
    /// error, in order of completion, if any child failed.
    case waitForAll
}

// MARK: - group

extension Job where Success == Void {
    /// A job that performs `jobs` together and finishes when all of them
    /// finished.
    ///
    /// The children run on the group's queue, all at once or, with
    /// `maxConcurrent`, at most that many at any moment, started in input
    /// order. Cancelling the group cancels every running child. An empty
    /// group finishes at once.
    ///
    /// Children are started from work items on the queue: one per child in
    /// a small group; in a large one, up to 64 children per work item,
    /// spread over at least 64 work items so that a concurrent queue still
    /// runs them in parallel. In a bounded group, a child whose closure
    /// completes it before returning is followed at once by the next on the
    /// same thread; after 64 in a row the group lets other work on its queue
    /// run.
    ///
    /// ```swift
    /// let uploads = photos.map { photo in uploading(photo) }
    /// Job.group(uploads, maxConcurrent: 4).perform { outcome in print(outcome) }
    /// ```
    ///
    /// - Parameters:
    ///   - jobs: The children; at most `UInt32.max` (more fail the group
    ///     with ``JobError/invalidArgument(_:)``).
    ///   - maxConcurrent: The most children running at any moment; at least
    ///     1 (a smaller value fails the group with
    ///     ``JobError/invalidArgument(_:)``). Unbounded by default.
    ///   - failurePolicy: ``FailurePolicy/failFast`` (the default) or
    ///     ``FailurePolicy/waitForAll``.
    /// - Returns: A job that finishes when every child finished.
    /// - Complexity: O(1) work per child and one lock round trip per start
    ///   and per completion, without recursion, even when children
    ///   complete synchronously.
    public static func group(
        _ jobs: [Job<Void>],
        maxConcurrent: Int = .max,
        failurePolicy: FailurePolicy = .failFast
    ) -> Job<Void> {
        let inner = Inner(jobs)
        return Job<Void> { controller in
            GroupRun(
                jobs: inner.value,
                maxConcurrent: maxConcurrent,
                role: .group(failurePolicy),
                queue: controller.queue,
                owner: controller.shared,
                report: { owner, outcome in Controller(owner).complete(with: outcome.map { _ in () }) }
            ).start { controller.token.attach($0) }
        }
    }
}

// MARK: - collect

extension Job {
    /// A job that performs `jobs` together and finishes with their values,
    /// in input order, whatever the order they completed in.
    ///
    /// It behaves as ``group(_:maxConcurrent:failurePolicy:)``, and keeps
    /// each child's value:
    ///
    /// ```swift
    /// let sizes: Job<[Int]> = Job.collect(files.map(measure))
    /// ```
    ///
    /// - Parameters:
    ///   - jobs: The children; at most `UInt32.max` (more fail the group
    ///     with ``JobError/invalidArgument(_:)``).
    ///   - maxConcurrent: The most children running at any moment; at least 1.
    ///   - failurePolicy: What a child's failure does to the others.
    /// - Returns: A job whose value holds each child's value, in input order.
    public static func collect<Element>(
        _ jobs: [Job<Element>],
        maxConcurrent: Int = .max,
        failurePolicy: FailurePolicy = .failFast
    ) -> Job<[Element]> where Success == [Element] {
        let inner = Inner(jobs)
        return Job<[Element]> { controller in
            GroupRun(
                jobs: inner.value,
                maxConcurrent: maxConcurrent,
                role: .collect(failurePolicy),
                queue: controller.queue,
                owner: controller.shared,
                report: { owner, outcome in Controller(owner).complete(with: outcome.map { $0.values }) }
            ).start { controller.token.attach($0) }
        }
    }
}
