// `fragscope simulate --live`: the simulator as a capture target. It serves the agent's control
// socket and stream (LiveTarget), waits for a recorder (`record`, `attach`, the GUI) to start it,
// then runs; the session a recorder writes holds exactly the events the simulator emitted.
#pragma once

#include "capture/sim/simulator.h"

#include <string>

namespace fs::capture {

struct LiveSimOptions
{
    int64_t rateEventsPerSec = 0; // > 0: pace the run (tests, demos of live views)
    // > 0: stretch the simulated clock so that this many events fall in each simulated second
    // (a run of hours at a realistic rate, delivered as fast as it is read: bench_flight).
    double clockEventsPerSec = 0;
    int waitTimeoutMs = 600000; // give up when no recorder comes
    std::string commandLine;
};

// Returns the command's exit status (0 ok, 1 no recorder came / socket failed).
int runSimulatorLive(const sim::Config& cfg, const LiveSimOptions& opts);

} // namespace fs::capture
