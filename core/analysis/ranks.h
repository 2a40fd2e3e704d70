// Several sessions of one job as one run: the ranks of a multi-GPU generation, each recorded on
// its own (docs/ranks.md). This module lines their clocks up and answers "which rank ran out of
// headroom first, and did the others follow?". Every per-rank figure is its own engine's; this
// module only places them on one time axis and orders them. `report --ranks` and the GUI's ranks
// window both call analyseRanks and print or draw what it returns.
#pragma once

#include "engine.h"

#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fs {
struct SessionSummary;
}

namespace fs::analysis {

// How the ranks' clocks are lined up.
//  WallClock: every file says how its clock maps to the wall clock (CLOCK_REALTIME).
//  Frame:     the start of the first frame number all files have.
//  None:      each file on its own clock, unchecked (the user's call).
//  Auto:      WallClock when every file carries a wall clock, else Frame.
enum class RankAlignMode : uint8_t { Auto, WallClock, Frame, None };
const char* rankAlignModeName(RankAlignMode m); // "auto", "wall_clock", "frame", "none"
// "auto", "wall" (or "wall_clock"), "frame", "none"; nullopt for anything else.
std::optional<RankAlignMode> parseRankAlignMode(std::string_view s);

// What one file says about its clock, its job and its rank (meta keys, docs/session-format.md).
struct RankIdentity
{
    // Session time + this = wall clock (CLOCK_REALTIME, ns); nullopt when the file does not say.
    std::optional<int64_t> realtimeOffsetNs;
    std::string clockSource; // where the offset comes from, for people ("" when none)
    std::string jobId;       // meta job_id, "" when none
    std::optional<int> rank; // meta rank, else a "rank<N>" in the file name
};
RankIdentity rankIdentity(const SessionSummary& s, const std::string& path);

// A collapse or an OOM of one rank, on the shared time axis.
struct RankEvent
{
    int rank = 0;
    int64_t frame = -1;     // the collapse's first frame, the frame an OOM fell in (-1: none)
    int64_t time = kNoTime; // shared axis; kNoTime when the frame has no time
    int64_t sessionTime = kNoTime; // the same instant on the rank's own clock
    std::string detail;            // collapse: its broken rules; OOM: "cause, requested bytes"
};

struct RankSummary
{
    int rank = 0;
    std::string path;
    RankIdentity identity;
    std::shared_ptr<const Engine> engine;
    // Session time + offsetNs = time on the shared axis (the reference rank's own clock).
    int64_t offsetNs = 0;
    int64_t timeBegin = 0; // shared axis
    int64_t timeEnd = 0;
    std::optional<Track> track;     // the default track (device 0), whose figures follow
    uint64_t peakReservedBytes = 0; // the track's, as `report` gives them
    double maxFragmentationRatio = 0;
    int64_t frames = 0;
    std::vector<RankEvent> collapses; // in time order, one per collapse
    std::vector<RankEvent> ooms;      // in time order, every OOM of the session
};

// One frame number across the ranks: where it collapsed, where it hit an OOM.
struct RankFrame
{
    int64_t frame = 0;
    std::vector<int> ranks;          // ranks that have this frame
    std::vector<int> collapsedRanks; // ranks where the frame belongs to a collapse
    // Of those, the rank whose collapse (the one containing this frame) began first.
    int firstCollapseRank = -1;
    std::vector<int> oomRanks; // ranks with an OOM during the frame
    int firstOomRank = -1;     // the rank of the earliest of those OOMs
};

struct RankRun
{
    RankAlignMode mode = RankAlignMode::None; // never Auto: the mode used
    std::string basis;                        // what the clocks were lined up on, for people
    int64_t alignFrame = -1;                  // Frame: the frame number whose start lines up
    int referenceRank = 0;                    // the rank whose clock is the shared axis
    std::vector<RankSummary> ranks;           // by rank number
    std::optional<RankEvent> firstCollapse;   // the earliest collapse of any rank
    std::optional<RankEvent> firstOom;        // the earliest OOM of any rank
    int peakReservedMinRank = -1, peakReservedMaxRank = -1;
    uint64_t peakReservedMin = 0, peakReservedMax = 0;
    std::vector<RankFrame> frames; // every frame number any rank has, ascending
    // Wall clock and frame numbering both available: how far the frame starts of the aligned
    // frame are apart on the wall clock (0 when they agree exactly); nullopt otherwise.
    std::optional<int64_t> frameSpreadOnWallClockNs;
    std::vector<std::string> notes;
    uint64_t peakReservedSpread() const { return peakReservedMax - peakReservedMin; }
    const RankSummary* byRank(int rank) const;
};

// The files cannot be ranks of one job: the message says why and how to override.
class RankAlignError : public std::runtime_error
{
public:
    using std::runtime_error::runtime_error;
};

struct RankInput
{
    std::string path;
    std::shared_ptr<const Engine> engine;
    // The engine's OOM diagnoses when the caller has them already (the GUI's scene does: each
    // is a replay); null: analyseRanks asks the engine.
    std::shared_ptr<const std::vector<OomDiagnosis>> ooms;
};

// Numbers the ranks (meta rank, else "rank<N>" in every file name, else the order given), lines
// their clocks up and orders their collapses and OOMs. Throws RankAlignError when the files
// cannot be one job's ranks under `mode` (no common clock or frame numbering, different job ids,
// recordings that do not overlap on the wall clock); never with RankAlignMode::None.
RankRun analyseRanks(const std::vector<RankInput>& files, RankAlignMode mode = RankAlignMode::Auto);

} // namespace fs::analysis
