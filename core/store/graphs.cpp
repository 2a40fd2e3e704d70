#include "graphs.h"

#include "session_access.h"

#include <algorithm>

namespace fs::store {

namespace {

template <class Row> void sortByStart(std::vector<Row>& v)
{
    // Rows come in insertion order, which a time-ordered source already sorted.
    auto before = [](const Row& a, const Row& b) { return a.start < b.start; };
    if (!std::is_sorted(v.begin(), v.end(), before)) std::stable_sort(v.begin(), v.end(), before);
}

} // namespace

GraphRows readGraphRows(const Session& s)
{
    const Db& db = SessionAccess::db(s);
    GraphRows g;
    {
        Stmt q = db.prepare("SELECT start_ns, end_ns, COALESCE(graph_id, 0), COALESCE(exec_id, 0),"
                            " device, COALESCE(stream, 0) FROM graph_launches ORDER BY id");
        // No regrowth over a million replays (SQLite counts the table's pages, not its rows).
        g.launches.reserve(static_cast<size_t>(
            std::max<int64_t>(0, db.scalar("SELECT COUNT(*) FROM graph_launches"))));
        while (q.step()) {
            GraphLaunchRecord r;
            r.start = q.i64(0);
            r.end = std::max(q.i64(1), r.start);
            r.graphId = q.i64(2);
            r.execId = q.u64(3);
            r.device = static_cast<uint32_t>(q.i64(4));
            r.stream = static_cast<uint32_t>(q.i64(5));
            g.launches.push_back(r);
        }
        sortByStart(g.launches);
    }
    g.capturesRecorded = db.hasTable("graph_captures") && db.hasTable("graph_execs");
    if (!g.capturesRecorded) return g;
    {
        Stmt q = db.prepare("SELECT c.begin_ns, c.end_ns, COALESCE(c.graph_id, 0),"
                            " COALESCE(c.pool_id, 0), COALESCE(s.text, ''), c.device,"
                            " COALESCE(c.stream, 0) FROM graph_captures c"
                            " LEFT JOIN strings s ON s.id = c.name ORDER BY c.begin_ns, c.id");
        while (q.step()) {
            GraphCaptureRow r;
            r.begin = q.i64(0);
            r.end = std::max(q.i64(1), r.begin);
            r.graphId = q.i64(2);
            r.pool = q.u64(3);
            r.name = q.text(4);
            r.device = static_cast<uint32_t>(q.i64(5));
            r.stream = static_cast<uint32_t>(q.i64(6));
            g.captures.push_back(std::move(r));
        }
    }
    {
        Stmt q = db.prepare("SELECT instantiate_ns, destroy_ns, COALESCE(graph_id, 0), exec_id,"
                            " device FROM graph_execs ORDER BY instantiate_ns, id");
        while (q.step()) {
            GraphExecRow r;
            r.instantiated = q.i64(0);
            r.destroyed = q.isNull(1) ? kNoTime : q.i64(1);
            r.graphId = q.i64(2);
            r.execId = q.u64(3);
            r.device = static_cast<uint32_t>(q.i64(4));
            g.execs.push_back(r);
        }
    }
    return g;
}

void forEachGraphKernel(const Session& s, const std::function<void(const GraphKernelRow&)>& fn)
{
    Stmt q = SessionAccess::db(s).prepare("SELECT start_ns, end_ns, graph_id, device FROM kernels"
                                          " WHERE graph_id IS NOT NULL");
    GraphKernelRow r;
    while (q.step()) {
        r.start = q.i64(0);
        r.end = std::max(q.i64(1), r.start);
        r.graphId = q.i64(2);
        r.device = static_cast<uint32_t>(q.i64(3));
        fn(r);
    }
}

} // namespace fs::store
