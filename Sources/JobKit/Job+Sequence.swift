extension Job where Success == Void {
    /// A job that performs `jobs` one after another and stops at the first
    /// failure.
    ///
    /// Each child starts only after the previous one finished, on the
    /// sequence's queue. The first failure fails the sequence with that
    /// error, and the children after it never start. Cancelling the
    /// sequence cancels the running child. An empty sequence finishes at
    /// once. Performing the sequence again runs every step again, from the
    /// first.
    ///
    /// ```swift
    /// Job.sequence([.group(mediaUploads), postUpload])
    /// ```
    ///
    /// - Parameter jobs: The steps, in order; at most `UInt32.max` (more
    ///   fail the sequence with ``JobError/invalidArgument(_:)``).
    /// - Returns: A job that finishes when the last step finished.
    /// Steps that complete before their closure returns are followed at
    /// once, on the same thread, without a trip through the queue each; the
    /// sequence still lets other work on its queue run at least every 64
    /// such steps, so a long sequence on the main queue keeps it
    /// responsive.
    ///
    /// - Complexity: O(1) work per step, and a flat stack however long the
    ///   sequence, even when steps complete synchronously.
    public static func sequence(_ jobs: [Job<Void>]) -> Job<Void> {
        let inner = Inner(jobs)
        return Job<Void> { controller in
            SequenceRun(jobs: inner.value, controller: controller).start()
        }
    }
}
