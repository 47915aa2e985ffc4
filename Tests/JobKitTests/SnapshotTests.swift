import Dispatch
import JobKit
import JobKitTesting
import TestSupport
import Testing

@Suite("Snapshots and stall reports", .timeLimit(.minutes(1)))
struct SnapshotTests {
    @Test func anUnnamedJobIsWaitingToStartUntilItsQueueRunsIt() throws {
        let queue = TestQueue()
        let manual = ManualJob<Int>()
        let handle = manual.job.perform(on: queue) { _ in }
        let before = handle.snapshot()
        #expect(before.title == "job")
        #expect(before.name == nil)
        #expect("\(before.state)" == "waiting to start")
        try queue.run()
        #expect("\(handle.snapshot().state)" == "running")
        manual.finish(with: 1)
        #expect("\(handle.snapshot().state)" == "finished")
    }

    @Test func aNamedJobShowsItsNameAndWhatItSaysOfItsProgress() throws {
        let queue = TestQueue()
        let sent = LockedValue(0)
        let upload = Job<Void> { controller in
            controller.onDescribe { "\(sent.value) of 18 MB sent" }
            controller.onCancel { withExtendedLifetime(controller) {} }
        }
        let handle = upload.named("upload video-2").perform(on: queue) { _ in }
        try queue.run()
        #expect(handle.snapshot().line == "upload video-2 (running, 0 of 18 MB sent)")
        sent.setValue(6)
        #expect(handle.snapshot().detail == "6 of 18 MB sent")
        handle.cancel()
        let cancelled = handle.snapshot()
        #expect(cancelled.line == "upload video-2 (cancelled)")
        #expect(handle.stallReport() == nil)
    }

    @Test func theOuterNameWinsAndALaterDescriptionReplacesTheEarlierOne() throws {
        let queue = TestQueue()
        let job = Job<Void> { controller in
            controller.onDescribe { "first" }
            controller.onDescribe { "second" }
            controller.onCancel { withExtendedLifetime(controller) {} }
        }
        let handle = job.named("inner").named("outer").perform(on: queue) { _ in }
        try queue.run()
        #expect(handle.snapshot().line == "outer (running, second)")
        handle.cancel()
    }

    @Test func aNamedJobWaitingOnOneAnonymousJobIsTheLeafItself() throws {
        let queue = TestQueue()
        let request = ManualJob<Int>()
        let upload = Job<Int> { controller in
            controller.perform(request.job) { controller.complete(with: $0) }
        }
        let handle = upload.named("upload photo-1", detail: { "1 of 2 kB sent" }).perform(on: queue) { _ in }
        try queue.run()
        #expect(handle.snapshot().children.isEmpty)
        #expect(handle.snapshot().pendingLeaves.map { $0.map(\.title) } == [["upload photo-1"]])

        // A child that says something about itself stays.
        let named = Job<Int> { controller in
            controller.perform(request.job.named("PUT photo-1")) { controller.complete(with: $0) }
        }
        let namedHandle = named.named("upload photo-1").perform(on: queue) { _ in }
        try queue.run()
        #expect(namedHandle.snapshot().children.map(\.line) == ["PUT photo-1 (running)"])
        handle.cancel()
        namedHandle.cancel()
    }

    /// A completed job is stuck nowhere: it has no pending leaves, whether
    /// it finished, failed or was cancelled, a single job, a group or a
    /// sequence.
    @Test func aCompletedJobHasNoPendingLeaves() throws {
        let queue = TestQueue()
        let running = ManualJob<Int>()
        let handles = [
            Job.succeeded(1).named("one").perform(on: queue) { _ in },
            Job<Int>.failed(TestError(id: 7)).perform(on: queue) { _ in },
            Job.group([.failed(TestError(id: 8)), Job<Int>.never.map { _ in }]).perform(on: queue) { _ in },
            Job.sequence([.succeeded(()), running.job.map { _ in }]).named("cancelled").perform(on: queue) { _ in },
        ]
        try queue.run()
        handles[3].cancel()
        try queue.run()
        for handle in handles {
            let snapshot = handle.snapshot()
            #expect(!snapshot.state.isPending, "\(snapshot)")
            #expect(snapshot.pendingLeaves.isEmpty, "\(snapshot)")
            #expect(handle.stallReport() == nil)
        }
    }

