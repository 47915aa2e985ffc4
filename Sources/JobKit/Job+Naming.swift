extension Job {
    /// This job under `name`: its snapshots and stall reports show it so.
    ///
    /// Naming a job changes nothing else about it. Unnamed jobs show as
    /// "job", and combinators as what they are ("group 7/9", "sequence
    /// 2/3", "timeout 30 s", "retry 2/3"), so name the jobs a reader of a
    /// stall report must tell apart:
    ///
    /// ```swift
    /// let uploads = photos.map { photo in upload(photo).named("upload \(photo.name)") }
    /// let publish = Job.group(uploads, maxConcurrent: 3).named("publish")
    /// ```
    ///
    /// The name shows once the job has started: a job still waiting for
    /// its queue shows as "job (waiting to start)". If a job is named
    /// twice, the outer name wins.
    public func named(_ name: String) -> Job {
        let body = self.body
        return Job { controller in
            controller.token.attach(.name(name))
            Self.run(body, with: controller)
        }
    }

    /// This job under `name`, described by `detail` in its snapshots and
    /// stall reports: "upload video-2.mp4 (running, 4.2 of 18 MB sent)".
    ///
    /// Use it to describe a job from outside, with state its caller keeps
    /// (here, the bytes its progress handler saw):
    ///
    /// ```swift
    /// let meter = ByteMeter()
    /// let upload = send(clip, progress: meter.record)
    ///     .named("upload surf.mov") { "\(meter.sent) of \(meter.total) bytes sent" }
    /// ```
    ///
    /// `detail` is asked for each time a snapshot of the job is taken,
    /// on the thread taking it, while the job runs. A job's own
    /// ``Job/Controller/onDescribe(_:)`` replaces it.
    public func named(_ name: String, detail: @escaping @Sendable () -> String) -> Job {
        let body = self.body
        return Job { controller in
            controller.token.attach(.name(name))
            controller.token.attach(.detail(detail))
            Self.run(body, with: controller)
        }
    }
}

extension Job {
    /// Runs a named job's `body` one level deeper: the job may be named
    /// jobs a million deep (``Trampoline/Level``).
    @inline(__always)
    fileprivate static func run(_ body: @escaping @Sendable (Controller) -> Void, with controller: Controller) {
        if let level = Trampoline.Level.enter() {
            body(controller)
            level.leave()
        } else {
            // Cancelled meanwhile: the body never starts.
            Trampoline.hold { if !controller.isCompleted { body(controller) } }
        }
    }
}

extension Job.Controller {
    /// Registers `describe`, asked for a few words about the job's
    /// progress each time a snapshot of it is taken: "0 of 18 MB sent".
    ///
    /// ```swift
    /// controller.onDescribe { "\(progress.sent) of \(progress.total) bytes sent" }
    /// ```
    ///
    /// `describe` runs on the thread taking the snapshot, while the job
    /// runs; it is released when the job completes. A later call replaces
    /// it.
    public func onDescribe(_ describe: @escaping @Sendable () -> String) {
        token.attach(.detail(describe))
    }
}
