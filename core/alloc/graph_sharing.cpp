#include "graph_sharing.h"

#include "replay.h"

#include "core/analysis/engine.h"
#include "core/analysis/parallel.h"

#include <algorithm>
#include <future>
#include <map>

#include <fmt/format.h>

namespace fs::alloc {

namespace {

// One replay of a device with `merge` applied to its requests' pools (merge[i]: the model pool
// that model pool i becomes): its peak reserved bytes. `device` is a trace of that device alone,
// taken out of the session's trace once (a long run's million requests are not copied per
// replay); without a sink the replay reads only it.
struct MergedReplay
{
    const Trace* device = nullptr;
    std::vector<int32_t> merge;
    uint64_t peak = 0;
};

uint64_t replayPeak(const Trace& one, const std::vector<int32_t>& merge,
                    const std::atomic<bool>* cancel)
{
    const DeviceTrace& d = one.devices.front();
    ReplayOptions ro;
    ro.config = one.recorded;
    ro.cancel = cancel;
    ro.poolMerge = &merge;
    // The memory the recording had, as `whatif` gives its recorded run.
    ro.deviceCapacity[d.device] = d.usableBytes ? d.usableBytes : d.capacityBytes;
    return replay(one, ro).front().peakReserved;
}

// The replays at once, on the machine's cores (each reads its device's trace, none changes it).
void runReplays(std::vector<MergedReplay>& jobs, const std::atomic<bool>* cancel)
{
    size_t requests = 0;
    for (const MergedReplay& j : jobs)
        requests += j.device->devices.front().requests.size();
    const size_t chunks = std::min(jobs.size(), analysis::parallelChunks(requests, 200'000));
    analysis::forEachChunk(jobs.size(), chunks, [&](size_t, size_t begin, size_t end) {
        for (size_t i = begin; i < end; ++i)
            jobs[i].peak = replayPeak(*jobs[i].device, jobs[i].merge, cancel);
    });
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

    // The replays to make: per device that some group replays, its pools as recorded and, with
    // more than one group, every group merged; per group, its pools merged.
    std::map<uint32_t, Trace> taken;                    // device -> a trace of it alone
    std::map<uint32_t, std::vector<int32_t>> mergedAll; // device -> every group merged
    std::vector<std::pair<analysis::SharingGroup*, std::vector<int32_t>>> groups;
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
        if (auto [one, first] = taken.try_emplace(g.device); first) {
            one->second.recorded = trace.recorded;
            one->second.devices.push_back(std::move(trace.devices[dev->second]));
        }
        std::vector<int32_t> merge = identity;
        auto& everyGroup = mergedAll.try_emplace(g.device, identity).first->second;
        for (int32_t id : ids) {
            merge[static_cast<size_t>(id)] = ids.front();
            everyGroup[static_cast<size_t>(id)] = ids.front();
        }
        groups.emplace_back(&g, std::move(merge));
    }
    if (taken.empty()) {
        all.note = "the session has no allocation requests in these pools: not computed";
        return;
    }
    std::vector<MergedReplay> jobs;
    std::map<uint32_t, size_t> beforeJob, allJob; // device -> its replay in jobs
    std::map<uint32_t, int> groupCount;
    for (const auto& [g, merge] : groups)
        ++groupCount[g->device];
    for (auto& [device, one] : taken) {
        beforeJob[device] = jobs.size();
        jobs.push_back({&one, identity});
        if (groupCount[device] > 1) { // one group: merging every group is merging that one
            allJob[device] = jobs.size();
            jobs.push_back({&one, std::move(mergedAll[device])});
        }
    }
    std::vector<size_t> groupJob;
    for (auto& [g, merge] : groups) {
        if (groupCount[g->device] == 1) allJob[g->device] = jobs.size();
        groupJob.push_back(jobs.size());
        jobs.push_back({&taken.at(g->device), std::move(merge)});
    }
    runReplays(jobs, cancel);

    for (size_t i = 0; i < groups.size(); ++i) {
        analysis::SharingGroup& g = *groups[i].first;
        g.peakReservedBefore = jobs[beforeJob[g.device]].peak;
        g.peakReservedAfter = jobs[groupJob[i]].peak;
        g.peakReservedSavedBytes =
            static_cast<int64_t>(g.peakReservedBefore) - static_cast<int64_t>(g.peakReservedAfter);
        g.computed = true;
    }
    all.computed = true;
    all.reproduced = true;
    for (const auto& [device, one] : taken) {
        const uint64_t recorded = one.devices.front().recordedPeakReserved;
        const uint64_t peakBefore = jobs[beforeJob[device]].peak;
        all.recordedPeakReserved += recorded;
        all.reproduced &= peakBefore == recorded;
        all.peakReservedBefore += peakBefore;
        all.peakReservedAfter += jobs[allJob[device]].peak;
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

// Whether some device has two private pools: only then can a sharing group exist.
bool maySharePools(const analysis::Engine& e)
{
    for (const analysis::Track& t : e.tracks()) {
        if (t.level != Level::Framework) continue;
        const std::vector<uint64_t> pools = e.pools(t.device, t.level);
        if (std::count_if(pools.begin(), pools.end(), [](uint64_t p) { return p != 0; }) >= 2)
            return true;
    }
    return false;
}

analysis::GraphsReport graphsReport(const analysis::Engine& e, const std::atomic<bool>* cancel,
                                    bool replayDetail)
{
    // When pools may share, the request stream is read on a second thread while the engine
    // computes the graphs: on a long run each takes a while, and neither needs the other.
    std::future<Trace> trace;
    if (maySharePools(e))
        trace = std::async(std::launch::async, [path = e.path()] { return readTrace(path); });
    analysis::GraphsReport r = e.graphs(replayDetail);
    if (r.sharing.empty()) {
        computeSharing(r, Trace{}, cancel);
        return r; // a trace read in vain is dropped when `trace` goes (after it is read)
    }
    computeSharing(r, trace.valid() ? trace.get() : readTrace(e.path()), cancel);
    return r;
}

void addGraphsSummary(analysis::Report& r, const analysis::Engine& e,
                      const std::atomic<bool>* cancel)
{
    r.graphs = analysis::summarize(graphsReport(e, cancel, false));
}

} // namespace fs::alloc
