import Foundation
import JobKit

/// How an outbox carries out what its machine (``OutboxStateMachine``)
/// decides: after the lock, holding no policy of its own.
extension Outbox {
    /// Makes `change` on the machine; what it leaves to write or tell is
    /// acted on after the lock.
    func changing<Value: Sendable>(_ change: (inout OutboxStateMachine) -> Value) -> Value {
        machine.update { machine in
            let value = change(&machine)
            return (value, actOn: machine.hasEffects)
        }
    }

    /// Makes `change` on the machine, which may refuse it.
    func changing<Value: Sendable>(
        _ change: (inout OutboxStateMachine) throws(OutboxError) -> Value
    ) throws(OutboxError) -> Value {
        try changing { machine in Result { () throws(OutboxError) in try change(&machine) } }.get()
    }

    /// Carries out `actions`, in their order.
    func perform(_ actions: OutboxStateMachine.Actions) {
        for cancel in actions.cancels { cancel() }
        for observer in actions.finishes { observer.finish() }
        for media in actions.discards {
            uploader.discardResumableUpload(of: media).perform(on: queue) { _ in }
        }
        for timer in actions.timers { arm(timer) }
        for request in actions.requests { request() }
        for start in actions.starts { launch(start) }
        switch actions.pump {
        case .scheduled?: machine.afterActions { [self] in schedulePump() }
        case .now?: machine.afterActions { [self] in perform(changing { $0.pump() }) }
        case nil: break
        }
    }

    /// Starts the uploads that may go from the queue: so the posts added
    /// in one go start in priority order, whatever order they were added
    /// in.
    private func schedulePump() {
        guard changing({ $0.schedulesPump() }) else { return }
        // Weak: an outbox the app let go of, with nothing in flight, goes
        // (and releases its folder) without waiting for this.
        queue.enqueue { [weak self] in
            guard let self else { return }
            perform(changing { $0.scheduledPumpRan() })
        }
    }

    /// Arms `timer` on the queue, and hands it to the machine.
    private func arm(_ timer: OutboxStateMachine.Timer) {
        // Weak: a timer does not keep an outbox the app let go of.
        let delay = timer.delay(options)
        let work = queue.enqueue(after: delay) { [weak self] in
            guard let self else { return }
            perform(changing { $0.fired(timer) })
        }
        if !changing({ $0.armed(timer, lasting: delay, until: work) }) { work.cancel() }
    }

    /// Performs one upload the machine started.
    private func launch(_ start: OutboxStateMachine.Start) {
        let media: Media
        do {
            media = try upload(for: start)
        } catch {
            finish(start, .failure(error))
            return
        }
        var attempts = options.publishing.attempts(for: media.destination)
        // Pausing and closing keep what is stored of a multipart upload.
        attempts.keepsStoredPartsWhenCancelled = true
        // A run before this one may have stored it and been killed before
        // recording it: the storages that can tell are asked first.
        attempts.checksStorageFirst = start.mayBeStored
        attempts.gate = OutboxGate(outbox: self)
        attempts.carried(by: transport)
        attempts.uploadName = start.uploadName
        let uploader = start.isDocument ? options.publishing.documentUploader ?? uploader : uploader
        let handle = uploader.upload(media, attempts: attempts) { [machine] progress in
            machine.update { machine in machine.progressed(start, bytesSent: progress.bytesSent) }
        }
        .perform(on: queue) { [self] outcome in finish(start, outcome) }
        if !changing({ $0.attach(handle, to: start) }) {
            handle.cancel()
        }
    }

    /// What `start` sends: a medium from its file, or the post's document
    /// built from the receipts of its media.
    private func upload(for start: OutboxStateMachine.Start) throws -> Media {
        let record = start.record
        guard start.isDocument else { return record.upload(start.index) }
        let receipts = record.media.compactMap { $0.receipt?.receipt }
        var document = try options.publishing.document(of: record.post, receipts: receipts)
        document.idempotencyKey = record.idempotencyKey
        let size = (try? document.byteCount()) ?? 0
        changing { $0.built(start, size: size) }
        return document
    }

    private func finish(_ start: OutboxStateMachine.Start, _ outcome: Result<UploadReceipt, any Error>) {
        perform(changing { $0.finished(start, with: outcome) })
        settledInBackgroundTransport(start)
    }

    /// Writes the records, removes the copies of published posts, then
    /// tells the observers: on one thread at a time, outside the lock.
    static func carryOut(
        _ effects: OutboxStateMachine.Effects,
        journal: OutboxJournal,
        machine: Handoff<OutboxStateMachine, OutboxStateMachine.Effects>
    ) {
        var failed: [(URL, OutboxError)] = []
        var written: [OutboxRecord] = []
        for record in effects.writes {
            do {
                try journal.save(record)
                written.append(record)
            } catch {
                failed.append((record.destination, error))
            }
        }
        for record in effects.removedCopies where !failed.contains(where: { $0.0 == record.destination }) {
            journal.removeCopies(of: record)
        }
        for record in effects.removals { journal.remove(record) }
        // Kept as well as it can be: a streak lost starts the next hold
        // over, and loses no post.
        if let streaks = effects.streaks { try? journal.save(streaks) }
        // A list is told once the writes it rests on are made. When one
        // failed, the machine's next list, which shows that post failed,
        // is told instead: an app may delete its files on `.published`.
        if failed.isEmpty, let posts = effects.snapshot {
            let snapshot = OutboxStateMachine.entries(posts)
            for observer in effects.observers { observer.yield(snapshot) }
        }
        guard !written.isEmpty || !failed.isEmpty else { return }
        machine.update { machine in
            machine.wrote(written, failed: failed)
            return !failed.isEmpty
        }
    }
}
