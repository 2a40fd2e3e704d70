// What the simulator's CUDA-graph workloads know and a session cannot (docs/simulator.md
// "Graph workloads"): the true figures of every pool, the graphs that ran concurrently by
// construction, and what merging the pools of the graphs that never did saves. SYNTHETIC: the
// ground truth the graphs analysis is tested against, never a measurement.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fs::sim {

struct GraphTruth
{
    struct Graph
    {
        std::string name;
        uint64_t pool = 0; // session pool id (PyTorch's (a, b) as a << 32 | b)
        uint32_t stream = 0;
        int64_t captures = 0;
        int64_t replays = 0;
    };
    struct Pool
    {
        uint64_t pool = 0;
        uint64_t reservedAtEnd = 0;
        uint64_t allocatedAtEnd = 0;
        uint64_t peakReserved = 0;
        uint64_t peakAllocated = 0;
        int64_t segmentsAtEnd = 0;
        int64_t segmentsCreated = 0;
    };
    // A capture against the capture before it of the same graph: its i-th allocation is the
    // same tensor as the i-th of the capture before.
    struct Recapture
    {
        std::string graph;
        int64_t time = 0;
        int64_t allocations = 0;
        int64_t previousAllocations = 0;
        int64_t moved = 0;
        uint64_t movedBytes = 0;
        int64_t heldAllocations = 0; // the previous capture's allocations still live then
        uint64_t heldBytes = 0;
    };
    // Pools merged into one: the peak reserved bytes of the run without and with the merge.
    struct Sharing
    {
        std::vector<uint64_t> pools;
        uint64_t peakReservedBefore = 0;
        uint64_t peakReservedAfter = 0;
    };
    std::string workload;
    std::vector<Graph> graphs;
    std::vector<Pool> pools; // ascending pool id, the default pool 0 first
    std::vector<Recapture> recaptures;
    // Graph pairs (names, ascending) the workload ran at the same time at least once.
    std::vector<std::pair<std::string, std::string>> concurrent;
    std::vector<Sharing> groups; // the pools whose graphs never ran concurrently, by construction
    Sharing all;                 // every group merged at once
    // JSON text for the session's meta key sim.graphs_truth.
    std::string toJson() const;
};

} // namespace fs::sim
