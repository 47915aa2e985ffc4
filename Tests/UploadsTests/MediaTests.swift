import Foundation
import Testing
import Uploads

@Suite struct MediaTests {
    @Test func bytesCountInMemory() throws {
        let media = Media(
            bytes: Data(count: 42), destination: URL(string: "https://x/a.jpg")!, contentType: "image/jpeg")
        #expect(try media.byteCount() == 42)
    }
}