    @Test func aCompletedJobKeepsItsNameAndHowItCompleted() throws {
        let queue = TestQueue()
        let finished = Job.succeeded(1).named("one").perform(on: queue) { _ in }
        let failed = Job<Int>.failed(TestError(id: 7)).named("seven").perform(on: queue) { _ in }
        let unnamedFailure = Job<Int>.failed(TestError(id: 8)).perform(on: queue) { _ in }
        try queue.run()
        #expect(finished.snapshot().line == "one (finished)")
        #expect(failed.snapshot().line == "seven (failed: TestError(id: 7))")
        guard case .failed(let error) = unnamedFailure.snapshot().state else {
            Issue.record("expected a failure, got \(unnamedFailure.snapshot().state)")
            return
        }
        #expect(error as? TestError == TestError(id: 8))
    }

    @Test func aFailedJobKeepsItsFailureThoughItStartsAChildAfterwards() throws {
        let kept = LockedValue<Job<Void>.Controller?>(nil)
        let handle = Job<Void> { kept.setValue($0) }.named("late").perform(on: ImmediateQueue()) { _ in }
        let controller = try #require(kept.value)
        controller.fail(with: TestError(id: 3))
        // The child runs and finishes; its detaching forgets only its own.
        let childFinished = LockedValue(false)
        controller.perform(Job<Void> { $0.finish() }) { _ in childFinished.setValue(true) }
        #expect(childFinished.value)
        #expect(handle.snapshot().line == "late (failed: TestError(id: 3))")
    }

    @Test func aGroupCountsItsChildrenAndListsTheRunningOnesInInputOrder() throws {
        let queue = TestQueue()
        let children = (0..<5).map { _ in ManualJob<Void>() }
        let jobs = children.enumerated().map { index, child in child.job.named("upload \(index)") }
        let handle = Job.group(jobs, maxConcurrent: 3).named("media").perform(on: queue) { _ in }
        try queue.run()
        children[1].finish()
        try queue.run()
        // 1 done; 0, 2 and 3 running; 4 not started.
        let snapshot = handle.snapshot()
        #expect(snapshot.kind == .group(done: 1, running: 3, count: 5))
        #expect(snapshot.title == "media: group 1/5")
        #expect(snapshot.children.map(\.title) == ["upload 0", "upload 2", "upload 3"])
        #expect(snapshot.children.allSatisfy { "\($0.state)" == "running" })
    }

    @Test func aSequenceShowsTheStepItRuns() throws {
        let queue = TestQueue()
        let steps = (0..<3).map { _ in ManualJob<Void>() }
        let handle = Job.sequence(steps.enumerated().map { $1.job.named("step \($0)") }).perform(on: queue) { _ in }
        try queue.run()
        steps[0].finish()
        try queue.run()
        let snapshot = handle.snapshot()
        #expect(snapshot.kind == .sequence(step: 2, count: 3))
        #expect(snapshot.children.map(\.line) == ["step 1 (running)"])
    }

    @Test func aTimeoutShowsItsDurationAndItsJobThenTimesOut() throws {
        let queue = TestQueue()
        let handle = Job<Int>.never.named("fetch").timeout(after: .seconds(30)).perform(on: queue) { _ in }
        try queue.run()
        let snapshot = handle.snapshot()
        #expect(snapshot.title == "timeout 30 s")
        #expect(snapshot.children.map(\.line) == ["fetch (running)"])
        try queue.advance(by: .seconds(30))
        // Completed, it no longer holds its timer: it shows as a job.
        #expect(handle.snapshot().line == "job (failed: the job timed out and was cancelled)")
    }

    @Test(
        arguments: [
            (Duration.seconds(30), "timeout 30 s"),
            (.milliseconds(250), "timeout 250 ms"),
            (.milliseconds(1_500), "timeout 1.5 s"),
            (.seconds(0.177_705_880_33), "timeout 178 ms"),
            (.seconds(2.34), "timeout 2.3 s"),
            (.seconds(2.96), "timeout 3 s"),
            (.seconds(0.999_7), "timeout 1 s"),
        ])
    func aDurationThatIsNotRoundIsRoundedForReading(duration: Duration, title: String) throws {
        let queue = TestQueue()
        let handle = Job<Int>.never.timeout(after: duration).perform(on: queue) { _ in }
        try queue.run()
        #expect(handle.snapshot().title == title)
        handle.cancel()
    }

