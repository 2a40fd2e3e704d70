#include "graph_workload.h"

#include "core/json.h"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace fs::sim {

GraphWorkload::GraphWorkload(const Config& cfg, EventWriter& out,
                             std::map<uint64_t, uint64_t> merge)
    : cfg_(cfg), out_(out), rng_(cfg.seed),
      alloc_(out, cfg.capacityBytes, cfg.device, Rng::splitmix(cfg_.seed)),
      merge_(std::move(merge)), now_(cfg.startTimeNs)
{
}

std::unique_ptr<GraphWorkload> GraphWorkload::make(const Config& cfg, EventWriter& out,
                                                   std::map<uint64_t, uint64_t> merge)
{
    if (cfg.workload == WorkloadKind::DecodeGraphs)
        return makeDecodeGraphs(cfg, out, std::move(merge));
    if (cfg.workload == WorkloadKind::VideoGraphs)
        return makeVideoGraphs(cfg, out, std::move(merge));
    throw std::invalid_argument("simulator: not a graph workload");
}

uint64_t GraphWorkload::poolFor(const Graph& g) const
{
    auto it = merge_.find(g.pool);
    return it == merge_.end() ? g.pool : it->second;
}

size_t GraphWorkload::addGraph(const std::string& name, uint64_t pool, uint32_t stream)
{
    Graph g;
    g.name = name;
    g.label = out_.intern(name);
    g.pool = pool;
    g.stream = stream;
    graphs_.push_back(std::move(g));
    return graphs_.size() - 1;
}

void GraphWorkload::hostOp()
{
    now_ += 1500 + static_cast<int64_t>(rng_.below(2500));
    flush(now_);
}

void GraphWorkload::flush(int64_t upTo)
{
    while (!pending_.empty() && pending_.begin()->first <= upTo) {
        const auto [e, name] = pending_.begin()->second;
        pending_.erase(pending_.begin());
        out_.emit(e, name);
    }
}

Block* GraphWorkload::alloc(uint64_t bytes, uint32_t stream, const Name& tag)
{
    hostOp();
    Block* b = alloc_.allocate(bytes, stream, tag, now_);
    if (!b) throw std::runtime_error("simulator: a graph workload ran out of device memory");
    return b;
}

void GraphWorkload::release(Block*& b)
{
    if (!b) return;
    hostOp();
    alloc_.free(b, now_);
    b = nullptr;
}

Block* GraphWorkload::captureAlloc(uint64_t bytes, const Name& tag, bool output)
{
    Graph& g = graphs_.at(capturing_);
    hostOp();
    Block* b = alloc_.allocate(bytes, g.stream, tag, now_, poolFor(g));
    if (!b) throw std::runtime_error("simulator: a graph capture ran out of device memory");
    g.captured.push_back(b);
    g.layout.emplace_back(b->addr, b->size);
    if (output) g.outputs.push_back(b);
    return b;
}

