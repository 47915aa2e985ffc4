import Foundation
import Testing

@testable import Uploads

/// How the S3 client reads the storage's answers, without a storage: the
/// XML of each call, as S3 and moto write it, and the answers that cannot
/// be understood.
@Suite("S3 client's answers", .timeLimit(.minutes(1)))
struct S3ClientTests {
    let object = URL(string: "https://media.example.com/videos/surf.mp4")!
    /// The MD5 of "abc" (RFC 1321), as bytes and in an ETag.
    let abc = MD5.digest(of: Data("abc".utf8))
    let abcETag = "\"900150983cd24fb0d6963f7d28e17f72\""

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
        } catch let UploadError.storedObjectDiffers(url, reason) {
            #expect(url == object, "the error names the object, never the signed URL")
            return "storedObjectDiffers: \(reason)"
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
        #expect(
            try S3Client.etag(in: answer("", headers: ["ETag": "\"e2\""]), ofPart: 2, of: object, md5: abc) == "\"e2\"")
        #expect(reason { try S3Client.etag(in: answer(""), ofPart: 2, of: object, md5: abc) } == "no ETag for part 2")
    }

    @Test func aCompletedObjectHasTheETagAndLocationOfItsXMLOrItsURLWithoutTheSignature() throws {
        let completed = try S3Client.completedObject(
            in: answer(
                #"<CompleteMultipartUploadResult><Location>https://cdn.example.com/surf.mp4</Location><ETag>"abc-3"</ETag></CompleteMultipartUploadResult>"#,
                headers: ["ETag": "\"header\""]),
            of: object, expecting: nil)
        #expect(completed.etag == "\"abc-3\"")
        #expect(completed.location?.absoluteString == "https://cdn.example.com/surf.mp4")
        let moto = try S3Client.completedObject(
            in: answer("<CompleteMultipartUploadResponse><ETag>\"m-2\"</ETag></CompleteMultipartUploadResponse>"),
            of: object, expecting: nil)
        #expect(moto.location?.absoluteString == "https://bucket.example.com/videos/surf.mp4")
        #expect(
            reason { try S3Client.completedObject(in: answer("stored"), of: object, expecting: nil) }
                == "its answer to completing the upload is not S3's XML")
    }

    @Test func anErrorInTheBodyOfA200FailsTheCompletionAsS3Says() {
        #expect {
            try S3Client.completedObject(
                in: answer("\n<Error><Code>InternalError</Code><Message>Try again.</Message></Error>"), of: object,
                expecting: nil)
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

    @Test func eachCallWeighsTheBytesItsBodySends() {
        // What an outbox that probes a host compares: the smallest goes first.
        let client = S3Client(presigner: RefusingPresigner(), http: InProcessTransport(configuration: .ephemeral))
        let part = HTTPBody.file(URL(fileURLWithPath: "/surf.mp4"), offset: 5_242_880, length: 1_000)
        let calls = [
            client.createMultipartUpload(object, contentType: "video/mp4").bytes,
            client.uploadPart(object, uploadID: "u", number: 2, body: part, md5: nil, progress: { _ in }).bytes,
            client.putObject(object, contentType: "image/jpeg", body: .data(Data("abc".utf8)), md5: nil) { _ in }
                .bytes,
            client.listParts(object, uploadID: "u", after: nil).bytes,
            client.headObject(object).bytes,
            client.abortMultipartUpload(object, uploadID: "u").bytes,
        ]
        #expect(calls == [0, 1_000, 3, 0, 0, 0])
        let complete = client.completeMultipartUpload(object, uploadID: "u", etags: [1: abcETag])
        #expect(complete.bytes > 100, "its list of parts")
    }

    @Test func aStoredObjectIsWhereTheStorageSaysOrAtItsURLWithoutTheSignature() throws {
        #expect(
            try S3Client.storedObject(in: answer(""), of: object, md5: abc).location?.absoluteString
                == "https://bucket.example.com/videos/surf.mp4")
        #expect(
            try S3Client.storedObject(in: answer("", headers: ["Location": "/stored/surf.mp4"]), of: object, md5: abc)
                .location?.absoluteString
                == "https://media.example.com/stored/surf.mp4")
    }

    // MARK: - ETags

    @Test func anETagIsCheckedWhereItIsAnMD5() throws {
        #expect(
            try S3Client.etag(in: answer("", headers: ["ETag": abcETag]), ofPart: 2, of: object, md5: abc) == abcETag)
        #expect(
            reason {
                try S3Client.etag(
                    in: answer("", headers: ["ETag": "\"d41d8cd98f00b204e9800998ecf8427e\""]), ofPart: 2, of: object,
                    md5: abc)
            }
                == "storedObjectDiffers: part 2 was stored with the ETag \"d41d8cd98f00b204e9800998ecf8427e\", not "
                + "\"900150983cd24fb0d6963f7d28e17f72\", the MD5 of the bytes sent")
        let differs = try #require(
            reason {
                try S3Client.storedObject(
                    in: answer("", headers: ["ETag": "\"D41D8CD98F00B204E9800998ECF8427E\""]), of: object, md5: abc)
            })
        #expect(differs.hasPrefix("storedObjectDiffers: it was stored with"))
        // Not an MD5, or one S3 does not make from the bytes: no check.
        for headers in [
            ["ETag": "\"v2\""],
            ["ETag": "\"d41d8cd98f00b204e9800998ecf8427e\"", "x-amz-server-side-encryption": "aws:kms"],
            ["ETag": "\"d41d8cd98f00b204e9800998ecf8427e\"", "x-amz-server-side-encryption": "aws:kms:dsse"],
            [
                "ETag": "\"d41d8cd98f00b204e9800998ecf8427e\"",
                "x-amz-server-side-encryption-customer-algorithm": "AES256",
            ],
        ] {
            #expect(throws: Never.self, "\(headers)") {
                try S3Client.storedObject(in: answer("", headers: headers), of: object, md5: abc)
            }
        }
        #expect(throws: Never.self, "SSE-S3 keeps the MD5") {
            try S3Client.storedObject(
                in: answer("", headers: ["ETag": abcETag, "x-amz-server-side-encryption": "AES256"]), of: object,
                md5: abc)
        }
    }

    @Test func anObjectOfPartsHasTheETagTheirMD5sMake() throws {
        // Cloudflare R2's documented example, which S3's rule gives.
        let first = "\"bce6bf66aeb76c7040fdd5f4eccb78e6\""
        #expect(
            S3Client.multipartETag(of: [2: "8165449fc15bbf43d3b674595cbcc406", 1: first])
                == "f77dc0eecdebcd774a2a22cb393ad2ff-2", "in the parts' order, quoted or not")
        #expect(S3Client.multipartETag(of: [1: first, 2: "\"kms-etag\""]) == nil, "a part's ETag is no MD5")

        func completion(_ etag: String) -> HTTPAnswer {
            answer("<CompleteMultipartUploadResult><ETag>\(etag)</ETag></CompleteMultipartUploadResult>")
        }
        let expected = "f77dc0eecdebcd774a2a22cb393ad2ff-2"
        #expect(
            try S3Client.completedObject(in: completion("\"\(expected)\""), of: object, expecting: expected).etag
                == "\"\(expected)\"")
        #expect(
            reason {
                try S3Client.completedObject(
                    in: completion("\"f77dc0eecdebcd774a2a22cb393ad2ff-3\""), of: object, expecting: expected)
            }
                == "storedObjectDiffers: it was stored with the ETag \"f77dc0eecdebcd774a2a22cb393ad2ff-3\", not "
                + "\"f77dc0eecdebcd774a2a22cb393ad2ff-2\", the one its parts make")
        #expect(throws: Never.self) {
            try S3Client.completedObject(in: completion("\"joined\""), of: object, expecting: expected)
        }
    }
}
