/// One performance of a sequence: runs its steps one at a time.
///
/// A single loop starts the steps. A step that completes while the loop is
/// still starting it (synchronously, on an inline queue) only marks that
/// the loop should go on, so the stack stays flat however long the
/// sequence.
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
        case stop
    }

    private let jobs: [Job<Void>]
    private let controller: Job<Void>.Controller
    private let lock = Lock(Inner())

    init(jobs: [Job<Void>], controller: Job<Void>.Controller) {
        self.jobs = jobs
        self.controller = controller
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
        let isOwner = lock.withLock { inner -> Bool in
            if inner.isLooping {
                inner.shouldContinue = true
                return false
            }
            inner.isLooping = true
            return true
        }
        guard isOwner else { return }
        while true {
            let step = lock.withLock { inner -> Step in
                guard !inner.isFinished else { return .stop }
                guard inner.nextIndex < jobs.count else {
                    inner.isFinished = true
                    inner.current = nil
                    return .finish
                }
                let job = jobs[inner.nextIndex]
                inner.nextIndex += 1
                let child = JobState<Void>(queue: controller.queue, hopsToQueue: false) { [self] outcome in
                    stepCompleted(outcome)
                }
                inner.current = child
                return .start(job, child)
            }
            switch step {
            case .stop:
                lock.withLock { $0.isLooping = false }
                return
            case .finish:
                lock.withLock { $0.isLooping = false }
                controller.finish()
                return
            case .start(let job, let child):
                child.start(job.body)
            }
            let goesOn = lock.withLock { inner -> Bool in
                if inner.shouldContinue {
                    inner.shouldContinue = false
                    return true
                }
                inner.isLooping = false
                return false
            }
            guard goesOn else { return }
        }
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
