// Internal to fragscope_analysis: the pools part of Engine::graphs() (graph_pools.cpp): every
// pool's figures over time, each capture's pool and the re-captures' layout drift, and the
// pools that may share one (docs/analysis.md "Graphs and pools").
#pragma once

#include "engine_impl.h"
#include "graphs.h"

#include <map>
#include <unordered_map>

namespace fs::analysis {

class GraphPools
{
public:
    GraphPools(const Engine& e, const Engine::Impl& d, GraphsReport& r) : e_(e), d_(d), r_(r) {}
    void run();

private:
    using PoolOf = std::unordered_map<int64_t, uint64_t>; // region id -> pool id
    // The figures of every pool of one track, walking its events once.
    void trackPools(uint32_t device, Level level);
    // Each capture's pool (recorded, else where its allocations went) and each re-capture's
    // drift against the capture before.
    void capturePools(GraphInfo& g);
    void linkGraphs();
    void concurrency();
    void sharingCandidates(uint32_t device);
    // Reserved bytes of a pool just after time t (from its series; 0 without one).
    uint64_t reservedAt(uint32_t device, uint64_t pool, int64_t t) const;
    const PoolOf& poolOf(uint32_t device, Level level);

    const Engine& e_;
    const Engine::Impl& d_;
    GraphsReport& r_;
    std::map<std::pair<uint32_t, int>, PoolOf> poolOf_;
};

} // namespace fs::analysis
