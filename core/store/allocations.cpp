#include "allocations.h"

#include "catalog.h"
#include "session_access.h"
#include "table_scan.h"

#include <fmt/format.h>

#include <limits>

namespace fs::store {

namespace {

constexpr const char* kRecordColumns =
    "id, device, level, region_id, address, size, alloc_ns, free_ns, tag";

std::optional<std::string> textOf(const Session& s, const Stmt& st, int col)
{
    if (st.isNull(col)) return std::nullopt;
    return s.string(StringId{static_cast<uint32_t>(st.i64(col))});
}

// A record from kRecordColumns' values (Row: RowValues or Stmt).
template <class Row> void readRecord(const Row& v, AllocationRecord& r)
{
    r.id = v.i64(0);
    r.device = v.i64(1);
    r.level = v.i64(2);
    r.regionId = optI64(v, 3);
    r.address = v.u64(4);
    r.size = v.u64(5);
    r.allocNs = v.i64(6);
    r.freeNs = optI64(v, 7);
    r.tag = optI64(v, 8);
}

int64_t readIdRange(const Session& s, int64_t lo, int64_t hi, const AllocationVisitor& visit,
                    RowReading how)
{
    // A rowid range, in id order (id is the rowid).
    AllocationRecord r;
    return visitTableRows(
        SessionAccess::db(s), "allocations", kRecordColumns, lo, hi,
        [&](const RowValues& v) {
            readRecord(v, r);
            return visit(r);
        },
        how);
}

} // namespace

int64_t AllocationRecords::idRange(const Session& s, int64_t lo, int64_t hi,
                                   const AllocationVisitor& visit)
{
    return readIdRange(s, lo, hi, visit, RowReading::Pages);
}

int64_t AllocationRecords::idRangeBySqlite(const Session& s, int64_t lo, int64_t hi,
                                           const AllocationVisitor& visit)
{
    return readIdRange(s, lo, hi, visit, RowReading::Sqlite);
}

int64_t AllocationRecords::after(const Session& s, int64_t lastId, const AllocationVisitor& visit)
{
    if (lastId == std::numeric_limits<int64_t>::max()) return 0;
    return idRange(s, lastId + 1, std::numeric_limits<int64_t>::max(), visit);
}

int64_t AllocationRecords::idRangeStepped(const Session& s, int64_t lo, int64_t hi,
                                          const AllocationVisitor& visit)
{
    Stmt st = SessionAccess::db(s).prepare(
        fmt::format("SELECT {} FROM allocations WHERE id >= ?1 AND id <= ?2", kRecordColumns));
    st.bind(1, lo).bind(2, hi);
    AllocationRecord r;
    int64_t rows = 0;
    while (st.step()) {
        ++rows;
        readRecord(st, r);
        if (!visit(r)) break;
    }
    return rows;
}

std::vector<AllocationAttributes> allocationAttributes(const Session& s, int64_t device,
                                                       int64_t level, int64_t afterId,
                                                       int64_t limit)
{
    Stmt st = SessionAccess::db(s).prepare(
        "SELECT id, requested_size, stream, tag, stack, user_metadata FROM allocations"
        // "+": a rowid range scan, never the time index and a sort
        " WHERE id > ?3 AND +device = ?1 AND +level = ?2 ORDER BY id LIMIT ?4");
    st.bind(1, device).bind(2, level).bind(3, afterId).bind(4, limit);
    std::vector<AllocationAttributes> out;
    while (st.step()) {
        AllocationAttributes& r = out.emplace_back();
        r.id = st.i64(0);
        r.requestedSize = optU64(st, 1);
        r.stream = st.i64(2);
        r.tag = optI64(st, 3);
        r.stack = optI64(st, 4);
        r.userMetadata = optI64(st, 5);
    }
    return out;
}

std::pair<int64_t, int64_t> allocationIdBounds(const Session& s)
{
    const Db& db = SessionAccess::db(s);
    return {db.scalar("SELECT min(id) FROM allocations"),
            db.scalar("SELECT max(id) FROM allocations")};
}

std::optional<AllocationPlace> allocationPlace(const Session& s, int64_t id)
{
    Stmt st =
        SessionAccess::db(s).prepare("SELECT device, level, alloc_ns FROM allocations WHERE id=?1");
    st.bind(1, id);
    if (!st.step()) return std::nullopt;
    return AllocationPlace{st.i64(0), st.i64(1), st.i64(2)};
}

std::optional<AllocationDetails> allocationDetails(const Session& s, int64_t id)
{
    const Db& db = SessionAccess::db(s);
    Stmt st = db.prepare("SELECT requested_size, stream, tag, stack FROM allocations WHERE id=?1");
    st.bind(1, id);
    if (!st.step()) return std::nullopt;
    AllocationDetails d;
    d.requestedSize = optU64(st, 0);
    d.stream = st.i64(1);
    d.tag = textOf(s, st, 2);
    if (!st.isNull(3)) d.stack = stackTexts(s, st.i64(3));
    // Columns added after format v1's first files: absent from older sessions.
    if (db.scalar("SELECT count(*) FROM pragma_table_info('allocations')"
                  " WHERE name='user_metadata'") > 0) {
        Stmt nt = db.prepare("SELECT user_metadata, compile_context FROM allocations WHERE id=?1");
        nt.bind(1, id);
        if (nt.step()) {
            d.userMetadata = textOf(s, nt, 0);
            d.compileContext = textOf(s, nt, 1);
        }
    }
    return d;
}

std::vector<AllocationNotes> allocationNotes(const Session& s, const std::vector<int64_t>& ids)
{
    std::vector<AllocationNotes> out(ids.size());
    const Db& db = SessionAccess::db(s);
    if (ids.empty() || db.scalar("SELECT count(*) FROM pragma_table_info('allocations')"
                                 " WHERE name='user_metadata'") == 0)
        return out;
    Stmt st = db.prepare("SELECT user_metadata, compile_context FROM allocations WHERE id=?1");
    for (size_t k = 0; k < ids.size(); ++k) {
        st.reset();
        st.bind(1, ids[k]);
        if (!st.step()) continue;
        out[k].userMetadata = textOf(s, st, 0).value_or(std::string());
        out[k].compileContext = textOf(s, st, 1).value_or(std::string());
    }
    return out;
}

AllocationFrees::AllocationFrees(const Session& s)
    : st_(SessionAccess::db(s).prepare("SELECT free_ns FROM allocations WHERE id = ?1"))
{
}

std::optional<int64_t> AllocationFrees::freeNs(int64_t id)
{
    st_.reset();
    st_.bind(1, id);
    if (!st_.step() || st_.isNull(0)) return std::nullopt;
    return st_.i64(0);
}

int64_t AllocationRows::ofLevel(const Session& s, int level,
                                const std::function<bool(const AllocationRow&)>& visit)
{
    // Every row in id order (no index leads with level), the level compared here.
    AllocationRow r;
    int64_t ofLevel = 0;
    visitTableRows(
        SessionAccess::db(s), "allocations",
        "level, device, address, size, requested_size, stream, alloc_ns, free_ns, tag, region_id,"
        " stack, user_metadata, compile_context",
        std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max(),
        [&](const RowValues& all) {
            if (all.i64(0) != level) return true;
            ++ofLevel;
            const RowValues v = all.from(1);
            r.device = v.i64(0);
            r.address = v.u64(1);
            r.size = v.u64(2);
            r.requestedSize = optU64(v, 3);
            r.stream = optI64(v, 4);
            r.allocNs = v.i64(5);
            r.freeNs = optI64(v, 6);
            r.tag = optI64(v, 7);
            r.regionId = optI64(v, 8);
            r.stack = optI64(v, 9);
            r.userMetadata = optI64(v, 10);
            r.compileContext = optI64(v, 11);
            return visit(r);
        });
    return ofLevel;
}

std::string allocationTag(const Session& s, int64_t id)
{
    Stmt st = SessionAccess::db(s).prepare("SELECT COALESCE(s.text, '') FROM allocations a"
                                           " LEFT JOIN strings s ON s.id = a.tag WHERE a.id = ?1");
    st.bind(1, id);
    return st.step() ? st.text(0) : std::string();
}

} // namespace fs::store
