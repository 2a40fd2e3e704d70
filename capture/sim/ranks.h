// Several ranks of one simulated job (`fragscope simulate --ranks N`, docs/simulator.md "Ranks").
// Each rank is the single-rank workload (same seed, so the same frame schedule) on its own
// simulated GPU, recorded into its own session with its own clock; what ties the sessions
// together is what ties real ranks together: a realtime clock offset, a job id, the rank number
// and the frame numbering. One rank (the "tight" one) has less memory than the others, as when
// another process shares its GPU, so it runs out of headroom first: the ground truth the ranks
// analysis (core/analysis/ranks.h) is tested against. Everything here is SYNTHETIC.
#pragma once

#include "simulator.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace fs::sim {

struct RanksConfig
{
    int ranks = 2;
    int tightRank = -1;                   // the rank with less memory; -1: ranks / 2
    uint64_t deficitBytes = 3ull << 30;   // memory the tight rank lacks (default 3 GiB)
    uint64_t perRankStepBytes = 64 << 20; // rank k has k x this less than rank 0 (a small spread)
    // Wall clock (CLOCK_REALTIME ns) at which rank 0's process starts: 2025-01-06 08:00:00 UTC.
    int64_t wallClockStartNs = 1'736'150'400'000'000'000;
    int64_t launchGapNs = 40'000'000;    // each rank starts this much after the previous one...
    int64_t launchJitterNs = 20'000'000; // ... plus up to this much (from the seed)
};

struct RankSpec
{
    int rank = 0;
    Config config;           // capacity and device differ per rank
    bool tight = false;      // the rank with less memory
    int64_t startSkewNs = 0; // process start after rank 0's, on the wall clock
    // Session time + this = wall clock (meta clock_offset_realtime_ns).
    int64_t realtimeOffsetNs = 0;
    // Meta keys the rank's session carries: rank, world_size, job_id, clock_offset_realtime_ns
    // (docs/session-format.md "meta"), sim.tight_rank.
    std::vector<std::pair<std::string, std::string>> meta;
};

// The ranks of a job from the single-rank configuration. Throws std::invalid_argument for a
// configuration it cannot run (fewer than 2 ranks, a tight rank out of range, no memory left).
std::vector<RankSpec> rankSpecs(const Config& base, const RanksConfig& rc);

// run.fragscope -> run.rank3.fragscope (the extension kept; none added when there is none).
std::string rankPath(const std::string& out, int rank);

// What the simulator knows about the ranks it ran: the first rank to collapse and the first to
// hit an OOM, on the shared (wall) clock. The ranks share one frame schedule, so the first is
// the rank with the smallest frame index, then the earliest start.
struct RanksTruth
{
    int firstCollapseRank = -1; // -1: no rank collapsed
    int64_t firstCollapseFrame = -1;
    int firstOomRank = -1; // -1: no OOM
    int64_t firstOomFrame = -1;
    // OOMs are not at frame starts: when two ranks first hit one in the same frame, which was
    // first on the clock depends on where in the frame; false then.
    bool firstOomUnique = true;
    std::vector<int64_t> firstCollapseFrames; // per rank, -1 when none
    std::vector<int64_t> firstOomFrames;      // per rank, -1 when none
};
RanksTruth ranksTruth(const std::vector<RankSpec>& specs, const std::vector<Stats>& stats);

} // namespace fs::sim
