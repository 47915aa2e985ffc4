import Foundation
import Testing

@testable import Uploads

/// How the S3 client reads the storage's answers, without a storage: the
/// XML of each call, as S3 and moto write it, and the answers that cannot
/// be understood.
@Suite("S3 client's answers", .timeLimit(.minutes(1)))
struct S3ClientTests {
    let object = URL(string: "https://media.example.com/videos/surf.mp4")!

    func answer(_ body: String, status: Int = 200, headers: [String: String] = [:]) -> HTTPAnswer {
        let url = URL(string: "https://bucket.example.com/videos/surf.mp4?uploadId=u&X-Amz-Signature=secret")!
        return HTTPAnswer(
            url: url,
            receipt: UploadReceipt(destination: object, status: status, headers: headers, body: Data(body.utf8)),
            body: Data(body.utf8))
    }

    func reason(_ read: () throws -> some Any) -> String? {
        do {
            _ = try read()
            return nil
        } catch let UploadError.invalidAnswer(url, reason) {
            #expect(url == object, "the error names the object, never the signed URL")
            return reason
        } catch {
            return "\(error)"
        }
    }

    @Test func aCreatedUploadIsKnownByItsIDAndAnAnswerWithoutOneIsNotUnderstood() throws {
        let created = answer(
            #"<InitiateMultipartUploadResult><Bucket>b</Bucket><Key>k</Key><UploadId>abc-1</UploadId></InitiateMultipartUploadResult>"#
        )
        #expect(try S3Client.uploadID(in: created, of: object) == "abc-1")
        #expect(
            reason { try S3Client.uploadID(in: answer("<InitiateMultipartUploadResult/>"), of: object) }
                == "no UploadId in its answer to creating the upload")
        #expect(
            reason { try S3Client.uploadID(in: answer("stored"), of: object) }
                == "no UploadId in its answer to creating the upload")
    }

    @Test func aPageOfPartsNamesTheNextOnlyWhenItMovesOn() throws {
        func page(truncated: Bool, next: Int) -> HTTPAnswer {
            answer(
                """
                <ListPartsResponse><IsTruncated>\(truncated)</IsTruncated>\
                <NextPartNumberMarker>\(next)</NextPartNumberMarker>\
                <Part><PartNumber>3</PartNumber><ETag>"e3"</ETag><Size>42</Size></Part>\
                <Part><PartNumber>4</PartNumber><Size>42</Size></Part></ListPartsResponse>
                """)
        }
        let first = try S3Client.partList(in: page(truncated: true, next: 3), after: nil, of: object)
        #expect(first.parts == [3: S3Client.StoredPart(size: 42, etag: "\"e3\"")], "a part without an ETag is not held")
        #expect(first.nextMarker == 3)
        #expect(try S3Client.partList(in: page(truncated: false, next: 3), after: nil, of: object).nextMarker == nil)
        #expect(
            try S3Client.partList(in: page(truncated: true, next: 3), after: 3, of: object).nextMarker == nil,
            "a marker that does not move on would list the same page for ever")
        #expect(
            reason { try S3Client.partList(in: answer("<Error><Code>X</Code></Error>"), after: nil, of: object) }
                == "its list of parts is not S3's XML")
    }

    @Test func aPartIsKnownByItsETag() throws {
        #expect(try S3Client.etag(in: answer("", headers: ["ETag": "\"e2\""]), ofPart: 2, of: object) == "\"e2\"")
        #expect(reason { try S3Client.etag(in: answer(""), ofPart: 2, of: object) } == "no ETag for part 2")
    }

    @Test func aCompletedObjectHasTheETagAndLocationOfItsXMLOrItsURLWithoutTheSignature() throws {
        let completed = try S3Client.completedObject(
            in: answer(
                #"<CompleteMultipartUploadResult><Location>https://cdn.example.com/surf.mp4</Location><ETag>"abc-3"</ETag></CompleteMultipartUploadResult>"#,
                headers: ["ETag": "\"header\""]),
            of: object)
        #expect(completed.etag == "\"abc-3\"")
        #expect(completed.location?.absoluteString == "https://cdn.example.com/surf.mp4")
        let moto = try S3Client.completedObject(
            in: answer("<CompleteMultipartUploadResponse><ETag>\"m-2\"</ETag></CompleteMultipartUploadResponse>"),
            of: object)
        #expect(moto.location?.absoluteString == "https://bucket.example.com/videos/surf.mp4")
        #expect(
            reason { try S3Client.completedObject(in: answer("stored"), of: object) }
                == "its answer to completing the upload is not S3's XML")
    }

    @Test func anErrorInTheBodyOfA200FailsTheCompletionAsS3Says() {
        #expect {
            try S3Client.completedObject(
                in: answer("\n<Error><Code>InternalError</Code><Message>Try again.</Message></Error>"), of: object)
        } throws: { error in
            guard case .httpStatus(let receipt) = error as? UploadError else { return false }
            return receipt.status == 200 && (error as? UploadError)?.isTransient == true
        }
    }

    @Test func theRequestsWithABodySayTheirMD5ToThePresigner() {
        let md5 = MD5.digest(of: Data("abc".utf8)).base64EncodedString()
        #expect(S3Operation.putObject(contentType: "image/jpeg", contentMD5: md5).contentMD5 == md5)
        #expect(S3Operation.uploadPart(uploadID: "u", partNumber: 2, contentMD5: md5).contentMD5 == md5)
        #expect(S3Operation.completeMultipartUpload(uploadID: "u", contentMD5: md5).contentMD5 == md5)
        #expect(S3Operation.createMultipartUpload(contentType: "video/mp4").contentMD5 == nil)
        #expect(S3Operation.listParts(uploadID: "u", partNumberMarker: nil).contentMD5 == nil)
        #expect(S3Operation.abortMultipartUpload(uploadID: "u").contentMD5 == nil)
        #expect(S3Operation.uploadPart(uploadID: "u", partNumber: 2, contentMD5: md5).jobName == "part 2")
    }

    @Test func aStoredObjectIsWhereTheStorageSaysOrAtItsURLWithoutTheSignature() {
        #expect(
            S3Client.storedObject(in: answer("")).location?.absoluteString
                == "https://bucket.example.com/videos/surf.mp4")
        #expect(
            S3Client.storedObject(in: answer("", headers: ["Location": "/stored/surf.mp4"])).location?.absoluteString
                == "https://media.example.com/stored/surf.mp4")
    }
}