    @Test func aRetryWaitingForItsNextAttemptSaysHowLongAndWhy() throws {
        let queue = TestQueue()
        let attempts = ManualJob<Int>()
        let handle = attempts.job.named("fetch").retry(attempts: 3, delay: .fixed(.seconds(2)))
            .perform(on: queue) { _ in }
        try queue.run()
        #expect(handle.snapshot().kind == .retry(attempt: 1, attempts: 3))
        #expect(handle.snapshot().children.map(\.line) == ["fetch (running)"])
        attempts.fail(with: TestError(id: 1))
        try queue.run()
        let waiting = handle.snapshot()
        #expect(waiting.kind == .retry(attempt: 2, attempts: 3))
        #expect(waiting.children.isEmpty)
        #expect("\(waiting.state)" == "waiting 2 s before attempt 2, after: TestError(id: 1)")
        #expect(waiting.pendingLeaves.map { $0.map(\.title) } == [["retry 2/3"]])
        try queue.advance(by: .seconds(2))
        let second = handle.snapshot()
        #expect("\(second.state)" == "running")
        #expect(second.children.map(\.line) == ["fetch (running)"])
    }

    @Test func jobsThatOnlyWrapAChildShowAsThatChild() throws {
        let queue = TestQueue()
        let first = ManualJob<Int>()
        let second = ManualJob<Int>()
        let chained = first.job.named("first").map { $0 + 1 }.then { _ in second.job.named("second") }
            .mapError { $0 }.named("chain")
        let handle = chained.perform(on: queue) { _ in }
        try queue.run()
        #expect(handle.snapshot().children.map(\.line) == ["first (running)"])
        first.finish(with: 1)
        try queue.run()
        #expect(handle.snapshot().children.map(\.line) == ["second (running)"])
        // Unnamed at the top too: the snapshot is the job it runs.
        let unnamed = Job<Int>.never.named("inner").map { $0 }.perform(on: queue) { _ in }
        try queue.run()
        #expect(unnamed.snapshot().line == "inner (running)")
        unnamed.cancel()
    }

