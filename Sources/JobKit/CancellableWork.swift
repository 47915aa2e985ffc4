import Dispatch

/// Work that can be cancelled: what a callback API returns alongside its
/// completion handler, such as a `URLSessionTask` or a `DispatchWorkItem`.
///
/// `Job.bridgingCancellable(_:)` keeps the object the API returns and
/// calls ``cancel()`` on it when the job is cancelled. `DispatchWorkItem`,
/// `Task`, ``JobHandle`` and ``ScheduledTask`` conform. To bridge an API
/// that returns another type, conform it in one line:
///
/// ```swift
/// extension ImageRequest: CancellableWork {}
/// ```
///
/// JobKit does not import Foundation, so `URLSessionTask` does not conform
/// here (the `Uploads` module conforms it); in an app that doesn't use
/// `Uploads`, write `extension URLSessionTask: @retroactive CancellableWork {}`.
///
/// The protocol does not require `Sendable`, so that thread-safe classes
/// that are not annotated (`DispatchWorkItem` on Linux) can conform; but
/// ``cancel()`` is called from whichever thread cancels the job, so it must
/// be safe to call from any thread, as the cancel methods of URLSession and
/// Dispatch are. JobKit calls nothing else on the object.
public protocol CancellableWork {
    /// Cancels the work. Called at most once by JobKit, from any thread.
    func cancel()
}

extension DispatchWorkItem: CancellableWork {}

extension Task: CancellableWork {}

extension JobHandle: CancellableWork {}

extension ScheduledTask: CancellableWork {}
