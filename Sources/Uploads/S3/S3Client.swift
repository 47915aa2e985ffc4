import Foundation
import JobKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The S3 API calls an upload makes on one object, each as a job of one
/// attempt: it asks the presigner for the call's URL, sends the request,
/// and reads the answer, S3's XML included. Whoever makes a call retries
/// it; the client retries nothing.
///
/// Errors name the object (the media's destination), never a URL, whose
/// query holds a signature. Snapshots name each call after its operation
/// ("part 2", "complete upload").
struct S3Client: Sendable {
    /// S3's smallest part, except the last: 5 MiB.
    static let minimumPartSize: Int64 = 5 * 1024 * 1024
    /// S3's largest number of parts in one upload.
    static let maximumPartCount = 10_000

    /// A part the storage holds, as ListParts names it.
    struct StoredPart: Sendable, Hashable {
        var size: Int64
        var etag: String
    }

    /// One page of ListParts.
    struct PartList: Sendable {
        /// The parts on the page, by number.
        var parts: [Int: StoredPart]
        /// Where the next page starts after; `nil` on the last page.
        var nextMarker: Int?
    }

    /// Signs each call.
    let presigner: any S3Presigner
    /// Sends them: the uploader's own transport, or the one an upload's
    /// attempts hand it (see ``carried(by:)``).
    var http: any HTTPTransport
    /// Whether requests carry `Content-MD5` and answers' ETags are checked
    /// (see ``S3Uploader/verifiesBytes``).
    var verifiesBytes = true

    /// Jobs that find the MD5s of `bodies` for their requests, each
    /// performed once, hashed a few ahead of those asked for (see
    /// ``AheadDigests``); `nil`s when the client does not verify bytes.
    func md5s(of bodies: [HTTPBody], window: Int) -> [Job<Data?>] {
        guard verifiesBytes else { return bodies.map { _ in .succeeded(nil) } }
        let digests = AheadDigests(bodies, window: window)
        return bodies.indices.map { index in digests.digest(index).map { Optional($0) } }
    }

    /// This client, its calls sent through the transport `attempts` hand
    /// an upload, if they hand one.
    func carried(by attempts: UploadAttempts) -> Self {
        var client = self
        client.http = attempts.httpTransport(else: http)
        return client
    }

    // MARK: - Calls

