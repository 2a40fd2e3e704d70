// Typed readers of the ooms and pending_frees tables (docs/session-format.md, docs/store.md).
#pragma once

#include "session.h"

#include <optional>
#include <vector>

namespace fs::store {

struct OomRow
{
    int64_t id = 0;
    int64_t timeNs = 0;
    int64_t device = 0;
    std::optional<int64_t> level;
    std::optional<int64_t> stream;
    std::optional<uint64_t> requestedBytes;
    std::optional<uint64_t> deviceFreeBytes;
};
// Every OOM in (time_ns, id) order.
std::vector<OomRow> oomsByTime(const Session& s);
// The OOMs of one level (or of none: rows without a level), in id order.
std::vector<OomRow> oomsOfLevel(const Session& s, int level);
// The times of one device's OOMs, ascending.
std::vector<int64_t> oomTimes(const Session& s, int64_t device);

struct PendingFreeRow
{
    int64_t device = 0;
    std::optional<int64_t> level;
    uint64_t address = 0;
    uint64_t size = 0;
    std::optional<int64_t> stream;
    int64_t requestNs = 0;
    std::optional<int64_t> completeNs; // none: still waiting at the end
};
// Every pending free, in the table's order (none when the file predates the table).
std::vector<PendingFreeRow> pendingFrees(const Session& s);
// The pending frees of one level (or of none), in id order (none when the file predates the
// table).
std::vector<PendingFreeRow> pendingFreesOfLevel(const Session& s, int level);
// The pending frees waiting at some time in [from, to): requested before `to` and not completed
// by `from` (or never), in the table's order (none when the file predates the table).
std::vector<PendingFreeRow> pendingFreesOverlapping(const Session& s, int64_t from, int64_t to);

} // namespace fs::store
