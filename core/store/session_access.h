// Internal to core/store: the readers and writers reach a session's connection through this
// (Session::db() is private: docs/store.md). Nothing outside core/store includes it.
#pragma once

#include "session.h"

#include <optional>

namespace fs {

struct SessionAccess
{
    static Db& db(Session& s) { return s.db(); }
    static const Db& db(const Session& s) { return s.db(); }
};

namespace store {

// A nullable column (Row: a Stmt on its row, or a visited row's RowValues). Always inlined: a
// call returns the optional through memory, and reading it back as it is still being written
// stalled the long reads (a sixth of an allocation scan's time).
template <class Row>
[[gnu::always_inline]] inline std::optional<int64_t> optI64(const Row& st, int col)
{
    return st.isNull(col) ? std::nullopt : std::optional<int64_t>(st.i64(col));
}
template <class Row>
[[gnu::always_inline]] inline std::optional<uint64_t> optU64(const Row& st, int col)
{
    return st.isNull(col) ? std::nullopt : std::optional<uint64_t>(st.u64(col));
}

} // namespace store

} // namespace fs
