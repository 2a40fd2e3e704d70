// CUDA graphs (docs/analysis.md "Graphs and pools"): graphs from their captures, execs and
// launches; replays with their durations and the allocator state at their start; the health
// counts. Pools, re-captures and the sharing candidates are in graph_pools.cpp.
#include "graph_pools.h"
#include "parallel.h"
#include "stage_timer.h"

#include "core/store/graphs.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include <fmt/format.h>

namespace fs::analysis {

using store::GraphCaptureRow;
using store::GraphExecRow;
using store::GraphKernelRow;
using store::GraphLaunchRecord;
using store::GraphRows;

namespace {

// (device, id) as one map key.
struct DevKey
{
    uint32_t device;
    uint64_t id;
    bool operator==(const DevKey&) const = default;
};
struct DevKeyHash
{
    size_t operator()(const DevKey& k) const noexcept
    {
        return std::hash<uint64_t>{}(k.id * 0x9e3779b97f4a7c15ULL ^ k.device);
    }
};
template <class V> using DevMap = std::unordered_map<DevKey, V, DevKeyHash>;

// Graph identity: captures with one name are one graph; otherwise a CUDA graph id is one.
class GraphTable
{
public:
    explicit GraphTable(std::vector<GraphInfo>& graphs) : graphs_(graphs) {}
    uint32_t byName(uint32_t device, const std::string& name)
    {
        auto [it, added] = names_.try_emplace({device, name}, 0);
        if (added) {
            it->second = static_cast<uint32_t>(graphs_.size());
            graphs_.emplace_back();
            graphs_.back().device = device;
            graphs_.back().name = name;
        }
        return it->second;
    }
    // The graph a CUDA graph id belongs to, made "graph <id>" when no capture named it.
    uint32_t byId(uint32_t device, int64_t graphId)
    {
        auto it = ids_.find({device, static_cast<uint64_t>(graphId)});
        if (it != ids_.end()) return it->second;
        const uint32_t g = byName(device, graphId != 0 ? fmt::format("graph {}", graphId)
                                                       : std::string("unknown graph"));
        bind(device, graphId, g);
        return g;
    }
    void bind(uint32_t device, int64_t graphId, uint32_t g)
    {
        if (graphId == 0) return;
        ids_[{device, static_cast<uint64_t>(graphId)}] = g;
        auto& v = graphs_[g].graphIds;
        if (std::find(v.begin(), v.end(), graphId) == v.end()) v.push_back(graphId);
    }

private:
    std::vector<GraphInfo>& graphs_;
    std::map<std::pair<uint32_t, std::string>, uint32_t> names_;
    DevMap<uint32_t> ids_;
};

void addExec(GraphInfo& g, uint64_t exec)
{
    if (exec != 0 && std::find(g.execIds.begin(), g.execIds.end(), exec) == g.execIds.end())
        g.execIds.push_back(exec);
}

} // namespace

const char* poolSourceName(PoolSource s)
{
    switch (s) {
    case PoolSource::Recorded:
        return "recorded";
    case PoolSource::Allocations:
        return "allocations";
    case PoolSource::Unknown:
        break;
    }
    return "unknown";
}

DurationStats durationStats(const std::vector<int64_t>& durations)
{
    DurationStats s;
    s.count = static_cast<int64_t>(durations.size());
    if (durations.empty()) return s;
    double sum = 0, jitter = 0;
    for (size_t i = 0; i < durations.size(); ++i) {
        sum += static_cast<double>(durations[i]);
        if (i > 0) jitter += std::abs(static_cast<double>(durations[i] - durations[i - 1]));
    }
    s.mean = sum / static_cast<double>(durations.size());
    s.jitter = durations.size() > 1 ? jitter / static_cast<double>(durations.size() - 1) : 0;
    std::vector<int64_t> v = durations;
    std::sort(v.begin(), v.end());
    // Nearest rank: the p-th percentile is the value at rank ceil(p/100 * n) (1-based).
    auto rank = [&](int p) {
        const size_t n = v.size();
        const size_t r = (static_cast<size_t>(p) * n + 99) / 100;
        return v[std::clamp<size_t>(r, 1, n) - 1];
    };
    s.p50 = rank(50);
    s.p99 = rank(99);
    s.max = v.back();
    return s;
}

GraphHealth graphHealth(const GraphRows& rows, const std::map<std::string, int64_t>& anomalies)
{
    GraphHealth h;
    h.launches = static_cast<int64_t>(rows.launches.size());
    h.instantiationsRecorded = !rows.execs.empty();
    auto count = [&](std::string_view kind) {
        auto it = anomalies.find(std::string(kind));
        return it == anomalies.end() ? int64_t{0} : it->second;
    };
    h.execsDestroyedTwice = count(anomaly::GraphExecDestroyedTwice);
    h.unknownExecDestroys = count(anomaly::UnknownGraphExec);
    h.poolsOnlyInFrees = count(anomaly::UnknownPool);
    // Instantiated execs: a launch of any other exec (or of none) had no instantiation.
    DevMap<bool> instantiated;
    for (const GraphExecRow& x : rows.execs)
        instantiated[{x.device, x.execId}] = true;
    // A replay that starts before the previous replay of the same exec (graph, when the exec
    // is unknown) ended overlaps itself: one executable graph cannot run twice at once.
    DevMap<int64_t> lastEnd;
    for (const GraphLaunchRecord& l : rows.launches) {
        if (l.execId == 0 || !instantiated.count({l.device, l.execId}))
            ++h.launchesWithoutInstantiation;
        const DevKey key{l.device, l.execId != 0 ? l.execId : static_cast<uint64_t>(l.graphId)};
        auto [it, added] = lastEnd.try_emplace(key, l.end);
        if (!added) {
            if (l.start < it->second) ++h.selfOverlappingReplays;
            it->second = std::max(it->second, l.end);
        }
    }
    return h;
}

const PoolInfo* GraphsReport::poolOf(const GraphInfo& g) const
{
    if (!g.poolKnown()) return nullptr;
    const PoolInfo* found = nullptr;
    for (const PoolInfo& p : pools)
        if (p.device == g.device && p.pool == g.pool &&
            (!found || p.level == Level::Framework)) // PyTorch's pool before a CUDA mempool
            found = &p;
    return found;
}

std::string graphPoolLabel(const GraphInfo& g)
{
    return g.poolKnown() ? poolLabel(g.pool, Level::Framework) : "unknown";
}

GraphsSummary summarize(const GraphsReport& r)
{
    GraphsSummary s;
    s.graphs = static_cast<int64_t>(r.graphs.size());
    for (const GraphInfo& g : r.graphs)
        s.recaptures += static_cast<int64_t>(g.recaptures.size());
    s.replays = static_cast<int64_t>(r.replays.size());
    for (const PoolInfo& p : r.pools) {
        if (p.pool == 0) continue;
        ++s.privatePools;
        s.privatePoolReservedBytes += p.reservedBytes;
    }
    s.sharingGroups = static_cast<int64_t>(r.sharing.size());
    s.sharingComputed = r.sharingAll.computed;
    s.peakReservedSavedBytes = r.sharingAll.peakReservedSavedBytes;
    s.healthProblems = r.health.total();
    return s;
}

GraphsReport Engine::graphs(bool replayDetail) const
{
    GraphsReport r;
    r.caveats = d_->resultCaveats();
    // A connection of its own: a long run's graph kernels take a while to read, and the engine's
    // lookups (the GUI's kernel lane, tooltips) must not wait for them.
    const Session session = Session::open(d_->path, false, SQLITE_OPEN_NOMUTEX);
    const GraphRows rows = store::readGraphRows(session);
    r.health = graphHealth(rows, d_->summary.health.anomalies);

    GraphTable table(r.graphs);
    for (const GraphCaptureRow& c : rows.captures) {
        const uint32_t g =
            c.name.empty() ? table.byId(c.device, c.graphId) : table.byName(c.device, c.name);
        table.bind(c.device, c.graphId, g);
        GraphInfo& gi = r.graphs[g];
        gi.captures.push_back({c.begin, c.end, c.graphId, c.stream, c.pool});
        if (gi.capturedAt == kNoTime) gi.capturedAt = c.begin;
        gi.captureNs = c.end - c.begin;
    }
    DevMap<uint32_t> execGraph; // exec -> graph index
    DevMap<int64_t> execCudaGraph;
    for (const GraphExecRow& x : rows.execs) {
        const uint32_t g = table.byId(x.device, x.graphId);
        execGraph[{x.device, x.execId}] = g;
        execCudaGraph[{x.device, x.execId}] = x.graphId;
        GraphInfo& gi = r.graphs[g];
        addExec(gi, x.execId);
        if (gi.instantiatedAt == kNoTime) gi.instantiatedAt = x.instantiated;
    }

    // Launches -> replays. A launch's CUDA graph is its own record's, else its exec's.
    std::vector<int64_t> cudaGraph(rows.launches.size());
    r.replays.reserve(rows.launches.size());
    for (size_t i = 0; i < rows.launches.size(); ++i) {
        const GraphLaunchRecord& l = rows.launches[i];
        int64_t gid = l.graphId;
        if (gid == 0) {
            auto it = execCudaGraph.find({l.device, l.execId});
            if (it != execCudaGraph.end()) gid = it->second;
        }
        cudaGraph[i] = gid;
        uint32_t g = 0;
        auto it = l.execId != 0 ? execGraph.find({l.device, l.execId}) : execGraph.end();
        if (it != execGraph.end())
            g = it->second;
        else
            g = table.byId(l.device, gid);
        addExec(r.graphs[g], l.execId);
        ++r.graphs[g].launches;
        GraphReplay rp;
        rp.start = l.start;
        rp.end = l.start; // the last kernel's end, else the record's (below)
        rp.exec = l.execId;
        rp.graph = g;
        rp.stream = l.stream;
        rp.fragmentation = std::nan("");
        r.replays.push_back(rp);
    }
    // Each graph kernel belongs to the latest launch of its graph (on its device) that started
    // at or before it: found by binary search among that graph's launches, so the kernels may
    // come in any order and are never kept.
    std::vector<int64_t> lastEnd(r.replays.size(), kNoTime);
    if (replayDetail) {
        DevMap<std::vector<uint32_t>> launchesOf; // (device, CUDA graph) -> launches by start
        for (size_t i = 0; i < rows.launches.size(); ++i)
            launchesOf[{rows.launches[i].device, static_cast<uint64_t>(cudaGraph[i])}].push_back(
                static_cast<uint32_t>(i));
        store::forEachGraphKernel(session, [&](const GraphKernelRow& k) {
            auto it = launchesOf.find({k.device, static_cast<uint64_t>(k.graphId)});
            if (it == launchesOf.end()) return;
            const std::vector<uint32_t>& v = it->second;
            auto p = std::upper_bound(v.begin(), v.end(), k.start, [&](int64_t t, uint32_t i) {
                return t < rows.launches[i].start;
            });
            if (p == v.begin()) return; // before the graph's first launch
            int64_t& end = lastEnd[*std::prev(p)];
            end = std::max(end, k.end);
        });
    }
    for (size_t i = 0; i < r.replays.size(); ++i)
        r.replays[i].end = lastEnd[i] != kNoTime ? lastEnd[i] : rows.launches[i].end;

    // The allocator state of each device's default track at every replay's start.
    std::map<uint32_t, std::vector<size_t>> byDevice;
    for (size_t i = 0; i < r.replays.size(); ++i)
        byDevice[rows.launches[i].device].push_back(i);
    for (const auto& [device, idx] : byDevice) {
        if (!replayDetail) break;
        const std::optional<Track> tr = defaultTrack(device);
        if (!tr) continue;
        const TrackData* td = d_->track(device, tr->level);
        if (!td) continue;
        Replayer rp(*td);
        for (size_t i : idx) {
            GraphReplay& g = r.replays[i];
            rp.advanceTo(g.start);
            g.fragmentation = rp.state().ratio();
            g.largestFree = rp.state().largest();
        }
    }

    // Per graph: duration figures and their correlation with the state at start.
    std::vector<std::vector<size_t>> ofGraph(r.graphs.size());
    for (size_t i = 0; i < r.replays.size(); ++i)
        ofGraph[r.replays[i].graph].push_back(i);
    StageTimer stage{"graphs"};
    for (size_t g = 0; g < r.graphs.size(); ++g) {
        std::vector<int64_t> dur;
        std::vector<double> d, f, largest;
        for (size_t i : ofGraph[g]) {
            const GraphReplay& rp = r.replays[i];
            dur.push_back(rp.duration());
            d.push_back(static_cast<double>(rp.duration()));
            f.push_back(rp.fragmentation);
            largest.push_back(std::isnan(rp.fragmentation) ? std::nan("")
                                                           : static_cast<double>(rp.largestFree));
        }
        GraphInfo& gi = r.graphs[g];
        gi.replay = durationStats(dur);
        // Each correlation tests the changes of up to a million replays: the two on two cores.
        forEachChunk(2, parallelChunks(d.size(), 10'000), [&](size_t, size_t begin, size_t end) {
            for (size_t which = begin; which < end; ++which)
                // Lag 0 only: a replay's duration against the state at its own start.
                (which == 0 ? gi.vsFragmentation : gi.vsLargestFree) =
                    correlate(d, which == 0 ? f : largest, 0);
        });
        gi.vsFragmentation.allocatorMetric = "fragmentation_ratio";
        gi.vsFragmentation.frameMetric = "replay_ns";
        gi.vsLargestFree.allocatorMetric = "largest_free_bytes";
        gi.vsLargestFree.frameMetric = "replay_ns";
    }
    stage("replay figures and correlations");
    GraphPools(*this, *d_, r).run();
    stage("pools");
    for (const GraphInfo& g : r.graphs)
        r.health.graphsWithUnknownPool += g.poolKnown() ? 0 : 1;
    if (r.health.launchesWithoutInstantiation > 0 && !r.health.instantiationsRecorded)
        r.notes.push_back("the source records no graph instantiations: launches name their "
                          "graph only by its id");
    return r;
}

} // namespace fs::analysis
