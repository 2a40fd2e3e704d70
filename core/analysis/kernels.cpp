// Kernel and graph launches starting in a time window (the kernel lane): rows of the session,
// looked up under the engine's database lock through the start-time indexes.
#include "engine_impl.h"

#include "core/store/kernels.h"

#include <algorithm>

namespace fs::analysis {

std::vector<KernelSpan> Engine::kernelSpans(int64_t from, int64_t to, size_t limit) const
{
    // Kernels starting in [from, to], one (device, start_ns) index range per device: a window
    // costs the kernels in it, not a scan of the table.
    std::vector<KernelSpan> out;
    std::lock_guard lock(d_->dbMutex);
    if (!d_->session) return out;
    std::vector<int64_t> devices{0};
    for (const DeviceInfo& dv : d_->summary.devices)
        if (dv.id != 0) devices.push_back(dv.id);
    store::KernelSpans spans(*d_->session);
    std::vector<store::KernelSpanRow> rows;
    for (int64_t device : devices)
        spans.append(device, from, to, static_cast<int64_t>(limit), rows);
    out.reserve(rows.size());
    for (store::KernelSpanRow& k : rows)
        out.push_back(
            {k.startNs, k.endNs, std::move(k.name), static_cast<uint32_t>(k.stream), k.graphId});
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
    for (const store::GraphLaunchRow& g : store::graphLaunchesIn(*d_->session, from, to))
        out.push_back({g.startNs, g.endNs, static_cast<int64_t>(g.graphId.value_or(0))});
    return out;
}

} // namespace fs::analysis
