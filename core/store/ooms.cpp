#include "ooms.h"

#include "session_access.h"

namespace fs::store {

namespace {

constexpr const char* kOomSelect = "SELECT id, time_ns, device, level, stream, requested_bytes,"
                                   " device_free_bytes FROM ooms";

std::vector<OomRow> oomRows(Stmt& st)
{
    std::vector<OomRow> out;
    while (st.step())
        out.push_back({st.i64(0), st.i64(1), st.i64(2), optI64(st, 3), optI64(st, 4), optU64(st, 5),
                       optU64(st, 6)});
    return out;
}

constexpr const char* kPendingSelect = "SELECT device, level, address, size, stream, request_ns,"
                                       " complete_ns FROM pending_frees";

std::vector<PendingFreeRow> pendingRows(const Session& s, const std::string& sql, int level)
{
    const Db& db = SessionAccess::db(s);
    std::vector<PendingFreeRow> out;
    if (!db.hasTable("pending_frees")) return out;
    Stmt st = db.prepare(sql);
    if (level >= 0) st.bind(1, level);
    while (st.step())
        out.push_back({st.i64(0), optI64(st, 1), st.u64(2), st.u64(3), optI64(st, 4), st.i64(5),
                       optI64(st, 6)});
    return out;
}

} // namespace

std::vector<OomRow> oomsByTime(const Session& s)
{
    Stmt st = SessionAccess::db(s).prepare(std::string(kOomSelect) + " ORDER BY time_ns, id");
    return oomRows(st);
}

std::vector<OomRow> oomsOfLevel(const Session& s, int level)
{
    Stmt st = SessionAccess::db(s).prepare(std::string(kOomSelect) +
                                           " WHERE level IS NULL OR level = ?1 ORDER BY id");
    st.bind(1, level);
    return oomRows(st);
}

std::vector<int64_t> oomTimes(const Session& s, int64_t device)
{
    Stmt st =
        SessionAccess::db(s).prepare("SELECT time_ns FROM ooms WHERE device = ?1 ORDER BY time_ns");
    st.bind(1, device);
    std::vector<int64_t> out;
    while (st.step())
        out.push_back(st.i64(0));
    return out;
}

std::vector<PendingFreeRow> pendingFrees(const Session& s)
{
    return pendingRows(s, kPendingSelect, -1);
}

std::vector<PendingFreeRow> pendingFreesOfLevel(const Session& s, int level)
{
    return pendingRows(
        s, std::string(kPendingSelect) + " WHERE level IS NULL OR level = ?1 ORDER BY id", level);
}

std::vector<PendingFreeRow> pendingFreesOverlapping(const Session& s, int64_t from, int64_t to)
{
    const Db& db = SessionAccess::db(s);
    std::vector<PendingFreeRow> out;
    if (!db.hasTable("pending_frees")) return out;
    Stmt st = db.prepare(std::string(kPendingSelect) +
                         " WHERE request_ns < ?2 AND (complete_ns IS NULL OR complete_ns > ?1)");
    st.bind(1, from).bind(2, to);
    while (st.step())
        out.push_back({st.i64(0), optI64(st, 1), st.u64(2), st.u64(3), optI64(st, 4), st.i64(5),
                       optI64(st, 6)});
    return out;
}

} // namespace fs::store
