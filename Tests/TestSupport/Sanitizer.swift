import Foundation

/// Whether this test process runs under Thread Sanitizer, which makes every
/// memory access many times slower, and whose allocator keeps freed memory
/// back (its quarantine) and maps shadow memory, so the resident memory a
/// process shows grows with the load of the machine: tests of many jobs, or
/// of many bytes hashed, use fewer there (what they assert holds for any
/// size), and bounds on memory allow for it.
public let isThreadSanitized: Bool = dlsym(dlopen(nil, RTLD_NOW), "__tsan_init") != nil
