/// The attachment tables of a group's running children, by input index, so
/// that the group finds them when it is cancelled or described, while its
/// children attach without taking the group's lock.
///
/// A child puts its table here when it makes it (``install(_:at:)``,
/// lock-free). The group takes it out under its lock, when the child
/// completes or the group is over, and reads it only under that lock, so
/// a table is never released while the group reads it. Slots come in
/// chunks of 64 children, each made on first use: a group whose children
/// attach nothing has no chunk.
///
/// Unchecked: the pointers are set in `init` and never change, and what
/// they point at is atomics.
final class ChildTables: @unchecked Sendable {
    /// The slots of 64 children.
    private final class Chunk: @unchecked Sendable {
        static let size = 64
        /// Unchecked, as its owner: an immutable pointer to atomics.
        let slots: UnsafeMutablePointer<LazyReference<AttachmentTable>>

        init() {
            slots = .allocate(capacity: Self.size)
            for offset in 0..<Self.size { (slots + offset).initialize(to: LazyReference()) }
        }

        deinit {
            slots.deinitialize(count: Self.size)
            slots.deallocate()
        }
    }

    private let chunks: UnsafeMutablePointer<LazyReference<Chunk>>
    private let chunkCount: Int

    /// Slots for `count` children.
    init(count: Int) {
        chunkCount = (count + Chunk.size - 1) / Chunk.size
        chunks = .allocate(capacity: chunkCount)
        for offset in 0..<chunkCount { (chunks + offset).initialize(to: LazyReference()) }
    }

    deinit {
        chunks.deinitialize(count: chunkCount)
        chunks.deallocate()
    }

    /// Puts `table`, the child at `index`'s, in its slot. Lock-free.
    /// - Returns: `false` if the slot holds a table already.
    func install(_ table: AttachmentTable, at index: Int) -> Bool {
        let chunk = chunks[index / Chunk.size].made { Chunk() }
        return chunk.slots[index % Chunk.size].install(table)
    }

    /// The table in the slot of the child at `index`, if any. Call under
    /// the group's lock.
    func table(at index: Int) -> AttachmentTable? {
        chunks[index / Chunk.size].existing?.slots[index % Chunk.size].existing
    }

    /// Takes the table of the child at `index` out of its slot. Call under
    /// the group's lock.
    func take(at index: Int) -> AttachmentTable? {
        chunks[index / Chunk.size].existing?.slots[index % Chunk.size].take()
    }

    /// Takes `table` out of the slot of the child at `index`, if it is
    /// there. Call under the group's lock.
    func remove(_ table: AttachmentTable, at index: Int) {
        chunks[index / Chunk.size].existing?.slots[index % Chunk.size].remove(table)
    }

    /// Takes every table out, with its child's index. Call under the
    /// group's lock.
    func takeAll() -> [(index: Int, table: AttachmentTable)] {
        var taken: [(index: Int, table: AttachmentTable)] = []
        for chunkIndex in 0..<chunkCount {
            guard let chunk = chunks[chunkIndex].existing else { continue }
            for offset in 0..<Chunk.size {
                if let table = chunk.slots[offset].take() { taken.append((chunkIndex * Chunk.size + offset, table)) }
            }
        }
        return taken
    }
}
