// CUDA graphs and memory pools (docs/analysis.md "Graphs and pools"): what every captured graph
// and every pool holds, how the replays behave against the allocator's state, which pools could
// share one. Engine::graphs() computes it (core/analysis/graphs.cpp); the sharing what-if's
// savings come from the allocator model (core/alloc/graph_sharing.h), which fills `sharing`.
// One value for the CLI (`fragscope graphs`, `report`), the GUI's Graphs panel and the tests.
#pragma once

#include "types.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fs::store {
struct GraphRows;
}

namespace fs::analysis {

// Replay durations of one graph (nearest-rank percentiles: the p-th is the value at rank
// ceil(p/100 * n) of the sorted durations).
struct DurationStats
{
    int64_t count = 0;
    int64_t p50 = 0;
    int64_t p99 = 0;
    int64_t max = 0;
    double mean = 0;
    // Mean absolute change between the durations of consecutive replays (0 with < 2 replays).
    double jitter = 0;
};
// The figures of a list of durations (in any order; the jitter follows the given order).
DurationStats durationStats(const std::vector<int64_t>& durations);

// One replay: a graph launch, from its start to the end of the last kernel the graph ran for it
// (the launch record's own end when no kernel of it was recorded), beside the allocator state of
// the device's default track at its start.
struct GraphReplay
{
    int64_t start = 0;
    int64_t end = 0;
    double fragmentation = 0; // F at start; NaN when the device has no allocator track
    uint64_t largestFree = 0;
    uint64_t exec = 0;
    uint32_t graph = 0; // index into GraphsReport::graphs
    uint32_t stream = 0;
    int64_t duration() const { return end - start; }
};

struct GraphCapture
{
    int64_t begin = 0;
    int64_t end = 0;
    int64_t graphId = 0;
    uint32_t stream = 0;
    uint64_t pool = 0; // as recorded (0: not said)
};

// A capture against the capture before it of the same graph (docs/analysis.md "Re-captures").
struct Recapture
{
    int64_t time = 0;                  // begin of the new capture
    int64_t allocations = 0;           // allocations the new capture made (in its pool)
    int64_t previousAllocations = 0;   // ... and the capture before
    int64_t moved = 0;                 // same position in the capture, another address
    uint64_t movedBytes = 0;           // their bytes in the new capture
    int64_t heldAllocations = 0;       // the previous capture's allocations still live at `time`
    uint64_t heldBytes = 0;            // ... their bytes: memory the old capture still held
    bool samePool = true;              // the new capture went to the previous capture's pool
    uint64_t previousPoolReserved = 0; // reserved bytes of the previous pool at `time`
};

enum class PoolSource : uint8_t {
    Unknown,     // neither recorded nor seen: shown as unknown
    Recorded,    // the capture record names it
    Allocations, // the capture's allocations all landed in this one private pool
};
const char* poolSourceName(PoolSource s);

struct GraphInfo
{
    uint32_t device = 0;
    std::string name;              // the capture's name, else "graph <id>"
    std::vector<int64_t> graphIds; // CUDA graph ids, one per capture (or seen in launches)
    std::vector<uint64_t> execIds; // instantiated or launched
    std::vector<GraphCapture> captures;
    std::vector<Recapture> recaptures; // one per capture after the first
    int64_t capturedAt = kNoTime;      // first capture's begin
    int64_t captureNs = 0;             // duration of the last capture
    int64_t instantiatedAt = kNoTime;  // first instantiation
    PoolSource poolSource = PoolSource::Unknown;
    uint64_t pool = 0; // the last capture's pool (meaningful unless poolSource is Unknown)
    int64_t launches = 0;
    DurationStats replay;
    // Spearman (and Pearson) of replay duration against F and against the largest free block at
    // the replay's start, with n: "replays are slower in fragmented memory" checked.
    Correlation vsFragmentation;
    Correlation vsLargestFree;
    bool poolKnown() const { return poolSource != PoolSource::Unknown; }
};

struct PoolPoint
{
    int64_t time = 0;
    uint64_t reserved = 0;
    uint64_t allocated = 0;
};

struct PoolRegion
{
    int64_t regionId = 0;
    uint64_t address = 0;
    uint64_t size = 0;
    int64_t createNs = 0;
    int64_t destroyNs = kAlive;
};

// One memory pool of a track: PyTorch's private pools (segment_pool_id) and the default pool 0
// at the framework level, CUDA memory pools at the pool level.
struct PoolInfo
{
    uint32_t device = 0;
    Level level = Level::Framework;
    uint64_t pool = 0;
    int64_t segments = 0;        // regions alive at the end
    int64_t segmentsCreated = 0; // every region it ever had
    uint64_t reservedBytes = 0;  // at the end
    uint64_t allocatedBytes = 0; // at the end
    uint64_t peakReservedBytes = 0;
    int64_t peakTime = 0;            // first instant of the peak
    uint64_t allocatedAtPeak = 0;    // allocated bytes at that instant
    uint64_t peakAllocatedBytes = 0; // its own peak, at any time
    std::vector<uint32_t> graphs;    // indices into GraphsReport::graphs
    std::vector<PoolPoint> series;   // every change of reserved or allocated, in time order
    std::vector<PoolRegion> regions; // for the heatmap's outline
};

// Pools whose graphs never replay concurrently, merged in the what-if (docs/analysis.md
// "Sharing what-if"). The candidates come from the engine; `computed` and the bytes from the
// allocator model's replay (core/alloc/graph_sharing.h).
struct SharingGroup
{
    uint32_t device = 0;
    std::vector<uint64_t> pools;
    std::vector<uint32_t> graphs;
    bool computed = false;
    uint64_t peakReservedBefore = 0; // the model's replay with the pools as recorded
    uint64_t peakReservedAfter = 0;  // ... and with this group's pools merged
    int64_t peakReservedSavedBytes = 0;
};

struct SharingSummary
{
    bool computed = false;
    uint64_t recordedPeakReserved = 0; // of the session, summed over the devices' peaks
    uint64_t peakReservedBefore = 0;
    uint64_t peakReservedAfter = 0; // every group merged at once
    int64_t peakReservedSavedBytes = 0;
    bool reproduced = false; // the replay as recorded peaks where the recording does
    std::string note;        // why not computed, or how to read it
};

// Bad or incomplete graph input (shown in `info`'s capture health, docs/analysis.md).
struct GraphHealth
{
    int64_t launches = 0;
    bool instantiationsRecorded = false;      // the source records instantiations at all
    int64_t launchesWithoutInstantiation = 0; // of an exec no graph_execs row names
    int64_t selfOverlappingReplays = 0; // a replay starting before its exec's previous one ended
    int64_t execsDestroyedTwice = 0;    // anomalies graph_exec_destroyed_twice
    int64_t unknownExecDestroys = 0;    // anomalies unknown_graph_exec
    int64_t poolsOnlyInFrees = 0;       // anomalies unknown_pool
    int64_t graphsWithUnknownPool = 0;
    // Problems in the input. Launches without an instantiation count only when the source
    // records instantiations at all (else it is what the source is, said once in a note).
    int64_t total() const
    {
        return (instantiationsRecorded ? launchesWithoutInstantiation : 0) +
               selfOverlappingReplays + execsDestroyedTwice + unknownExecDestroys +
               poolsOnlyInFrees;
    }
};
// The counts that need no allocation index (for `info`): from the graph rows and the session's
// anomaly counts (graphsWithUnknownPool stays 0).
GraphHealth graphHealth(const store::GraphRows& rows,
                        const std::map<std::string, int64_t>& anomalies);

struct GraphsReport
{
    std::vector<GraphInfo> graphs; // by device, then first appearance
    std::vector<PoolInfo> pools;   // by device, level, pool id
    std::vector<SharingGroup> sharing;
    SharingSummary sharingAll;
    std::vector<GraphReplay> replays; // every replay, by start
    // Graph pairs (indices, ascending) that replayed concurrently at least once.
    std::vector<std::pair<uint32_t, uint32_t>> concurrent;
    GraphHealth health;
    std::vector<std::string> notes; // e.g. graphs of one pool that replay concurrently
    Caveats caveats;
    const PoolInfo* poolOf(const GraphInfo& g) const;
};

// "[a, b]"-style label of a pool of a level (poolLabel), and of a graph's pool ("unknown").
std::string graphPoolLabel(const GraphInfo& g);

// The short graphs section `report` prints (and report --json carries).
struct GraphsSummary
{
    int64_t graphs = 0;
    int64_t recaptures = 0;
    int64_t replays = 0;
    int64_t privatePools = 0;
    uint64_t privatePoolReservedBytes = 0; // at the end
    int64_t sharingGroups = 0;
    bool sharingComputed = false;
    int64_t peakReservedSavedBytes = 0;
    int64_t healthProblems = 0;
};
GraphsSummary summarize(const GraphsReport& r);

} // namespace fs::analysis
