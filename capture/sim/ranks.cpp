#include "ranks.h"

#include "rng.h"

#include <fmt/format.h>
#include <stdexcept>

namespace fs::sim {

std::vector<RankSpec> rankSpecs(const Config& base, const RanksConfig& rc)
{
    if (rc.ranks < 2 || rc.ranks > 1024)
        throw std::invalid_argument("--ranks must be between 2 and 1024");
    const int tight = rc.tightRank < 0 ? rc.ranks / 2 : rc.tightRank;
    if (tight >= rc.ranks)
        throw std::invalid_argument(fmt::format("--tight-rank {} is not a rank of {} (0..{})",
                                                tight, rc.ranks, rc.ranks - 1));
    const uint64_t most = rc.deficitBytes + rc.perRankStepBytes * static_cast<uint64_t>(rc.ranks);
    if (most + (64ull << 20) > base.capacityBytes)
        throw std::invalid_argument("--capacity leaves no memory for the tight rank");
    // The job id names what every rank shares, so that files of two jobs are told apart.
    const std::string job = fmt::format("sim-{}-{}x{}x{}-{}ranks", base.seed, base.frames,
                                        base.steps, base.targetEvents, rc.ranks);
    Rng rng(base.seed ^ 0x72616e6b73ULL); // launch jitter only: the workload's own seed is kept
    std::vector<RankSpec> out;
    int64_t skew = 0;
    for (int k = 0; k < rc.ranks; ++k) {
        RankSpec s;
        s.rank = k;
        s.config = base;
        // Each process sees its own GPU as device 0 (CUDA_VISIBLE_DEVICES per rank).
        s.config.capacityBytes -= rc.perRankStepBytes * static_cast<uint64_t>(k);
        s.tight = k == tight;
        if (s.tight) s.config.capacityBytes -= rc.deficitBytes;
        s.config.deviceName = fmt::format("{} rank {}", base.deviceName, k);
        if (k > 0)
            skew += rc.launchGapNs + static_cast<int64_t>(rng.below(static_cast<uint64_t>(
                                         std::max<int64_t>(rc.launchJitterNs, 1))));
        s.startSkewNs = skew;
        // Session time startTimeNs is the process start: wall = start + skew + (t - startTimeNs).
        s.realtimeOffsetNs = rc.wallClockStartNs + skew - base.startTimeNs;
        s.meta = {{"rank", std::to_string(k)},
                  {"world_size", std::to_string(rc.ranks)},
                  {"job_id", job},
                  {"clock_offset_realtime_ns", std::to_string(s.realtimeOffsetNs)},
                  {"sim.tight_rank", std::to_string(tight)},
                  {"sim.rank_capacity_bytes", std::to_string(s.config.capacityBytes)}};
        out.push_back(std::move(s));
    }
    return out;
}

std::string rankPath(const std::string& out, int rank)
{
    const size_t slash = out.find_last_of('/');
    const size_t dot = out.find_last_of('.');
    if (dot == std::string::npos || (slash != std::string::npos && dot < slash) ||
        dot == (slash == std::string::npos ? 0 : slash + 1))
        return fmt::format("{}.rank{}", out, rank);
    return fmt::format("{}.rank{}{}", out.substr(0, dot), rank, out.substr(dot));
}

RanksTruth ranksTruth(const std::vector<RankSpec>& specs, const std::vector<Stats>& stats)
{
    RanksTruth t;
    for (size_t k = 0; k < stats.size() && k < specs.size(); ++k) {
        int64_t collapse = -1, oom = -1;
        for (size_t f = 0; f < stats[k].perFrame.size(); ++f) {
            const FrameStats& fs = stats[k].perFrame[f];
            if (collapse < 0 && fs.coherence < kCollapseThreshold)
                collapse = static_cast<int64_t>(f);
            if (oom < 0 && fs.ooms > 0) oom = static_cast<int64_t>(f);
        }
        t.firstCollapseFrames.push_back(collapse);
        t.firstOomFrames.push_back(oom);
        const int rank = specs[k].rank;
        // Same schedule on every rank: an earlier frame is earlier on the wall clock, and in the
        // same frame the rank that started first gets there first (specs are in start order).
        if (collapse >= 0 && (t.firstCollapseRank < 0 || collapse < t.firstCollapseFrame)) {
            t.firstCollapseRank = rank;
            t.firstCollapseFrame = collapse;
        }
        if (oom >= 0 && t.firstOomRank >= 0 && oom == t.firstOomFrame) t.firstOomUnique = false;
        if (oom >= 0 && (t.firstOomRank < 0 || oom < t.firstOomFrame)) {
            t.firstOomRank = rank;
            t.firstOomFrame = oom;
            t.firstOomUnique = true;
        }
    }
    return t;
}

} // namespace fs::sim
