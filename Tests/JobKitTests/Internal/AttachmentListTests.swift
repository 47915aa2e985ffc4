import Testing

@testable import JobKit

/// A job's attachment list, call by call: the first entry kept inline and
/// the others after it, in the order attached, whatever is removed.
@Suite("Attachment list", .timeLimit(.minutes(1)))
struct AttachmentListTests {
    /// The keys and kinds of `entries`, in order: `n` for a name, `c` for
    /// an `onCancel` block, `f` for a failure.
    private func keys(_ entries: AttachmentEntries) -> [String] {
        entries.map { key, attachment in
            switch attachment {
            case .name: "\(key)n"
            case .onCancel: "\(key)c"
            case .failure: "\(key)f"
            case .node, .detail, .taskStatus: "\(key)?"
            }
        }
    }

    private func list(_ attachments: [JobKit.Attachment]) -> AttachmentList {
        var list = AttachmentList()
        for attachment in attachments { list.append(attachment, key: nil) }
        return list
    }

    @Test func entriesComeOutInTheOrderTheyWentIn() {
        let entries = list([.name("a"), .onCancel {}, .name("b")]).attachments
        #expect(keys(entries) == ["0n", "1c", "2n"])
    }

    @Test func removingTheFirstEntryMovesTheSecondUp() {
        var list = list([.onCancel {}, .onCancel {}, .onCancel {}])
        #expect(list.remove(0) != nil)
        #expect(keys(list.attachments) == ["1c", "2c"])
        #expect(list.remove(2) != nil)
        #expect(list.remove(2) == nil)
        #expect(list.remove(1) != nil)
        #expect(keys(list.attachments).isEmpty)
        list.append(.name("again"), key: nil)
        #expect(keys(list.attachments) == ["3n"])
    }

    @Test func aJobThatAttachedOneThingGivesItUpAtCompletion() {
        var list = list([.onCancel {}])
        #expect(keys(list.takeAttachments(keeping: nil)) == ["0c"])
        #expect(keys(list.attachments).isEmpty)
    }

    @Test func aJobThatAttachedOneThingAndFailedKeepsItsFailure() {
        var list = list([.onCancel {}])
        #expect(keys(list.takeAttachments(keeping: TestFailure())) == ["0c"])
        #expect(keys(list.attachments) == ["1f"])
    }

    @Test func aCompletedJobKeepsItsNamesAndItsFailure() {
        var named = list([.name("a")])
        #expect(keys(named.takeAttachments(keeping: nil)).isEmpty)
        #expect(keys(named.attachments) == ["0n"])

        var mixed = list([.onCancel {}, .name("a"), .onCancel {}, .name("b")])
        #expect(keys(mixed.takeAttachments(keeping: TestFailure())) == ["0c", "1n", "2c", "3n"])
        #expect(keys(mixed.attachments) == ["1n", "3n", "4f"])
    }

    @Test func aNewStepDropsTheNamesOfTheStepBeforeAndKeepsTheRest() {
        var list = list([.name("loop")])
        #expect(list.startStep().isEmpty)
        list.append(.name("step 1"), key: nil)
        list.append(.onCancel {}, key: nil)
        #expect(list.startStep().count == 1)
        #expect(keys(list.attachments) == ["0n", "2c"])
        // The first entry itself goes when it is a name of the step.
        var fresh = AttachmentList()
        #expect(fresh.startStep().isEmpty)
        fresh.append(.name("step 1"), key: nil)
        fresh.append(.name("step 1, detail"), key: nil)
        #expect(fresh.startStep().count == 2)
        #expect(keys(fresh.attachments).isEmpty)
    }
}

private struct TestFailure: Error {}
