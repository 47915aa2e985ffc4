// MARK: - repeated

extension Job {
    /// A job that performs this job again and again while `condition`
    /// holds for its value, and finishes with the first value for which it
    /// does not: a poll.
    ///
    /// ```swift
    /// let ready = fetchStatus().repeated(while: { !$0.isReady }, delay: .fixed(.seconds(2)))
    /// ```
    ///
    /// Each step is a fresh performance of this job, started once the one
    /// before it completed and `delay` passed. Without a delay, a step that
    /// finishes in the queue's turn that ran it is followed in that turn,
    /// up to 256 steps in a row, as a ``then(_:)`` loop is. The wait runs on the job's
    /// queue, so a `TestQueue` drives it in virtual time. A step's failure
    /// fails the loop with that error: put a ``retry(attempts:delay:while:)``
    /// on this job to try a step again, and a ``timeout(after:)`` on the
    /// loop to bound how long it polls. Cancelling the loop cancels the
    /// step running now, or the wait for the next one.
    ///
    /// However many steps it takes, the loop holds one step at a time, its
    /// stack stays flat, and its snapshots show the step it is on ("loop,
    /// step 502") and the job running it.
    ///
    /// - Parameters:
    ///   - condition: Whether to perform this job again after a step that
    ///     finished with the given value. Called on the thread the step
    ///     completed on.
    ///   - delay: The wait before each step after the first: before step
    ///     number `n + 1`, `delay.delay(beforeRetry: n)`. No wait by
    ///     default.
    @inlinable
    public func repeated(
        while condition: @escaping @Sendable (Success) -> Bool,
        delay: RetryDelay = .none
    ) -> Job<Success> {
        repeated(while: condition, delay: delay, making: JobState<Success>.makeChildToken)
    }

    /// ``repeated(while:delay:)``, whose steps' states and tokens
    /// `makeToken` makes, where `Success` is known.
    @usableFromInline
    func repeated(
        while condition: @escaping @Sendable (Success) -> Bool,
        delay: RetryDelay,
        making makeToken: @escaping JobState<Success>.MakeToken
    ) -> Job<Success> {
        Job { controller in
            LoopRun(controller: controller, delay: delay, job: { _ in self }, making: makeToken, from: ()) {
                run, value in
                if condition(value) {
                    run.again(from: ())
                } else {
                    run.controller.finish(with: value)
                }
            }
            .start()
        }
    }
}

// MARK: - collectPages

/// What one step of ``Job/collectPages(from:_:)`` found: a page of
/// elements, and whether another page follows it.
public enum JobPage<Element: Sendable, Cursor: Sendable>: Sendable {
    /// A page of `elements`, and the cursor to fetch the page after it with.
    case more([Element], next: Cursor)
    /// The last page, of `elements`.
    case last([Element])
}

extension Job {
    /// A job that fetches page after page, from the cursor `first`, and
    /// finishes with the elements of every page, in order, once a page says
    /// it is the last.
    ///
    /// `page` builds the job that fetches the page at a cursor, and that
    /// job says what comes next:
    ///
    /// ```swift
    /// let everyone: Job<[Account]> = .collectPages(from: nil as String?) { cursor in
    ///     fetchFollowers(after: cursor).map { batch in
    ///         if let next = batch.next { .more(batch.accounts, next: next) } else { .last(batch.accounts) }
    ///     }
    /// }
    /// ```
    ///
    /// Each page is fetched once the one before it completed, on the job's
    /// queue, and the elements are kept until the last page, then handed
    /// over at once. A page's failure fails the whole with that error, and
    /// a cancel cancels the page being fetched. With an optional cursor,
    /// `nil` is the first page's: a page that has none after it is
    /// `.last`, not `.more(elements, next: nil)`, which starts over.
    /// However many pages there are, the job's stack stays flat, and its
    /// snapshots show the page it is on ("loop, step 12") and the job
    /// fetching it.
    ///
    /// - Parameters:
    ///   - first: The cursor of the first page: a page number, a token, or
    ///     `nil` for an API whose first request has none.
    ///   - page: The job that fetches the page at a cursor. Called on the
    ///     job's queue.
    /// - Returns: A job whose value holds the elements of every page.
    @inlinable
    public static func collectPages<Element, Cursor: Sendable>(
        from first: Cursor,
        _ page: @escaping @Sendable (Cursor) -> Job<JobPage<Element, Cursor>>
    ) -> Job<[Element]> where Success == [Element] {
        collectPages(from: first, page, making: JobState<JobPage<Element, Cursor>>.makeChildToken)
    }

