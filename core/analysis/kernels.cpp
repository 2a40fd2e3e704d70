// Kernel and graph launches starting in a time window (the kernel lane): rows of the session,
// looked up under the engine's database lock through the start-time indexes.
#include "engine_impl.h"

#include <algorithm>

namespace fs::analysis {

std::vector<KernelSpan> Engine::kernelSpans(int64_t from, int64_t to, size_t limit) const
{
    // Kernels starting in [from, to], one (device, start_ns) index range per device: a window
    // costs the kernels in it, not a scan of the table.
    std::vector<KernelSpan> out;
    std::lock_guard lock(d_->dbMutex);
    if (!d_->session) return out;
    Db& db = d_->session->db();
    std::vector<int64_t> devices{0};
    for (const DeviceInfo& dv : d_->summary.devices)
        if (dv.id != 0) devices.push_back(dv.id);
    Stmt st = db.prepare("SELECT k.start_ns, k.end_ns, COALESCE(s.text, ''), COALESCE(k.stream, 0),"
                         " COALESCE(k.graph_id, 0) FROM kernels k LEFT JOIN strings s"
                         " ON s.id = k.name WHERE k.device = ?3 AND k.start_ns >= ?1"
                         " AND k.start_ns <= ?2 ORDER BY k.start_ns LIMIT ?4");
    for (int64_t device : devices) {
        st.reset();
        st.bind(1, from).bind(2, to).bind(3, device).bind(4, static_cast<int64_t>(limit));
        while (st.step())
            out.push_back(
                {st.i64(0), st.i64(1), st.text(2), static_cast<uint32_t>(st.i64(3)), st.i64(4)});
    }
    std::stable_sort(out.begin(), out.end(),
                     [](const KernelSpan& a, const KernelSpan& b) { return a.start < b.start; });
    if (out.size() > limit) out.resize(limit);
    return out;
}

std::vector<GraphLaunchSpan> Engine::graphLaunches(int64_t from, int64_t to) const
{
    std::vector<GraphLaunchSpan> out;
    std::lock_guard lock(d_->dbMutex);
    if (!d_->session) return out;
    Stmt st = d_->session->db().prepare(
        "SELECT start_ns, end_ns, COALESCE(graph_id, 0) FROM graph_launches"
        " WHERE start_ns >= ?1 AND start_ns <= ?2 ORDER BY start_ns");
    st.bind(1, from).bind(2, to);
    while (st.step())
        out.push_back({st.i64(0), st.i64(1), st.i64(2)});
    return out;
}

} // namespace fs::analysis