void GraphWorkload::capture(size_t gi, int64_t budgetNs, const std::function<void()>& body)
{
    Graph& g = graphs_[gi];
    const int64_t begin = now_;
    const int64_t end = begin + budgetNs;
    const int64_t cudaGraph = nextCudaGraph_++;
    flush(begin);
    Event c;
    c.type = EventType::GraphCapture;
    c.time = begin;
    c.endTime = end;
    c.stream = g.stream;
    c.device = cfg_.device;
    c.aux = static_cast<uint64_t>(cudaGraph);
    c.aux2 = poolFor(g);
    c.name = g.label.id;
    out_.emit(c, g.label);

    // The capture before: what it allocated and which of it is still live (its outputs).
    const std::vector<std::pair<uint64_t, uint64_t>> before = std::move(g.layout);
    std::vector<Block*> oldOutputs = std::move(g.outputs);
    g.layout.clear();
    g.outputs.clear();
    g.captured.clear();
    capturing_ = gi;
    body();
    capturing_ = SIZE_MAX;
    if (now_ > end) throw std::logic_error("simulator: a graph capture overran its budget");
    now_ = end;
    flush(now_);
    ++g.captures;
    if (g.captures > 1) {
        GraphTruth::Recapture rc;
        rc.graph = g.name;
        rc.time = begin;
        rc.allocations = static_cast<int64_t>(g.layout.size());
        rc.previousAllocations = static_cast<int64_t>(before.size());
        for (size_t i = 0; i < std::min(before.size(), g.layout.size()); ++i)
            if (before[i].first != g.layout[i].first) {
                ++rc.moved;
                rc.movedBytes += g.layout[i].second;
            }
        for (const Block* b : oldOutputs) {
            ++rc.heldAllocations;
            rc.heldBytes += b->size;
        }
        recaptures_.push_back(rc);
    }

    Event inst;
    inst.type = EventType::GraphInstantiate;
    inst.time = now_;
    inst.device = cfg_.device;
    inst.aux = static_cast<uint64_t>(cudaGraph);
    inst.aux2 = nextExec_++;
    out_.emit(inst, Name{});
    if (g.exec != 0) { // the graph captured before is dropped now
        hostOp();
        Event d;
        d.type = EventType::GraphExecDestroy;
        d.time = now_;
        d.device = cfg_.device;
        d.aux2 = g.exec;
        out_.emit(d, Name{});
    }
    for (Block*& b : oldOutputs)
        release(b);
    g.cudaGraph = cudaGraph;
    g.exec = inst.aux2;
}

int64_t GraphWorkload::replay(size_t gi, int64_t start, int64_t durationNs,
                              const std::vector<std::pair<Name, double>>& kernels)
{
    Graph& g = graphs_[gi];
    ++g.replays;
    const int64_t end = start + std::max<int64_t>(durationNs, 1);
    Event l;
    l.type = EventType::GraphLaunch;
    l.time = start;
    l.endTime = end;
    l.stream = g.stream;
    l.device = cfg_.device;
    l.aux = static_cast<uint64_t>(g.cudaGraph);
    l.aux2 = g.exec;
    pending_.emplace(start, std::make_pair(l, Name{}));
    // The kernels fill the replay back to back, each its share of it; the last ends with it.
    int64_t t = start;
    double done = 0;
    uint32_t node = 0;
    for (const auto& [name, share] : kernels) {
        done += share;
        const int64_t kend = node + 1 == kernels.size()
                                 ? end
                                 : start + static_cast<int64_t>(static_cast<double>(end - start) *
                                                                std::min(done, 1.0));
        Event k;
        k.type = EventType::Kernel;
        k.time = t;
        k.endTime = std::max(kend, t + 1);
        k.name = name.id;
        k.stream = g.stream;
        k.device = cfg_.device;
        k.aux = ++correlation_;
        k.aux2 = static_cast<uint64_t>(g.cudaGraph) << 32 | node++;
        k.grid[0] = k.grid[1] = k.grid[2] = 1;
        k.block[0] = 128;
        k.block[1] = k.block[2] = 1;
        pending_.emplace(t, std::make_pair(k, name));
        t = k.endTime;
    }
    return end;
}

void GraphWorkload::concurrent(size_t a, size_t b)
{
    auto p = std::minmax(graphs_[a].name, graphs_[b].name);
    const std::pair<std::string, std::string> pair{p.first, p.second};
    if (std::find(concurrent_.begin(), concurrent_.end(), pair) == concurrent_.end())
        concurrent_.push_back(pair);
}

void GraphWorkload::teardown(std::vector<Block*>& defaultPool)
{
    for (auto it = defaultPool.rbegin(); it != defaultPool.rend(); ++it)
        release(*it);
    defaultPool.clear();
    hostOp();
    alloc_.emptyCache(now_); // releases the default pool's segments; the graphs' stay
}

