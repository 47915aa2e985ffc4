import Foundation

extension URL {
    /// Checks that this is an `http` or `https` URL with a host: what every
    /// HTTP uploader accepts as a destination.
    func validateAsHTTPDestination() throws(UploadError) {
        guard let scheme = scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw .invalidDestination(self, reason: "not an http or https URL")
        }
        guard let host, !host.isEmpty else {
            throw .invalidDestination(self, reason: "it has no host")
        }
    }
}
