// Internal to the engine: the pieces of the precursor ranking and the verdict (docs/analysis.md
// "Precursors", "Ranking" and "Verdict").
#pragma once

#include "engine_impl.h"
#include "stats.h"

#include <functional>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace fs::analysis {

// Kernel-variant shifts of frame f against the healthy baseline frames: one row per (usual
// variant -> new variant) pair, summed over the families where it happened. The rows carry
// evidence.novelty, evidence.kernelEffect and their departure (the variant's share in f against
// its share in each healthy frame; allocatorLinked when the request before the first shifted call
// failed or departs downwards from the requests before the same families in the healthy frames);
// the caller adds closeness and the score.
std::vector<Precursor> kernelShifts(const Engine::Impl& d, const FrameInfo& f,
                                    const std::vector<const FrameInfo*>& baseline);

// Per-frame figures the verdict measures rows by, per device or per track (index into
// Engine::Impl::tracks).
struct FrameFigures
{
    const FrameInfo* frame = nullptr;
    struct Pending
    {
        uint64_t peak = 0;     // bytes held by pending frees at the worst instant of the frame
        int64_t at = kNoTime;  // that instant
        int64_t blocks = 0;    // blocks pending then
        int64_t longestNs = 0; // the longest of their waits
        uint32_t stream = 0;   // stream of the largest of them
    };
    struct External
    {
        uint64_t peak = 0;            // bytes of device memory outside the allocator, at most
        int64_t lastGrowth = kNoTime; // last time such a region was created, up to the frame's end
        uint64_t lastGrowthBytes = 0;
    };
    struct Graph
    {
        int64_t launches = 0; // launches of kernels the healthy frames ran inside graphs
        int64_t outside = 0;  // ... that ran outside the frame's first graph (eager or another)
        int64_t firstOutside = kNoTime;
        int64_t graphId = -1; // the frame's first graph (-1: none)
    };
    // Bytes the frame's failed requests (OOMs) asked for (1 for one whose size is unknown):
    // a healthy frame with a small failed request does not hide a large one.
    std::map<uint32_t, uint64_t> ooms;
    std::map<uint32_t, Pending> pending;
    std::map<uint32_t, External> external;
    std::map<uint32_t, Graph> graph;
    std::vector<uint64_t> released; // per track: bytes of regions released in the frame
    std::vector<uint64_t> created;  // per track: bytes of regions created
    std::vector<double> minLargest; // per track: the smallest largest-free-fragment in the frame
    std::vector<int64_t> jumps;     // per track: blocks that moved at least their size from f-1
};

// The run's healthy frames the base rates are measured on (verdict.cpp): their figures and, per
// frame, the calls of each kernel name, keyed by (device, name id).
struct RunFigures
{
    std::vector<FrameFigures> frames;
    std::vector<std::map<std::pair<uint32_t, int64_t>, int64_t>> kernelCalls;
};

// Figures of every frame given; the first `healthy` of them are the healthy baseline (the graph
// figure counts only kernels those frames ran inside graphs).
std::vector<FrameFigures> frameFigures(const Engine::Impl& d,
                                       const std::vector<const FrameInfo*>& frames, size_t healthy);

// A row's figure, its departure from the healthy frames and whether it stands out (only when
// allocatorLinked is set, which the caller decides first).
void setDeparture(Evidence& ev, const std::string& feature, const Departure& dep);

// The verdict's part of a collapse report: adds the pending-free, external-memory and graph rows
// of the window frames, measures every row's departure from the healthy frames (unless it has its
// own, as kernel shifts do), sets closeness, score, role and mechanism, and the base rate of
// every row that stands out over runHealthy, the run's healthy frames. `closeness` maps a time
// to the row's closeness.
void measureRows(const Engine& e, const Engine::Impl& d, std::vector<Precursor>& rows,
                 const std::vector<const FrameInfo*>& healthy,
                 const std::vector<const FrameInfo*>& window,
                 const std::vector<const FrameInfo*>& runHealthy,
                 const std::function<double(int64_t)>& closeness);
// Ranks the rows (docs/analysis.md "Ranking") and fills rep.verdict from them. healthyWindow:
// the window frames before rep.frame that break no rule (a change there left its frame healthy).
void rankAndJudge(std::vector<Precursor>& rows, CollapseReport& rep, int64_t healthyFrames,
                  const std::vector<int64_t>& healthyWindow);

} // namespace fs::analysis