GraphTruth GraphWorkload::truth() const
{
    GraphTruth t;
    t.workload = workloadName(cfg_.workload);
    for (const Graph& g : graphs_)
        t.graphs.push_back({g.name, g.pool, g.stream, g.captures, g.replays});
    for (const auto& [pool, c] : alloc_.poolCounters())
        t.pools.push_back({pool, c.reserved, c.allocated, c.peakReserved, c.peakAllocated,
                           c.liveSegments, c.segmentsCreated});
    t.recaptures = recaptures_;
    t.concurrent = concurrent_;
    std::sort(t.concurrent.begin(), t.concurrent.end());
    return t;
}

std::string GraphTruth::toJson() const
{
    JsonWriter j(false);
    j.beginObject();
    j.field("synthetic", true);
    j.field("workload", workload);
    j.key("graphs").beginArray();
    for (const Graph& g : graphs)
        j.beginObject()
            .field("graph", g.name)
            .field("pool", g.pool)
            .field("stream", g.stream)
            .field("captures", g.captures)
            .field("replays", g.replays)
            .endObject();
    j.endArray();
    j.key("pools").beginArray();
    for (const Pool& p : pools)
        j.beginObject()
            .field("pool", p.pool)
            .field("reserved_bytes", p.reservedAtEnd)
            .field("allocated_bytes", p.allocatedAtEnd)
            .field("peak_reserved_bytes", p.peakReserved)
            .field("peak_allocated_bytes", p.peakAllocated)
            .field("segments", p.segmentsAtEnd)
            .endObject();
    j.endArray();
    j.key("concurrent").beginArray();
    for (const auto& [a, b] : concurrent)
        j.beginArray().value(a).value(b).endArray();
    j.endArray();
    auto sharing = [&](const Sharing& s) {
        j.beginObject().key("pools").beginArray();
        for (uint64_t p : s.pools)
            j.value(p);
        j.endArray()
            .field("peak_reserved_before", s.peakReservedBefore)
            .field("peak_reserved_after", s.peakReservedAfter)
            .endObject();
    };
    j.key("sharing").beginArray();
    for (const Sharing& s : groups)
        sharing(s);
    j.endArray();
    j.key("sharing_all");
    sharing(all);
    j.endObject();
    return j.str();
}

namespace {

uint64_t sharedPeak(const Config& cfg, const std::vector<std::vector<uint64_t>>& groups)
{
    std::map<uint64_t, uint64_t> merge;
    for (const auto& g : groups)
        for (uint64_t p : g)
            merge[p] = g.front();
    NullSink null;
    EventWriter out(null);
    auto w = GraphWorkload::make(cfg, out, merge);
    w->run();
    w->finish();
    return w->allocator().counters().peakReserved;
}

} // namespace

Stats runGraphWorkload(const Config& cfg, EventSink& sink, const Simulator::ProgressFn& progress)
{
    EventWriter out(sink);
    if (progress) out.setProgress([&](int64_t done) { progress(done, done); });
    auto w = GraphWorkload::make(cfg, out);
    w->run();
    w->finish();
    GraphTruth truth = w->truth();
    const uint64_t peak = w->allocator().counters().peakReserved;
    const auto groups = w->sharingGroups();
    for (const auto& g : groups) {
        GraphTruth::Sharing s;
        s.pools = g;
        std::sort(s.pools.begin(), s.pools.end());
        s.peakReservedBefore = peak;
        s.peakReservedAfter = sharedPeak(cfg, {g});
        truth.groups.push_back(s);
        truth.all.pools.insert(truth.all.pools.end(), s.pools.begin(), s.pools.end());
    }
    std::sort(truth.all.pools.begin(), truth.all.pools.end());
    truth.all.peakReservedBefore = peak;
    truth.all.peakReservedAfter = groups.empty() ? peak : sharedPeak(cfg, groups);
    sink.setMeta("sim.graphs_truth", truth.toJson());

    Stats st = baseStats(out, w->allocator().counters());
    st.graphs = std::move(truth);
    if (progress) progress(st.events, st.events);
    return st;
}

} // namespace fs::sim
