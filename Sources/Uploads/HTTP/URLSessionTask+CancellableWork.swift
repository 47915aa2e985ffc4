import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A `URLSessionTask` can be returned from the start closure of
/// `Job.bridgingCancellable(_:)`: cancelling the job cancels the task.
///
/// The conformance lives here, beside Foundation, because the JobKit core
/// imports only Dispatch and Synchronization (no FoundationNetworking, and
/// so no libcurl, in every binary that uses JobKit). `URLSessionTask.cancel()`
/// is safe to call from any thread, as ``CancellableWork`` requires.
extension URLSessionTask: CancellableWork {}
