/// The items waiting on a test queue, each with its due time, enqueue
/// sequence and work, in the order the queue runs them: the one place an
/// item lives from its enqueue until it runs or is cancelled. A cancelled
/// item leaves the store at once, and its work with it.
///
/// Items wait in a binary min-heap by (due time, sequence). In shuffled
/// order, the items due at the instant being run move to `pool`, and each
/// item to run is drawn from it. A cancellable item has a slot in `slots`
/// that records where it is, in the heap or in the pool, updated as it
/// moves, so that cancelling it removes it in logarithmic time; its
/// ``Ticket`` names the slot. Items that cannot be cancelled (most of
/// them) have no slot and cost no bookkeeping. Slots are used again, and
/// the table never shrinks: it stays as large as the most cancellable
/// items that ever waited at once, which a test double can afford.
///
/// Not thread-safe: ``TestQueue`` keeps it behind its lock.
struct ItemStore: Sendable {
    /// One item of work waiting.
    struct Item: Sendable {
        /// When it runs, in the queue's virtual time.
        let due: Duration
        /// Enqueue order, which breaks ties of due time.
        let sequence: UInt64
        let work: @Sendable () -> Void
        /// The number of the slot that records where the item waits, if it
        /// can be cancelled (work enqueued with a delay); -1 otherwise.
        let slot: Int32

        func precedes(_ other: Item) -> Bool {
            (due, sequence) < (other.due, other.sequence)
        }
    }

    private var heap: [Item] = []
    /// Shuffled order only: the items due at the instant being run, in no
    /// order. Empty in FIFO order.
    private var pool: [Item] = []
    /// Where each cancellable item is, by slot number.
    private var slots: [Slot] = []
    /// Slots whose item has left, to be used again.
    private var freeSlots: [Int32] = []
    /// The sequence of the item added next.
    private var nextSequence: UInt64 = 0

    private struct Slot {
        /// The sequence of the item in the slot, which tells a ticket whose
        /// item has left from the ticket of the item using the slot now;
        /// `nil` while the slot is free.
        var sequence: UInt64?
        /// An index in the heap, or, if negative, the index `~place` in
        /// the pool.
        var place: Int
    }

    /// What cancels a cancellable item: its slot and its sequence.
    struct Ticket: Sendable {
        fileprivate let slot: Int32
        fileprivate let sequence: UInt64
    }

    /// The number of items waiting.
    var count: Int { heap.count + pool.count }

    /// When the next item is due, if any item waits.
    var nextDue: Duration? { pool.first?.due ?? heap.first?.due }

    /// Adds an item that cannot be cancelled, after every item added so
    /// far that is due at the same time.
    /// - Complexity: O(log *n*); O(1) for an item due after every other.
    mutating func insert(due: Duration, work: @escaping @Sendable () -> Void) {
        heap.append(Item(due: due, sequence: takeSequence(), work: work, slot: -1))
        siftUp(from: heap.count - 1)
    }

    /// Adds an item that can be cancelled with the returned ticket, after
    /// every item added so far that is due at the same time.
    /// - Complexity: O(log *n*); amortized O(1) for an item due after every
    ///   other.
    mutating func insertCancellable(due: Duration, work: @escaping @Sendable () -> Void) -> Ticket {
        let sequence = takeSequence()
        let slot: Int32
        if let free = freeSlots.popLast() {
            slot = free
            slots[Int(slot)].sequence = sequence
        } else {
            slot = Int32(slots.count)
            slots.append(Slot(sequence: sequence, place: 0))
        }
        heap.append(Item(due: due, sequence: sequence, work: work, slot: slot))
        siftUp(from: heap.count - 1)
        return Ticket(slot: slot, sequence: sequence)
    }

    /// Removes the item of `ticket` if it still waits, and returns its
    /// work, for the caller to release.
    /// - Complexity: O(log *n*).
    mutating func remove(_ ticket: Ticket) -> (@Sendable () -> Void)? {
        let slot = slots[Int(ticket.slot)]
        guard slot.sequence == ticket.sequence else { return nil }
        let item = slot.place < 0 ? takeFromPool(at: ~slot.place) : takeFromHeap(at: slot.place)
        freeSlot(of: item)
        return item.work
    }

