// The summary of a track over the whole session, and of each of its memory pools: the one set of
// figures `report`, `compare`, `whatif`, the GUI and the exports print (docs/analysis.md
// "Summary"). Exact: every figure is taken over the state after every instant at which the
// track changes, never over samples, so no two callers can disagree.
#pragma once

#include "types.h"

#include <cstdint>
#include <vector>

namespace fs::analysis {

// Figures of one track (or pool). A state *counts* when memory is reserved in it (reserved > 0);
// every figure but the outside peak is taken over the counting states, and each *AtNs is the
// first instant at which the figure takes its value (kNoTime, JSON null, when no state counts).
struct SummaryFigures
{
    uint64_t peakReservedBytes = 0;
    int64_t peakReservedAtNs = kNoTime;
    uint64_t peakAllocatedBytes = 0; // inside regions
    int64_t peakAllocatedAtNs = kNoTime;
    // Live blocks outside any region, over every state (a track may have no regions at all).
    uint64_t peakAllocatedOutsideBytes = 0;
    int64_t peakAllocatedOutsideAtNs = kNoTime;
    // F averaged over time: each state weighs the time until the next instant (the last one's
    // until the session's end), over the time memory was reserved.
    double meanFragmentationRatio = 0;
    double maxFragmentationRatio = 0;
    int64_t maxFragmentationRatioAtNs = kNoTime;
    uint64_t minLargestFreeBytes = 0;
    int64_t minLargestFreeAtNs = kNoTime;
    int64_t maxFragmentCount = 0;
    int64_t maxFragmentCountAtNs = kNoTime;
    uint64_t finalReservedBytes = 0; // the state at the session's end
    int64_t instants = 0;        // instants at which the state changed (events at one time: one)
    int64_t countedInstants = 0; // ... of them with memory reserved after them
    int64_t reservedNs = 0;      // time with memory reserved: the mean's denominator
    bool operator==(const SummaryFigures&) const = default;
};

struct PoolSummary
{
    uint64_t pool = 0; // regions.pool_id (poolLabel names it)
    SummaryFigures figures;
};

struct TrackSummary
{
    Track track;
    SummaryFigures figures;
    // Each memory pool's figures (ascending pool id), when the track has more than one pool;
    // summed over the pools, reserved and allocated at any instant equal the track's.
    std::vector<PoolSummary> pools;
};

// B - A of two summaries (compare).
struct SummaryDelta
{
    int64_t peakReservedBytes = 0;
    int64_t peakAllocatedBytes = 0;
    int64_t finalReservedBytes = 0;
    double meanFragmentationRatio = 0;
    double maxFragmentationRatio = 0;
    int64_t minLargestFreeBytes = 0;
    int64_t maxFragmentCount = 0;
};
SummaryDelta summaryDelta(const SummaryFigures& a, const SummaryFigures& b);

} // namespace fs::analysis
