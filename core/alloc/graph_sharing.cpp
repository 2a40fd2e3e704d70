#include "graph_sharing.h"

#include "replay.h"

#include "core/analysis/engine.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

namespace fs::alloc {

namespace {

// One device's requests, taken out of the session's trace once (a long run's million requests are
// not copied per replay) and replayed with their pools merged.
struct OneDevice
{
    Trace trace;                // the device alone: without a sink the replay reads only it
    std::vector<int32_t> pools; // each request's model pool as recorded
};

OneDevice takeDevice(Trace& trace, size_t device)
{
    OneDevice o;
    o.trace.recorded = trace.recorded;
    o.trace.devices.push_back(std::move(trace.devices[device]));
    o.pools.reserve(o.trace.devices.front().requests.size());
    for (const Request& r : o.trace.devices.front().requests)
        o.pools.push_back(r.pool);
    return o;
}

// The peak reserved bytes of the device's replay with `merge` applied to its requests' pools
// (merge[i]: the model pool that model pool i becomes).
uint64_t replayPeak(OneDevice& o, const std::vector<int32_t>& merge,
                    const std::atomic<bool>* cancel)
{
    DeviceTrace& d = o.trace.devices.front();
    for (size_t i = 0; i < d.requests.size(); ++i) {
        const int32_t p = o.pools[i];
        d.requests[i].pool = p >= 0 && static_cast<size_t>(p) < merge.size() ? merge[p] : p;
    }
    ReplayOptions ro;
    ro.config = o.trace.recorded;
    ro.cancel = cancel;
    // The memory the recording had, as `whatif` gives its recorded run.
    ro.deviceCapacity[d.device] = d.usableBytes ? d.usableBytes : d.capacityBytes;
    return replay(o.trace, ro).front().peakReserved;
}

} // namespace

void computeSharing(analysis::GraphsReport& r, Trace trace, const std::atomic<bool>* cancel)
{
    analysis::SharingSummary& all = r.sharingAll;
    all = {};
    if (r.sharing.empty()) {
        all.note = "no two private pools have graphs that never replay concurrently";
        return;
    }
    std::vector<int32_t> identity(trace.poolIds.size());
    for (size_t i = 0; i < identity.size(); ++i)
        identity[i] = static_cast<int32_t>(i);
    auto modelPool = [&](uint64_t pool) {
        auto it = std::find(trace.poolIds.begin(), trace.poolIds.end(), pool);
        return it == trace.poolIds.end() ? -1 : static_cast<int32_t>(it - trace.poolIds.begin());
    };
    std::map<uint32_t, size_t> deviceIndex;
    for (size_t i = 0; i < trace.devices.size(); ++i)
        deviceIndex[trace.devices[i].device] = i;
    std::map<uint32_t, OneDevice> taken;                // the devices some group replays
    std::map<uint32_t, std::vector<int32_t>> mergedAll; // every group of a device merged
    std::map<uint32_t, std::vector<const analysis::SharingGroup*>> computed; // per device
    std::map<uint32_t, uint64_t> before;
    bool missing = false;
    for (analysis::SharingGroup& g : r.sharing) {
        auto dev = deviceIndex.find(g.device);
        std::vector<int32_t> ids;
        for (uint64_t p : g.pools)
            ids.push_back(modelPool(p));
        if (dev == deviceIndex.end() || std::count(ids.begin(), ids.end(), -1) > 0) {
            missing = true; // a pool without requests: nothing to replay
            continue;
        }
        auto [one, first] = taken.try_emplace(g.device);
        if (first) {
            one->second = takeDevice(trace, dev->second);
            before[g.device] = replayPeak(one->second, identity, cancel);
        }
        std::vector<int32_t> merge = identity;
        auto [it, added] = mergedAll.try_emplace(g.device, identity);
        for (int32_t id : ids) {
            merge[static_cast<size_t>(id)] = ids.front();
            it->second[static_cast<size_t>(id)] = ids.front();
        }
        g.peakReservedBefore = before[g.device];
        g.peakReservedAfter = replayPeak(one->second, merge, cancel);
        g.peakReservedSavedBytes =
            static_cast<int64_t>(g.peakReservedBefore) - static_cast<int64_t>(g.peakReservedAfter);
        g.computed = true;
        computed[g.device].push_back(&g);
    }
    if (mergedAll.empty()) {
        all.note = "the session has no allocation requests in these pools: not computed";
        return;
    }
    all.computed = true;
    all.reproduced = true;
    for (const auto& [device, merge] : mergedAll) {
        OneDevice& one = taken.at(device);
        const uint64_t recorded = one.trace.devices.front().recordedPeakReserved;
        all.recordedPeakReserved += recorded;
        all.reproduced &= before[device] == recorded;
        all.peakReservedBefore += before[device];
        // One group on the device: merging every group is merging that one (replayed already).
        const auto& groups = computed[device];
        all.peakReservedAfter +=
            groups.size() == 1 ? groups.front()->peakReservedAfter : replayPeak(one, merge, cancel);
    }
    all.peakReservedSavedBytes =
        static_cast<int64_t>(all.peakReservedBefore) - static_cast<int64_t>(all.peakReservedAfter);
    all.note = fmt::format(
        "computed by fragscope's allocator model: the recorded requests replayed with each "
        "group's pools merged, against the same replay with the pools as recorded{}{}",
        all.reproduced ? " (which peaks where the recording does)"
                       : " (which does not peak where the recording does: read the savings as "
                         "the model's)",
        missing ? "; groups with a pool that made no request are left out" : "");
}

analysis::GraphsReport graphsReport(const analysis::Engine& e, const std::atomic<bool>* cancel,
                                    bool replayDetail)
{
    analysis::GraphsReport r = e.graphs(replayDetail);
    if (r.sharing.empty()) {
        computeSharing(r, Trace{}, cancel);
        return r;
    }
    computeSharing(r, readTrace(e.path()), cancel);
    return r;
}

void addGraphsSummary(analysis::Report& r, const analysis::Engine& e,
                      const std::atomic<bool>* cancel)
{
    r.graphs = analysis::summarize(graphsReport(e, cancel, false));
}

} // namespace fs::alloc
