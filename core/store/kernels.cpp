#include "kernels.h"

#include "session_access.h"
#include "table_scan.h"

#include <limits>

namespace fs::store {

namespace {
// Every row: the whole rowid range.
constexpr int64_t kFirstId = std::numeric_limits<int64_t>::min();
constexpr int64_t kLastId = std::numeric_limits<int64_t>::max();
} // namespace

// Every row in id order (the rowid), read from the table's pages (visitTableRows).
int64_t KernelRows::all(const Session& s, const KernelVisitor& visit)
{
    KernelRow r;
    return visitTableRows(
        SessionAccess::db(s), "kernels",
        "id, device, stream, start_ns, end_ns, name, correlation_id, grid_x, grid_y, grid_z,"
        " block_x, block_y, block_z, graph_id, graph_node_id",
        kFirstId, kLastId, [&](const RowValues& v) {
            r.id = v.i64(0);
            r.device = v.i64(1);
            r.stream = optI64(v, 2);
            r.startNs = v.i64(3);
            r.endNs = v.i64(4);
            r.name = v.i64(5);
            r.correlationId = optU64(v, 6);
            for (int k = 0; k < 3; ++k) {
                r.grid[k] = v.i64(7 + k);
                r.block[k] = v.i64(10 + k);
            }
            r.graphId = optU64(v, 13);
            r.graphNodeId = optU64(v, 14);
            return visit(r);
        });
}

int64_t KernelRows::names(const Session& s, const KernelVisitor& visit)
{
    KernelRow r;
    return visitTableRows(SessionAccess::db(s), "kernels", "device, name, start_ns", kFirstId,
                          kLastId, [&](const RowValues& v) {
                              r.device = v.i64(0);
                              r.name = v.i64(1);
                              r.startNs = v.i64(2);
                              return visit(r);
                          });
}

int64_t KernelRows::startingIn(const Session& s, int64_t from, int64_t to,
                               const KernelVisitor& visit)
{
    // Every row (names), the range compared here: no index leads with start_ns, so SQLite scans
    // the table either way, and its own comparison cost a fifth more than the scan (33 M
    // kernels: 2.28 -> 2.79 s in the sqlite3 shell).
    int64_t inRange = 0;
    names(s, [&](const KernelRow& r) {
        if (r.startNs < from || r.startNs >= to) return true;
        ++inRange;
        return visit(r);
    });
    return inRange;
}

std::vector<LaunchRow> launchesIn(const Session& s, int64_t device, int64_t from, int64_t to)
{
    Stmt st = SessionAccess::db(s).prepare(
        "SELECT start_ns, end_ns, name, stream, graph_id, graph_node_id FROM kernels"
        " WHERE device = ?1 AND start_ns >= ?2 AND start_ns < ?3 ORDER BY start_ns, id");
    st.bind(1, device).bind(2, from).bind(3, to);
    std::vector<LaunchRow> out;
    while (st.step())
        out.push_back(
            {st.i64(0), st.i64(1), st.i64(2), optI64(st, 3), optU64(st, 4), optU64(st, 5)});
    return out;
}

KernelSpans::KernelSpans(const Session& s)
    : st_(SessionAccess::db(s).prepare(
          "SELECT k.start_ns, k.end_ns, COALESCE(s.text, ''), COALESCE(k.stream, 0),"
          " COALESCE(k.graph_id, 0) FROM kernels k LEFT JOIN strings s"
          " ON s.id = k.name WHERE k.device = ?3 AND k.start_ns >= ?1"
          " AND k.start_ns <= ?2 ORDER BY k.start_ns LIMIT ?4"))
{
}

void KernelSpans::append(int64_t device, int64_t from, int64_t to, int64_t limit,
                         std::vector<KernelSpanRow>& out)
{
    st_.reset();
    st_.bind(1, from).bind(2, to).bind(3, device).bind(4, limit);
    while (st_.step())
        out.push_back({st_.i64(0), st_.i64(1), st_.text(2), st_.i64(3), st_.i64(4)});
}

std::vector<int64_t> kernelDevices(const Session& s)
{
    Stmt st = SessionAccess::db(s).prepare("SELECT DISTINCT device FROM kernels");
    std::vector<int64_t> out;
    while (st.step())
        out.push_back(st.i64(0));
    return out;
}

std::optional<int64_t> previousKernelStart(const Session& s, int64_t device, int64_t stream,
                                           int64_t t, int64_t name)
{
    // Newest first along the (device, start_ns) index: stops at the first match.
    Stmt st = SessionAccess::db(s).prepare(
        name < 0 ? "SELECT start_ns FROM kernels WHERE device=?1 AND start_ns < ?2 AND "
                   "COALESCE(stream, 0)=?3 ORDER BY start_ns DESC LIMIT 1"
                 : "SELECT start_ns FROM kernels WHERE device=?1 AND start_ns < ?2 AND "
                   "COALESCE(stream, 0)=?3 AND name=?4 ORDER BY start_ns DESC LIMIT 1");
    st.bind(1, device).bind(2, t).bind(3, stream);
    if (name >= 0) st.bind(4, name);
    if (!st.step()) return std::nullopt;
    return st.i64(0);
}

namespace {

constexpr const char* kGraphSelect =
    "SELECT id, device, stream, graph_id, exec_id, start_ns, end_ns FROM graph_launches";

std::vector<GraphLaunchRow> graphRows(Stmt& st)
{
    std::vector<GraphLaunchRow> out;
    while (st.step())
        out.push_back({st.i64(0), st.i64(1), optI64(st, 2), optU64(st, 3), optU64(st, 4), st.i64(5),
                       st.i64(6)});
    return out;
}

} // namespace

std::vector<GraphLaunchRow> graphLaunches(const Session& s)
{
    Stmt st = SessionAccess::db(s).prepare(std::string(kGraphSelect) + " ORDER BY id");
    return graphRows(st);
}

std::vector<GraphLaunchRow> graphLaunchesIn(const Session& s, int64_t from, int64_t to)
{
    Stmt st = SessionAccess::db(s).prepare(std::string(kGraphSelect) +
                                           " WHERE start_ns >= ?1 AND start_ns <= ?2 ORDER BY"
                                           " start_ns");
    st.bind(1, from).bind(2, to);
    return graphRows(st);
}

} // namespace fs::store
