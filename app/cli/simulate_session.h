// Writing simulated sessions (cmd_simulate.cpp), shared by `simulate` and `simulate --ranks`
// (simulate_ranks.cpp).
#pragma once

#include "capture/sim/simulator.h"
#include "command.h"

#include <string>
#include <utility>
#include <vector>

namespace fs::cli {

// The simulator configuration of the command line (--frames, --steps, ...); throws UsageError.
sim::Config simulateConfig(const Args& a);
// Runs the simulator into a new session file at path (replaced; removed again when the run
// fails), with extra meta keys, and stores the analysis index as --index/--no-index say.
sim::Stats simulateSession(const sim::Config& cfg, const std::string& path,
                           const std::vector<std::pair<std::string, std::string>>& meta,
                           const Args& a);
// `simulate --ranks N -o FILE`: one session per rank (simulate_ranks.cpp).
int runSimulateRanks(const Args& a, const sim::Config& cfg, const std::string& out);

} // namespace fs::cli
