// bench_diagnosis's scoring: the simulator's ground truth of a collapse, whether a precursor row
// names that cause, and the baseline orderings measured on the same rows.
#pragma once

#include "core/analysis/types.h"

#include <set>
#include <string>
#include <vector>

namespace fs::bench {

// The mechanisms the mixed simulator records (docs/simulator.md "Mechanisms"), in table order.
const std::vector<std::string>& allocatorMechanisms(); // every one but "content"
// The verdict mechanism (engine name) that matches a truth mechanism ("" when none does).
std::string engineMechanism(const std::string& truth);

// What the simulator recorded about a collapse's first frame (read from the session, as any
// user could: the sim_truth_* tables, which the analysis never reads).
struct Truth
{
    std::string mechanism; // the cause with the smallest quality factor; "" when none
    int64_t causeFrame = -1;
    // Further recorded causes of the same frame (a content-caused collapse with an allocator
    // mechanism beside it is not scored as content).
    std::vector<std::string> otherCauses;
    std::set<std::string> causalKernels; // fallback kernels the quality model counts
    int64_t ooms = 0;
};
Truth readTruth(const std::string& path, int64_t frame);

// Whether row p names the recorded cause of the collapse whose first frame is f.
bool namesCause(const analysis::Precursor& p, const Truth& t, const analysis::FrameInfo& f);
// 1-based rank of the first row naming the cause; 0 when none does.
int rankOf(const std::vector<analysis::Precursor>& rows, const Truth& t,
           const analysis::FrameInfo& f);

// Baselines: the same rows in another order (ties by time, never by the engine's ranking).
struct Baseline
{
    const char* name;
    const char* what;
    std::vector<analysis::Precursor> (*order)(std::vector<analysis::Precursor> rows);
};
const std::vector<Baseline>& baselines();

} // namespace fs::bench