    @Test func theStallReportGivesThePathToEachPendingLeafAndMarksItInTheTree() throws {
        let queue = TestQueue()
        let video = Job<Void> { controller in
            controller.onDescribe { "0 of 18 MB sent" }
            controller.onCancel { withExtendedLifetime(controller) {} }
        }
        let media: [Job<Void>] = [
            Job.succeeded.named("upload photo-1"),
            video.named("upload video-2"),
            Job.succeeded.named("upload photo-3"),
        ]
        let publish = Job.sequence([.group(media), Job.succeeded.named("upload post")]).named("publish")
        let handle = publish.perform(on: queue) { _ in }
        try queue.run()
        #expect(
            handle.stallReport() == """
                1 job has not completed:
                  publish: sequence 1/2 ▸ group 2/3 ▸ upload video-2 (running, 0 of 18 MB sent)

                publish: sequence 1/2 (running)
                └─ group 2/3 (running)
                   └─ upload video-2 (running, 0 of 18 MB sent)  ◀
                """
        )
        handle.cancel()
        #expect(handle.stallReport() == nil)
        try queue.run()
        #expect(queue.pendingCount == 0)
    }

    @Test func aTreeOfManyChildrenListsTwentyOfThem() throws {
        let queue = TestQueue()
        let handle = Job.group((0..<50).map { Job<Void>.never.named("child \($0)") }).perform(on: queue) { _ in }
        try queue.run()
        let snapshot = handle.snapshot()
        #expect(snapshot.children.count == 50)
        let lines = "\(snapshot)".split(separator: "\n")
        #expect(lines.count == 1 + 20 + 1)
        #expect(lines.last == "└─ … and 30 more")
        let report = try #require(handle.stallReport())
        #expect(report.hasPrefix("50 jobs have not completed:\n"))
        #expect(report.contains("  … and 30 more\n"))
        handle.cancel()
    }

    @Test func aDescriptionIsReleasedWhenItsJobCompletes() throws {
        let queue = TestQueue()
        let controllers = LockedValue<[Job<Void>.Controller]>([])
        weak var weakTracked: Tracked?
        do {
            let tracked = Tracked()
            weakTracked = tracked
            Job<Void> { controller in
                controller.onDescribe { withExtendedLifetime(tracked) { "tracked" } }
                controllers.withValue { $0.append(controller) }
            }
            .perform(on: queue) { _ in }
        }
        try queue.run()
        #expect(weakTracked != nil)
        controllers.value[0].finish()
        #expect(weakTracked == nil)
    }

    @Test(.onThreadOfItsOwn) func snapshotsTakenFromAnotherThreadWhileTheTreeRunsAreConsistent() async throws {
        var groupSnapshots = 0
        // A fifth as many rounds under Thread Sanitizer: this thread takes
        // snapshots without a pause, a core's worth of work, and twenty
        // rounds took the whole minute of the suite's limit there.
        for _ in 0..<(isThreadSanitized ? 4 : 20) {
            let count = 2000
            let completed = DispatchSemaphore(value: 0)
            let children = (0..<count).map { index in
                Job<Void> { controller in DispatchQueue.global().async { controller.finish() } }.named("child \(index)")
            }
            let tree = Job.sequence([
                Job.group(children, maxConcurrent: 8).retry(attempts: 2).timeout(after: .seconds(600)),
                .succeeded,
            ])
            let handle = tree.named("top").perform(on: DispatchQueue.global()) { _ in completed.signal() }
            var lastDone = 0
            var snapshots = 0
            while !handle.isCompleted && snapshots < 100_000 {
                let snapshot = handle.snapshot()
                snapshots += 1
                // The name is attached by the job's body, as it starts.
                #expect(snapshot.name == "top" || (snapshot.name == nil && snapshot.state.isPending))
                // top ▸ timeout ▸ retry ▸ group, while the first step runs.
                guard let timeout = snapshot.children.first, let retry = timeout.children.first,
                    let group = retry.children.first, case .group(let done, let running, let total) = group.kind
                else { continue }
                groupSnapshots += 1
                #expect(timeout.kind == .timeout(.seconds(600)))
                #expect(retry.kind == .retry(attempt: 1, attempts: 2))
                #expect(total == count && running <= 8 && done + running <= count)
                #expect(done >= lastDone)
                lastDone = done
                #expect(group.children.count == running)
                for child in group.children {
                    // Unnamed until its body has attached its name; perhaps
                    // finished, but not yet out of the group.
                    #expect(child.title.hasPrefix("child ") || child.title == "job")
                    #expect(child.state.isPending || "\(child.state)" == "finished")
                }
            }
            #expect(await completed.signalled(within: 30))
            #expect(handle.snapshot().line == "top (finished)")
        }
        #expect(groupSnapshots > 0)
    }

    // MARK: Jobs nested deep

    /// The tree of a job nested `depth` timeouts deep, on a `TestQueue`,
    /// one line each, and its lines.
    private func nestedTimeouts(_ depth: Int) throws -> [Substring] {
        var job = Job<Int>.never
        for _ in 0..<depth { job = job.timeout(after: .seconds(3_600)) }
        let queue = TestQueue()
        let handle = job.perform(on: queue) { _ in }
        try queue.run()
        defer { handle.cancel() }
        return handle.snapshot().description.split(separator: "\n")
    }

    @Test func aTreeAHundredLevelsDeepShowsWhole() throws {
        let lines = try nestedTimeouts(120)
        #expect(lines.count == 121)
        #expect(lines.dropLast().allSatisfy { $0.hasSuffix("timeout 3600 s (running)") })
        #expect(lines.last?.hasSuffix("└─ job (running)") == true)
    }

    @Test func aDeeperTreeShowsItsFirstLevelsTheLevelsLeftOutAndItsLast() throws {
        let lines = try nestedTimeouts(1_000)
        let gaps = lines.enumerated().filter { $0.element.contains("levels not shown") }
        let gap = try #require(gaps.first)
        #expect(gaps.count == 1)
        #expect(gap.element.hasSuffix("└─ … 891 levels not shown (running)"))
        // Every level is on a line, or counted on the gap's.
        #expect(lines.count - 1 + 891 == 1_001)
        #expect(gap.offset > 90)
        #expect(lines.last?.hasSuffix("└─ job (running)") == true)
    }

    @Test func aDeepChainOfJobsThatShowAsTheirChildShowsAsTheJobItWaitsOn() throws {
        var job = Job<Int>.never.named("leaf")
        for _ in 0..<1_000 { job = job.map { $0 + 1 } }
        let queue = TestQueue()
        let handle = job.perform(on: queue) { _ in }
        try queue.run()
        #expect(handle.snapshot().description == "leaf (running)")
        handle.cancel()
    }

    @Test func aJobWaitedOnAmongTheLevelsLeftOutStillShows() throws {
        var job = Job<Int>.never.named("deep")
        for level in 0..<1_000 {
            job = job.timeout(after: .seconds(3_600))
            if level == 500 {
                job = Job.zip(job, Job<Int>.never.named("beside")).map { $0.0 }
            }
        }
        let queue = TestQueue()
        let handle = job.perform(on: queue) { _ in }
        try queue.run()
        let report = try #require(handle.stallReport()).split(separator: "\n")
        handle.cancel()
        #expect(report.first == "2 jobs have not completed:")
        #expect(report.contains { $0.hasSuffix("levels not shown ▸ beside (running)") })
        #expect(report.contains { $0.hasSuffix("timeout 3600 s ▸ deep (running)") })
        #expect(report.filter { $0.hasSuffix("◀") }.count == 2)
    }
}
