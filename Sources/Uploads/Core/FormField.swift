/// A named text value sent beside an upload's bytes: a field of a
/// multipart form, such as a medium's `description`.
///
/// Names may repeat (`media_ids[]`, say): a form keeps every field, in the
/// order given.
///
/// ```swift
/// var photo = Photo(file: beach, destination: mediaEndpoint)
/// photo.media.formFields = [FormField(name: "description", value: "Dawn over the bay")]
/// ```
public struct FormField: Sendable, Hashable, Codable {
    /// The field's name.
    public var name: String
    /// The field's value, sent as UTF-8.
    public var value: String

    /// Creates a field.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}