    /// `PutObject`: stores `body`, whose MD5 is `md5`, whole at `object`.
    func putObject(
        _ object: URL,
        contentType: String,
        body: HTTPBody,
        md5: Data?,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> HTTPCall<UploadReceipt> {
        let operation = S3Operation.putObject(contentType: contentType, contentMD5: md5?.base64EncodedString())
        return call(operation, on: object, body: body, progress: progress) {
            try Self.storedObject(in: $0, of: object, md5: md5)
        }
    }

    /// `CreateMultipartUpload`: starts an upload to `object`; finishes
    /// with its ID.
    func createMultipartUpload(_ object: URL, contentType: String) -> HTTPCall<String> {
        call(.createMultipartUpload(contentType: contentType), on: object) { try Self.uploadID(in: $0, of: object) }
    }

    /// `ListParts`: one page of the parts of `uploadID` the storage holds,
    /// from after `marker`.
    func listParts(_ object: URL, uploadID: String, after marker: Int?) -> HTTPCall<PartList> {
        call(.listParts(uploadID: uploadID, partNumberMarker: marker), on: object, answerLimit: 4 << 20) {
            try Self.partList(in: $0, after: marker, of: object)
        }
    }

    /// `UploadPart`: sends `body`, whose MD5 is `md5`, as part `number` of
    /// `uploadID`; finishes with the part's ETag.
    func uploadPart(
        _ object: URL,
        uploadID: String,
        number: Int,
        body: HTTPBody,
        md5: Data?,
        progress: @escaping @Sendable (UploadProgress) -> Void
    ) -> HTTPCall<String> {
        let operation = S3Operation.uploadPart(
            uploadID: uploadID, partNumber: number, contentMD5: md5?.base64EncodedString())
        return call(operation, on: object, body: body, progress: progress) {
            try Self.etag(in: $0, ofPart: number, of: object, md5: md5)
        }
    }

    /// `CompleteMultipartUpload`: joins the parts whose ETags `etags` gives
    /// by number into the object.
    func completeMultipartUpload(_ object: URL, uploadID: String, etags: [Int: String]) -> HTTPCall<UploadReceipt> {
        let expected = verifiesBytes ? Self.multipartETag(of: etags) : nil
        let body = S3XML.completeMultipartUpload(etags.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        let md5 = verifiesBytes ? MD5.digest(of: body).base64EncodedString() : nil
        return call(
            .completeMultipartUpload(uploadID: uploadID, contentMD5: md5), on: object, body: .data(body),
            answerLimit: 64 << 10
        ) { try Self.completedObject(in: $0, of: object, expecting: expected) }
    }

    /// `HeadObject`: the storage's answer about `object`, `nil` when it
    /// holds none (`404`).
    func headObject(_ object: URL) -> HTTPCall<HTTPAnswer?> {
        let call = call(.headObject, on: object) { Optional($0) }
        return HTTPCall(
            name: call.name,
            attempt: call.attempt.recover { error in
                guard case .httpStatus(let receipt) = error as? UploadError, receipt.status == 404 else {
                    return .failed(error)
                }
                return .succeeded(nil)
            })
    }

    /// `AbortMultipartUpload`: discards `uploadID` and its parts.
    func abortMultipartUpload(_ object: URL, uploadID: String) -> HTTPCall<Void> {
        call(.abortMultipartUpload(uploadID: uploadID), on: object) { _ in }
    }

    // MARK: - Answers

    /// The receipt of a `PutObject` of bytes whose MD5 is `md5`: its
    /// location is the object's URL when the storage names none.
    static func storedObject(in answer: HTTPAnswer, of object: URL, md5: Data?) throws -> UploadReceipt {
        if let md5 {
            try check(
                answer.receipt, etag: answer.receipt.etag, is: md5.hex, of: object, "it", "the MD5 of the bytes sent")
        }
        var receipt = answer.receipt
        if receipt.header("Location") == nil {
            receipt.headers["location"] = withoutQuery(answer.url).absoluteString
        }
        return receipt
    }

    /// The upload ID in the answer to `CreateMultipartUpload`.
    static func uploadID(in answer: HTTPAnswer, of object: URL) throws -> String {
        guard let uploadID = XMLTree.parse(answer.body)?["UploadId"]?.text, !uploadID.isEmpty else {
            throw UploadError.invalidAnswer(object, reason: "no UploadId in its answer to creating the upload")
        }
        return uploadID
    }

    /// The page of parts in the answer to `ListParts` from after `marker`.
    static func partList(in answer: HTTPAnswer, after marker: Int?, of object: URL) throws -> PartList {
        // S3 names the root ListPartsResult; some implementations, moto
        // among them, ListPartsResponse.
        guard let root = XMLTree.parse(answer.body), root.name.hasPrefix("ListParts") else {
            throw UploadError.invalidAnswer(object, reason: "its list of parts is not S3's XML")
        }
        var parts: [Int: StoredPart] = [:]
        for part in root.all("Part") {
            guard let number = part["PartNumber"].flatMap({ Int($0.text) }),
                let size = part["Size"].flatMap({ Int64($0.text) }),
                let etag = part["ETag"]?.text
            else { continue }
            parts[number] = StoredPart(size: size, etag: etag)
        }
        // A page that says there is more but whose marker does not move on
        // is the last: asking from it would list the same page for ever.
        guard root["IsTruncated"]?.text == "true", let next = root["NextPartNumberMarker"].flatMap({ Int($0.text) }),
            next > marker ?? 0
        else { return PartList(parts: parts, nextMarker: nil) }
        return PartList(parts: parts, nextMarker: next)
    }

    /// The ETag in the answer to `UploadPart` of part `number`, whose MD5
    /// is `md5`.
    static func etag(in answer: HTTPAnswer, ofPart number: Int, of object: URL, md5: Data?) throws -> String {
        guard let etag = answer.receipt.etag else {
            throw UploadError.invalidAnswer(object, reason: "no ETag for part \(number)")
        }
        if let md5 {
            try check(
                answer.receipt, etag: etag, is: md5.hex, of: object, "part \(number)", "the MD5 of the bytes sent")
        }
        return etag
    }

    /// The receipt of `CompleteMultipartUpload`, with the object's ETag and
    /// location from the answer's XML; the ETag is `expected` if it is an
    /// MD5 (see ``multipartETag(of:)``).
    static func completedObject(in answer: HTTPAnswer, of object: URL, expecting expected: String?) throws
        -> UploadReceipt
    {
        // S3 may answer 200 with an error in the body (InternalError, say,
        // which is worth another attempt).
        let read = XMLErrorDocument.reading(answer.receipt)
        if read.serverError != nil { throw UploadError.httpStatus(read) }
        // S3 names the root CompleteMultipartUploadResult; moto,
        // CompleteMultipartUploadResponse.
        guard let root = XMLTree.parse(answer.body), root.name.hasPrefix("CompleteMultipartUpload") else {
            throw UploadError.invalidAnswer(object, reason: "its answer to completing the upload is not S3's XML")
        }
        var receipt = answer.receipt
        if let etag = root["ETag"]?.text {
            receipt.headers["etag"] = etag
            if let expected {
                try check(receipt, etag: etag, is: expected, of: object, "it", "the one its parts make")
            }
        }
        receipt.headers["location"] = root["Location"]?.text ?? withoutQuery(answer.url).absoluteString
        return receipt
    }

    // MARK: - ETags

    /// The MD5 an ETag names: 32 hex digits, quoted or not; `nil` for any
    /// other ETag (a multipart upload's, or one of a storage whose ETags
    /// are not MD5s).
    static func md5(named etag: String) -> Data? {
        let digits = etag.trimmingCharacters(in: CharacterSet(charactersIn: "\"")).lowercased()
        guard digits.utf8.count == 32, digits.utf8.allSatisfy({ (48...57).contains($0) || (97...102).contains($0) })
        else { return nil }
        var bytes = Data(capacity: 16)
        var index = digits.startIndex
        while index < digits.endIndex {
            let next = digits.index(index, offsetBy: 2)
            bytes.append(UInt8(digits[index..<next], radix: 16) ?? 0)
            index = next
        }
        return bytes
    }

    /// The ETag S3 gives the object its parts make, whose ETags `etags`
    /// gives by number: the MD5 of their MD5s, one after the other, then
    /// "-" and their count. `nil` when a part's ETag is not an MD5.
    static func multipartETag(of etags: [Int: String]) -> String? {
        var digest = MD5()
        for (_, etag) in etags.sorted(by: { $0.key < $1.key }) {
            guard let part = md5(named: etag) else { return nil }
            digest.update(part)
        }
        return "\(digest.finalize().hex)-\(etags.count)"
    }

    /// Checks that the storage stored what was sent, where its ETag says:
    /// `etag` (of the object, or of a part, as `what` names it) is to be
    /// `expected` (which `expectedIs` says), unless the storage's ETags are
    /// not MD5s.
    ///
    /// S3's ETag is the MD5 of the bytes of an object or part stored as
    /// sent, or encrypted with S3's own keys (SSE-S3); not with KMS keys
    /// (SSE-KMS, DSSE-KMS) or the customer's (SSE-C), which the answer says
    /// in `x-amz-server-side-encryption` or
    /// `x-amz-server-side-encryption-customer-algorithm`: no check then, nor
    /// for an ETag of another shape than `expected`'s (a storage of other
    /// ETags).
    private static func check(
        _ receipt: UploadReceipt, etag: String?, is expected: String, of object: URL, _ what: String,
        _ expectedIs: String
    ) throws(UploadError) {
        guard let etag else { return }
        let encryption = receipt.header("x-amz-server-side-encryption")?.lowercased() ?? ""
        guard !encryption.hasPrefix("aws:kms"), receipt.header("x-amz-server-side-encryption-customer-algorithm") == nil
        else { return }
        let found = etag.trimmingCharacters(in: CharacterSet(charactersIn: "\"")).lowercased()
        // Another shape: 32 hex digits, then "-N" for a multipart upload's.
        let shape = { (tag: String) in tag.split(separator: "-").map(\.count) }
        guard shape(found) == shape(expected), found != expected else { return }
        throw .storedObjectDiffers(
            object, reason: "\(what) was stored with the ETag \"\(found)\", not \"\(expected)\", \(expectedIs)")
    }

    // MARK: - Requests

    /// `operation` on `object`, each attempt of which asks the presigner
    /// for its URL, sends the request, and reads the answer with `read`.
    private func call<Answer: Sendable>(
        _ operation: S3Operation,
        on object: URL,
        body: HTTPBody = .empty,
        answerLimit: Int = UploadReceipt.defaultAnswerLimit,
        progress: @escaping @Sendable (UploadProgress) -> Void = { _ in },
        read: @escaping @Sendable (HTTPAnswer) throws -> Answer
    ) -> HTTPCall<Answer> {
        let contentType: String? =
            switch operation {
            case .completeMultipartUpload: "application/xml"
            // Without one, FoundationNetworking labels a body as a form.
            case .uploadPart: "application/octet-stream"
            default: operation.contentType
            }
        let attempt = Job<URL> { [presigner] controller in
            // Not cancelled with the job, which completes at once when it is:
            // a late answer is dropped (see S3Presigner for why).
            DefaultTaskScheduler().schedule(name: nil, priority: nil) {
                do {
                    controller.finish(with: try await presigner.presignedURL(for: operation, object: object))
                } catch {
                    controller.fail(with: error)
                }
            }
        }.then { [http] url in
            var request = URLRequest(url: url)
            request.httpMethod = operation.httpMethod
            if let contentType {
                request.setValue(contentType, forHTTPHeaderField: "Content-Type")
            }
            if let md5 = operation.contentMD5 {
                request.setValue(md5, forHTTPHeaderField: "Content-MD5")
            }
            return http.send(
                request, body: body, destination: object, answerLimit: answerLimit, task: operation.jobName,
                progress: progress)
        }.map(read).named(operation.jobName)
        return HTTPCall(name: operation.jobName, attempt: attempt, bytes: body.count)
    }

    /// `url` without its query, where a presigned URL keeps its signature.
    static func withoutQuery(_ url: URL) -> URL {
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: true) else { return url }
        components.query = nil
        components.fragment = nil
        return components.url ?? url
    }
}
