/// One performance of a sequence: runs its steps one at a time.
///
/// A single loop starts the steps. A step that completes while the loop is
/// still starting it (synchronously, on a queue that runs work inline) only
/// marks that the loop should go on, so the stack stays flat however long
/// the sequence, whatever the queue. Deciding to go on and preparing the
/// next step share one lock round trip. On an ``AsynchronousJobQueue`` no
/// step can complete inside the loop, so there is no loop: a completion
/// prepares the next step and enqueues it, like a hand-written chain.
final class SequenceRun: Sendable {
    private struct Inner: Sendable {
        var nextIndex = 0
        var isLooping = false
        var shouldContinue = false
        var isFinished = false
        var current: JobState<Void>?
    }

    private enum Step: Sendable {
        case start(Job<Void>, JobState<Void>)
        case finish
        /// Nothing to do here: the sequence finished, or the running loop
        /// goes on.
        case stop
    }

    private let jobs: [Job<Void>]
    private let controller: Job<Void>.Controller
    private let queue: any JobQueue
    /// Whether `queue` may run work inline, so steps must be started by a
    /// loop to keep the stack flat.
    private let needsLoop: Bool
    private let lock = Lock(Inner())

    init(jobs: [Job<Void>], controller: Job<Void>.Controller) {
        self.jobs = jobs
        self.controller = controller
        self.queue = controller.queue
        self.needsLoop = !(queue is any AsynchronousJobQueue)
    }

    func start() {
        guard !jobs.isEmpty else {
            controller.finish()
            return
        }
        controller.onCancel { [self] in cancel() }
        advance()
    }

    /// Starts the next step, or, when a loop is already starting steps on
    /// this run, tells it to go on.
    private func advance() {
        guard needsLoop else {
            perform(lock.withLock { nextStep(&$0) })
            return
        }
        var step = lock.withLock { inner -> Step in
            if inner.isLooping {
                inner.shouldContinue = true
                return .stop
            }
            inner.isLooping = true
            return nextStep(&inner)
        }
        while case .start = step {
            perform(step)
            step = lock.withLock { inner -> Step in
                guard inner.shouldContinue else {
                    inner.isLooping = false
                    return .stop
                }
                inner.shouldContinue = false
                return nextStep(&inner)
            }
        }
        perform(step)
    }

    private func perform(_ step: Step) {
        switch step {
        case .stop:
            break
        case .finish:
            controller.finish()
        case .start(let job, let child):
            child.start(job.body)
        }
    }

    /// Takes the next step, under the lock, for the loop that owns the run;
    /// the loop ends unless the step is `.start`.
    private func nextStep(_ inner: inout Inner) -> Step {
        guard !inner.isFinished else {
            inner.isLooping = false
            return .stop
        }
        guard inner.nextIndex < jobs.count else {
            inner.isFinished = true
            inner.isLooping = false
            inner.current = nil
            return .finish
        }
        let job = jobs[inner.nextIndex]
        inner.nextIndex += 1
        // Captures the run alone: no allocation for the closure.
        let child = JobState<Void>(queue: queue, hopsToQueue: false) { [self] outcome in
            stepCompleted(outcome)
        }
        inner.current = child
        return .start(job, child)
    }

    private func stepCompleted(_ outcome: Result<Void, any Error>) {
        switch outcome {
        case .success:
            advance()
        case .failure(let error):
            let isFirst = lock.withLock { inner -> Bool in
                defer {
                    inner.isFinished = true
                    inner.current = nil
                }
                return !inner.isFinished
            }
            if isFirst { controller.fail(with: error) }
        }
    }

    private func cancel() {
        let current = lock.withLock { inner -> JobState<Void>? in
            defer {
                inner.isFinished = true
                inner.current = nil
            }
            return inner.isFinished ? nil : inner.current
        }
        current?.cancel()
    }
}
