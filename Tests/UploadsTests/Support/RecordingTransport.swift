import Foundation
import JobKit
import JobKitTesting

@testable import Uploads

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// A transport that sends each request through an in-process one of its
/// own and records it as it goes: what an `Outbox` given it sends.
final class RecordingTransport: HTTPTransport {
    /// One request, as it was handed to the transport.
    struct Sent: Sendable, Hashable, CustomStringConvertible {
        var method: String
        var path: String

        var description: String { "\(method) \(path)" }
    }

    private let transport = InProcessTransport(configuration: .ephemeral)
    private let log = LockedValue<[Sent]>([])

    /// Every request sent so far, in the order they were sent.
    var sent: [Sent] { log.value }

    func send(
        _ request: URLRequest,
        body: HTTPBody,
        destination: URL,
        resendable: Bool,
        answerLimit: Int,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> Job<HTTPAnswer> {
        let inner = transport.send(
            request, body: body, destination: destination, resendable: resendable, answerLimit: answerLimit,
            progress: progress)
        return Job { [log] controller in
            log.withValue { $0.append(Sent(method: request.httpMethod ?? "GET", path: request.url?.path ?? "")) }
            controller.perform(inner) { controller.complete(with: $0) }
        }
    }
}

extension URLSessionConfiguration {
    /// A session that fails every request at once, as with no network,
    /// without sending anything: an uploader whose own session is this
    /// sends nothing but through a transport handed to it.
    static var refusingEveryRequest: URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.protocolClasses = [RefusingURLProtocol.self]
        return configuration
    }
}

/// Answers every request with `URLError(.notConnectedToInternet)`.
private final class RefusingURLProtocol: URLProtocol {
    override class func canInit(with request: URLRequest) -> Bool { true }

    override class func canonicalRequest(for request: URLRequest) -> URLRequest { request }

    override func startLoading() {
        client?.urlProtocol(self, didFailWithError: URLError(.notConnectedToInternet))
    }

    override func stopLoading() {}
}
