/// A bag of items, each kept in a numbered slot until it is removed: O(1)
/// insert and remove, and room only for the most items held at once, not
/// for every item ever inserted.
///
/// Groups keep their running children here, for cancellation; a child
/// knows its slot and frees it when it completes.
struct Slots<Item: Sendable>: Sendable {
    private var items: [Item?] = []
    private var free: [Int] = []

    /// The slot the next ``insert(_:)`` uses.
    var nextSlot: Int { free.last ?? items.count }

    /// Stores `item` and returns its slot, ``nextSlot``.
    mutating func insert(_ item: Item) -> Int {
        if let slot = free.popLast() {
            items[slot] = item
            return slot
        }
        items.append(item)
        return items.count - 1
    }

    /// Removes and returns the item in `slot`; `nil` if the slot is empty
    /// (its item was removed, or everything was).
    mutating func remove(at slot: Int) -> Item? {
        guard slot < items.count, let item = items[slot] else { return nil }
        items[slot] = nil
        free.append(slot)
        return item
    }

    /// The items held, in the order of their slots.
    var all: [Item] { items.compactMap { $0 } }

    /// Removes and returns every item. Slots given out before are empty
    /// afterwards.
    mutating func removeAll() -> [Item] {
        defer {
            items = []
            free = []
        }
        return items.compactMap { $0 }
    }
}