    /// Removes and returns the next item: the first by due time and
    /// sequence, or, with a `generator` (shuffled order), one drawn evenly
    /// from the items due at the earliest instant. The caller checks
    /// ``nextDue`` first: there must be an item.
    /// - Complexity: amortized O(log *n*): each item moves to the pool at
    ///   most once.
    mutating func removeNext(drawingWith generator: inout SeededRandomNumberGenerator?) -> Item {
        let item: Item
        if generator == nil {
            item = takeFromHeap(at: 0)
        } else {
            let instant = pool.first?.due ?? heap[0].due
            while let first = heap.first, first.due == instant {
                pool.append(takeFromHeap(at: 0))
                notePlace(ofPoolItemAt: pool.count - 1)
            }
            // An index below pool.count, the same on every platform and
            // Swift version (not `Int.random(in:using:)`, whose algorithm is
            // the standard library's to change).
            item = takeFromPool(at: Int(UInt64(pool.count).multipliedFullWidth(by: generator!.next()).high))
        }
        freeSlot(of: item)
        return item
    }

    // MARK: - The heap

    /// Takes the item at `index` out of the heap. Its slot, if any, still
    /// names it: the caller frees it, or records where the item goes.
    private mutating func takeFromHeap(at index: Int) -> Item {
        heap.swapAt(index, heap.count - 1)
        let item = heap.removeLast()
        if index < heap.count {
            siftDown(from: index)
            if index > 0 { siftUp(from: index) }
        }
        return item
    }

    private mutating func siftUp(from index: Int) {
        var child = index
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { break }
            heap.swapAt(child, parent)
            notePlace(ofHeapItemAt: child)
            child = parent
        }
        notePlace(ofHeapItemAt: child)
    }

    private mutating func siftDown(from index: Int) {
        var parent = index
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var first = parent
            if left < heap.count && heap[left].precedes(heap[first]) { first = left }
            if right < heap.count && heap[right].precedes(heap[first]) { first = right }
            if first == parent { break }
            heap.swapAt(parent, first)
            notePlace(ofHeapItemAt: parent)
            parent = first
        }
        notePlace(ofHeapItemAt: parent)
    }

    @inline(__always)
    private mutating func notePlace(ofHeapItemAt index: Int) {
        let slot = heap[index].slot
        if slot >= 0 { slots[Int(slot)].place = index }
    }

    // MARK: - The pool

    /// Takes the item at `index` out of the pool; the caller frees its
    /// slot.
    private mutating func takeFromPool(at index: Int) -> Item {
        pool.swapAt(index, pool.count - 1)
        let item = pool.removeLast()
        if index < pool.count { notePlace(ofPoolItemAt: index) }
        return item
    }

    @inline(__always)
    private mutating func notePlace(ofPoolItemAt index: Int) {
        let slot = pool[index].slot
        if slot >= 0 { slots[Int(slot)].place = ~index }
    }

    // MARK: - Sequences and slots

    private mutating func takeSequence() -> UInt64 {
        defer { nextSequence += 1 }
        return nextSequence
    }

    @inline(__always)
    private mutating func freeSlot(of item: Item) {
        guard item.slot >= 0 else { return }
        slots[Int(item.slot)].sequence = nil
        freeSlots.append(item.slot)
    }

    // MARK: - Invariants

    /// What is inconsistent in the store, for tests: the heap out of order,
    /// the pool holding items of two instants or later than the heap's
    /// first, a cancellable item whose slot does not say where it is, a
    /// slot in use with no item. Empty when the store is sound.
    func inconsistencies() -> [String] {
        var found: [String] = []
        for index in heap.indices.dropFirst() where heap[index].precedes(heap[(index - 1) / 2]) {
            found.append("heap item \(index) precedes its parent")
        }
        if let instant = pool.first?.due {
            if pool.contains(where: { $0.due != instant }) { found.append("the pool holds two instants") }
            if let first = heap.first, first.due < instant {
                found.append("the heap holds an item due before the pool")
            }
        }
        let places = heap.indices.map { (heap[$0], $0) } + pool.indices.map { (pool[$0], ~$0) }
        for (item, place) in places where item.slot >= 0 {
            let slot = slots[Int(item.slot)]
            if slot.sequence != item.sequence || slot.place != place {
                found.append("item \(item.sequence) at \(place) is recorded as \(slot)")
            }
        }
        let used = slots.count(where: { $0.sequence != nil })
        let cancellable = places.count(where: { $0.0.slot >= 0 })
        if used != cancellable { found.append("\(used) slots in use for \(cancellable) cancellable items") }
        if slots.count - used != freeSlots.count {
            found.append("\(slots.count - used) free slots, \(freeSlots.count) listed")
        }
        return found
    }
}
