#include "baseline.h"

#include "session_access.h"

namespace fs::store {

void writeBareAllocations(const std::string& path, const std::vector<BareAllocation>& rows)
{
    Db db(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    db.exec("PRAGMA page_size=8192");
    db.exec("PRAGMA journal_mode=WAL");
    db.exec("PRAGMA synchronous=NORMAL");
    db.exec("PRAGMA cache_size=-131072");
    db.exec("PRAGMA temp_store=MEMORY");
    db.exec("PRAGMA threads=2");
    db.exec("CREATE TABLE allocations(id INTEGER PRIMARY KEY, device INTEGER NOT NULL,"
            " level INTEGER NOT NULL, region_id INTEGER, address INTEGER NOT NULL, size INTEGER "
            "NOT NULL,"
            " requested_size INTEGER, stream INTEGER, alloc_ns INTEGER NOT NULL, free_ns INTEGER,"
            " tag INTEGER, stack INTEGER)");
    db.exec("BEGIN");
    Stmt st =
        db.prepare("INSERT INTO allocations(id, device, level, region_id, address, size, stream,"
                   " alloc_ns, free_ns) VALUES(?1,0,2,?2,?3,?4,0,?5,?6)");
    for (const auto& r : rows)
        st.bind(1, r.id)
            .bind(2, r.region)
            .bind(3, r.address)
            .bind(4, r.size)
            .bind(5, r.allocNs)
            .bind(6, r.freeNs)
            .run();
    db.exec("CREATE INDEX allocations_time ON allocations(device, level, alloc_ns)");
    db.exec("COMMIT");
    db.exec("PRAGMA journal_mode=DELETE");
}

int64_t scanAllocations(const Session& s, uint64_t& checksum)
{
    Stmt st = SessionAccess::db(s).prepare("SELECT id, device, level, region_id, address, size,"
                                           " alloc_ns, free_ns FROM allocations");
    int64_t rows = 0;
    while (st.step()) {
        checksum += st.u64(4) + st.u64(5);
        ++rows;
    }
    return rows;
}

} // namespace fs::store