    /// ``collectPages(from:_:)``, whose pages' states and tokens
    /// `makeToken` makes, where their type is known.
    @usableFromInline
    static func collectPages<Element, Cursor: Sendable>(
        from first: Cursor,
        _ page: @escaping @Sendable (Cursor) -> Job<JobPage<Element, Cursor>>,
        making makeToken: @escaping JobState<JobPage<Element, Cursor>>.MakeToken
    ) -> Job<[Element]> where Success == [Element] {
        Job<[Element]> { controller in
            let collected = Collected<Element>()
            LoopRun(controller: controller, delay: .none, job: page, making: makeToken, from: first) {
                run, found in
                switch found {
                case .more(let elements, let next):
                    collected.append(elements)
                    run.again(from: next)
                case .last(let elements):
                    collected.append(elements)
                    run.controller.finish(with: collected.take())
                }
            }
            .start()
        }
    }
}

/// The elements of a ``Job/collectPages(from:_:)``'s pages so far, added
/// in place (a value carried from page to page would be copied each time).
private final class Collected<Element: Sendable>: Sendable {
    private let elements = Lock<[Element]>([])

    func append(_ page: [Element]) {
        elements.withLock { $0.append(contentsOf: page) }
    }

    /// The elements, leaving none here.
    func take() -> [Element] {
        elements.withLock { elements in
            defer { elements = [] }
            return elements
        }
    }
}

// MARK: - The run

/// One performance of a loop: its steps, one after another, each a child
/// of the loop's job, and the wait between them.
///
/// A step's outcome never goes back through the steps before it: the next
/// step starts as the job's next step (``TypedToken/runStep(_:)``: after
/// the body that ran the step before returns, in the same turn of the
/// queue, or in a turn of its own), or after its delay, so the stack stays
/// flat and only the step running now is held. A ``TimerSlot`` holds the wait, cancelled with the job, and shows
/// the step number in snapshots.
///
/// A class, and `next` decides by calling it back rather than returning a
/// value: in generic code, a value of a type of its own (a struct, an enum
/// of what follows) costs a look-up of that type at each step. The step
/// number and the next step's input are kept here, so that the closures a
/// step makes capture the run alone, which allocates nothing.
///
/// Unchecked: ``number`` and ``nextInput`` are written by one step at a
/// time. A step writes them as it starts and as it ends, and the next step
/// starts only after that, handed over on this thread, through the queue
/// or by its timer; the handler of a step's job reads the number that
/// step wrote before it started the job, and so does ``again(from:)``,
/// which that handler calls.
private final class LoopRun<Input: Sendable, Step: Sendable, Success: Sendable>: @unchecked Sendable {
    let controller: Job<Success>.Controller
    let delay: RetryDelay
    /// The job of a step, from its input.
    let job: @Sendable (Input) -> Job<Step>
    /// Decides what follows the step that finished with a value:
    /// ``again(from:)``, or the controller's `finish`.
    let next: @Sendable (_ run: LoopRun, Step) -> Void
    /// Makes each step's state and token (``JobState/MakeToken``).
    let makeToken: JobState<Step>.MakeToken
    /// The wait before the next step, closed when the job is cancelled.
    let slot = TimerSlot(.loop)
    /// The number of the step running now, or that ran last. Unchecked
    /// for exclusivity, as the next: one step at a time touches them.
    @exclusivity(unchecked) private var number = 0
    /// The input of the next step: the loop's first, then the one the step
    /// that ran last gave. Not optional: in generic code, an optional of
    /// it costs a look-up of its type at each step.
    @exclusivity(unchecked) private var nextInput: Input

    init(
        controller: Job<Success>.Controller,
        delay: RetryDelay,
        job: @escaping @Sendable (Input) -> Job<Step>,
        making makeToken: @escaping JobState<Step>.MakeToken,
        from first: Input,
        next: @escaping @Sendable (_ run: LoopRun, Step) -> Void
    ) {
        self.nextInput = first
        self.controller = controller
        self.delay = delay
        self.job = job
        self.makeToken = makeToken
        self.next = next
    }

    /// Starts the loop: its first step.
    func start() {
        controller.token.attach(slot)
        step()
    }

    /// Starts the next step, from its input, here: on the job's queue.
    private func step() {
        guard !controller.isCompleted else { return }
        number += 1
        slot.begin(number)
        controller.performChildHere(job(nextInput), making: makeToken) { [self] outcome in
            switch outcome {
            case .failure(let error):
                controller.fail(with: error)
            case .success(let value):
                // Cancelled as the step finished: nothing follows.
                guard !controller.isCompleted else { return }
                next(self, value)
            }
        }
    }

    /// The next step follows the one that ran last, from `input`, after
    /// its delay.
    func again(from input: Input) {
        let wait = max(delay.delay(beforeRetry: number), .zero)
        nextInput = input
        if wait == .zero {
            controller.token.runStep { [self] in step() }
        } else {
            slot.wait(before: number + 1, delay: wait, after: nil, on: controller.queue) { [self] in step() }
        }
    }
}
