import JobKit

/// One call to a test `TaskScheduling` double: what a test asserts about
/// how code started its tasks.
///
/// Doubles record calls in order, in a list a test compares with `==`:
///
/// ```swift
/// #expect(scheduler.calls == [.scheduled(name: "save", priority: .background)])
/// ```
public struct TaskSchedulingCall: Equatable, Sendable, CustomStringConvertible {
    /// The name given to the task, if any.
    public var name: String?
    /// The priority asked for, or `nil` if none was.
    public var priority: TaskPriority?
    /// Whether the call was `scheduleDetached` rather than `schedule`.
    public var isDetached: Bool

    /// Creates a call.
    public init(name: String? = nil, priority: TaskPriority? = nil, isDetached: Bool = false) {
        self.name = name
        self.priority = priority
        self.isDetached = isDetached
    }

    /// A call to `TaskScheduling.schedule(name:priority:operation:)` (or
    /// its short form, which passes no name and no priority).
    public static func scheduled(name: String? = nil, priority: TaskPriority? = nil) -> TaskSchedulingCall {
        TaskSchedulingCall(name: name, priority: priority, isDetached: false)
    }

    /// A call to `TaskScheduling.scheduleDetached(name:priority:operation:)`.
    public static func detached(name: String? = nil, priority: TaskPriority? = nil) -> TaskSchedulingCall {
        TaskSchedulingCall(name: name, priority: priority, isDetached: true)
    }

    /// The call as it would be written, such as
    /// `scheduleDetached(name: "save", priority: .background)`.
    public var description: String {
        var arguments: [String] = []
        if let name { arguments.append("name: \"\(name)\"") }
        if let priority {
            // "TaskPriority.high" reads ".high"; unnamed raw values stay as they are.
            let text = String(describing: priority)
            arguments.append("priority: " + (text.hasPrefix("TaskPriority.") ? text.dropFirst(12) : text[...]))
        }
        return (isDetached ? "scheduleDetached" : "schedule") + "(" + arguments.joined(separator: ", ") + ")"
    }
}
