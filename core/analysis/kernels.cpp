// Kernel and graph launches in a time window (the kernel lane): rows of the session, looked up
// under the engine's database lock.
#include "engine_impl.h"

namespace fs::analysis {

std::vector<KernelSpan> Engine::kernelSpans(int64_t from, int64_t to, size_t limit) const
{
    std::vector<KernelSpan> out;
    std::lock_guard lock(d_->dbMutex);
    if (!d_->session) return out;
    Db& db = d_->session->db();
    Stmt st = db.prepare("SELECT k.start_ns, k.end_ns, COALESCE(s.text, ''), COALESCE(k.stream, 0),"
                         " COALESCE(k.graph_id, 0) FROM kernels k LEFT JOIN strings s"
                         " ON s.id = k.name WHERE k.start_ns <= ?2 AND k.end_ns >= ?1"
                         " ORDER BY k.start_ns LIMIT ?3");
    st.bind(1, from).bind(2, to).bind(3, static_cast<int64_t>(limit));
    while (st.step())
        out.push_back(
            {st.i64(0), st.i64(1), st.text(2), static_cast<uint32_t>(st.i64(3)), st.i64(4)});
    return out;
}

std::vector<GraphLaunchSpan> Engine::graphLaunches(int64_t from, int64_t to) const
{
    std::vector<GraphLaunchSpan> out;
    std::lock_guard lock(d_->dbMutex);
    if (!d_->session) return out;
    Stmt st = d_->session->db().prepare(
        "SELECT start_ns, end_ns, COALESCE(graph_id, 0) FROM graph_launches"
        " WHERE start_ns <= ?2 AND end_ns >= ?1 ORDER BY start_ns");
    st.bind(1, from).bind(2, to);
    while (st.step())
        out.push_back({st.i64(0), st.i64(1), st.i64(2)});
    return out;
}

} // namespace fs::analysis
