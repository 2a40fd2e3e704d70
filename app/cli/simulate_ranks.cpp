// fragscope simulate --ranks N -o run.fragscope: run.rank0.fragscope ... one session per rank of a
// simulated job, with a shared wall clock and one rank that runs out of headroom first
// (capture/sim/ranks.h, docs/simulator.md "Ranks"). Prints the simulator's ground truth: which
// rank collapsed first and which hit an OOM first.
#include "capture/sim/ranks.h"
#include "simulate_session.h"

#include <algorithm>
#include <fmt/format.h>
#include <stdexcept>

namespace fs::cli {

namespace {

std::string frameText(int64_t frame)
{
    return frame < 0 ? std::string("none") : fmt::format("frame {}", frame);
}

double gib(uint64_t b)
{
    return static_cast<double>(b) / (1ull << 30);
}

} // namespace

int runSimulateRanks(const Args& a, const sim::Config& cfg, const std::string& out)
{
    sim::RanksConfig rc;
    rc.ranks = static_cast<int>(std::clamp<int64_t>(a.getInt("ranks", 2), -1, 1 << 20));
    rc.tightRank = static_cast<int>(std::clamp<int64_t>(a.getInt("tight-rank", -1), -1, 1 << 20));
    rc.deficitBytes = static_cast<uint64_t>(
        std::max<int64_t>(0, a.getInt("rank-deficit", static_cast<int64_t>(rc.deficitBytes))));
    std::vector<sim::RankSpec> specs;
    try {
        specs = sim::rankSpecs(cfg, rc);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    std::vector<sim::Stats> stats;
    fmt::print("Simulated {} ranks of one job ({} frames x {} steps, seed {}), one session each. "
               "SYNTHETIC data: scores come from a toy model, not from images.\n",
               specs.size(), cfg.frames, cfg.steps, cfg.seed);
    for (const sim::RankSpec& s : specs) {
        const std::string path = sim::rankPath(out, s.rank);
        stats.push_back(simulateSession(s.config, path, s.meta, a));
        const sim::Stats& st = stats.back();
        const sim::RanksTruth one = sim::ranksTruth({s}, {st});
        fmt::print("  rank {}: {}: capacity {:.2f} GiB, started +{:.3f} s after rank 0, {} events, "
                   "peak reserved {:.2f} GiB, {} of {} frames collapsed (first: {}), {} OOMs "
                   "(first: {})\n",
                   s.rank, path, gib(s.config.capacityBytes),
                   static_cast<double>(s.startSkewNs) / 1e9, st.events, gib(st.peakReserved),
                   st.collapsedFrames, st.frames, frameText(one.firstCollapseFrame), st.ooms,
                   frameText(one.firstOomFrame));
    }
    const sim::RanksTruth t = sim::ranksTruth(specs, stats);
    int tight = 0;
    for (const sim::RankSpec& s : specs)
        if (s.tight) tight = s.rank;
    fmt::print("Ground truth (the simulator's own): rank {} has {:.2f} GiB less memory; first to "
               "collapse: {}; first OOM: {}.\n",
               tight, gib(rc.deficitBytes),
               t.firstCollapseRank < 0 ? std::string("no rank collapsed")
                                       : fmt::format("rank {} at {}", t.firstCollapseRank,
                                                     frameText(t.firstCollapseFrame)),
               t.firstOomRank < 0
                   ? std::string("no rank hit one")
                   : fmt::format("rank {} in {}{}", t.firstOomRank, frameText(t.firstOomFrame),
                                 t.firstOomUnique ? "" : " (tied by frame)"));
    return Ok;
}

} // namespace fs::cli
