#include "regions.h"

#include "session_access.h"

namespace fs::store {

namespace {

constexpr const char* kRegionSelect = "SELECT id, device, level, kind, address, size, create_ns,"
                                      " destroy_ns, stream, pool_id, expandable FROM regions";

} // namespace

RegionRows RegionRows::byCreation(const Session& s)
{
    return RegionRows(
        SessionAccess::db(s).prepare(std::string(kRegionSelect) + " ORDER BY create_ns, id"));
}

RegionRows RegionRows::newerThan(const Session& s, int64_t lastId)
{
    Stmt st = SessionAccess::db(s).prepare(
        std::string(kRegionSelect) + " WHERE id > ?1 AND expandable = 0 ORDER BY create_ns, id");
    st.bind(1, lastId);
    return RegionRows(std::move(st));
}

RegionRows RegionRows::all(const Session& s)
{
    return RegionRows(SessionAccess::db(s).prepare(kRegionSelect));
}

RegionRows RegionRows::ofLevel(const Session& s, int level)
{
    Stmt st =
        SessionAccess::db(s).prepare(std::string(kRegionSelect) + " WHERE level = ?1 ORDER BY id");
    st.bind(1, level);
    return RegionRows(std::move(st));
}

bool RegionRows::next(RegionRow& r)
{
    if (!st_.step()) return false;
    r.id = st_.i64(0);
    r.device = st_.i64(1);
    r.level = st_.i64(2);
    r.kind = st_.i64(3);
    r.address = st_.u64(4);
    r.size = st_.u64(5);
    r.createNs = st_.i64(6);
    r.destroyNs = optI64(st_, 7);
    r.stream = optI64(st_, 8);
    r.poolId = optI64(st_, 9);
    r.expandable = st_.i64(10) != 0;
    return true;
}

std::vector<std::pair<int64_t, int64_t>> regionReleases(const Session& s, int64_t upToId)
{
    Stmt st = SessionAccess::db(s).prepare("SELECT id, destroy_ns FROM regions WHERE destroy_ns IS"
                                           " NOT NULL AND expandable = 0 AND id <= ?1");
    st.bind(1, upToId);
    std::vector<std::pair<int64_t, int64_t>> out;
    while (st.step())
        out.emplace_back(st.i64(0), st.i64(1));
    return out;
}

std::vector<std::pair<int64_t, uint64_t>> regionPools(const Session& s, int64_t device,
                                                      int64_t level)
{
    Stmt st = SessionAccess::db(s).prepare(
        "SELECT id, COALESCE(pool_id, 0) FROM regions WHERE device=?1 AND level=?2");
    st.bind(1, device).bind(2, level);
    std::vector<std::pair<int64_t, uint64_t>> out;
    while (st.step())
        out.emplace_back(st.i64(0), st.u64(1));
    return out;
}

bool levelHasExpandableRegion(const Session& s, int level, int vmmKind)
{
    Stmt q = SessionAccess::db(s).prepare(
        "SELECT EXISTS(SELECT 1 FROM regions WHERE level = ?2 AND (kind = ?1 OR expandable != 0))");
    q.bind(1, vmmKind).bind(2, level);
    return q.step() && q.i64(0) != 0;
}

std::string expandableRegionsStamp(const Session& s)
{
    const Db& db = SessionAccess::db(s);
    std::string stamp =
        db.scalarText("SELECT COUNT(*) || ',' || COALESCE(MAX(id), 0) || ',' ||"
                      " COALESCE(SUM(destroy_ns), 0) FROM regions WHERE expandable != 0");
    if (db.hasTable("region_mappings"))
        stamp += "|" + db.scalarText("SELECT COUNT(*) || ',' || COALESCE(SUM(unmap_ns), 0) FROM"
                                     " region_mappings");
    return stamp;
}

std::vector<RegionMappingRow> expandableMappings(const Session& s)
{
    const Db& db = SessionAccess::db(s);
    std::vector<RegionMappingRow> out;
    if (!db.hasTable("region_mappings")) return out;
    Stmt st = db.prepare("SELECT m.region_id, r.device, m.address, m.size, m.map_ns, m.unmap_ns"
                         " FROM region_mappings m JOIN regions r ON r.id = m.region_id"
                         " WHERE r.expandable != 0");
    while (st.step())
        out.push_back({st.i64(0), st.i64(1), st.u64(2), st.u64(3), st.i64(4), optI64(st, 5)});
    return out;
}

std::vector<RegionMappingRow> mappingsOfLevel(const Session& s, int level)
{
    Stmt st = SessionAccess::db(s).prepare(
        "SELECT m.region_id, r.device, m.address, m.size, m.map_ns, m.unmap_ns"
        " FROM region_mappings m JOIN regions r ON r.id = m.region_id WHERE r.level = ?1"
        " ORDER BY m.id");
    st.bind(1, level);
    std::vector<RegionMappingRow> out;
    while (st.step())
        out.push_back({st.i64(0), st.i64(1), st.u64(2), st.u64(3), st.i64(4), optI64(st, 5)});
    return out;
}

} // namespace fs::store
