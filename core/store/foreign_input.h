// What a file is when it is not a fragscope session: other tools' traces that `fragscope import`
// reads. One classification of a file's first bytes, shared by the importer's format detection
// (import::detectFormat) and the session opener (Session::open), so that every command given a
// trace where a session is expected says how to import it (docs/importers.md).
#pragma once

#include <string>
#include <string_view>

namespace fs::store {

enum class InputKind {
    Unknown,
    Sqlite, // "SQLite format 3": a session, or an nsys export
    Pickle, // a Python pickle: a PyTorch allocator snapshot
    Json,   // a JSON document: a Kineto / Chrome trace, or a metrics table
};

// From a file's first bytes (decompressed when gzip).
InputKind inputKindOfHead(std::string_view head);

// The first n bytes of a file, decompressed when it is gzip ("" when unreadable).
std::string fileHead(const std::string& path, size_t n);

// Why `path` (not a fragscope session) cannot be opened as one, and the command that imports it:
// "a PyTorch allocator snapshot (pickle), not a fragscope session: run `fragscope import ...`".
// `sqlite`: the file is an SQLite database without fragscope's application id (an nsys export
// is recognised by `nsysTables`). "" when the file is none of the importable kinds.
std::string foreignInputProblem(const std::string& path, bool sqlite = false,
                                bool nsysTables = false);

} // namespace fs::store
