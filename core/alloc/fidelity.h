// The time course of a replay against the recorded run (docs/whatif.md "Fidelity"): each segment
// event of one run paired with the same event of the other, and the reserved and allocated bytes
// of both at every event. A replay that ends in the right state but creates or releases segments
// at the wrong moments is not a reproduction.
#pragma once

#include "replay.h"
#include "trace.h"

#include <cstdint>

namespace fs::alloc {

struct TimeCourse
{
    // Segment creations and releases, and the instants at which expandable segments' mapped
    // bytes changed, of each run.
    int64_t realEvents = 0;
    int64_t replayEvents = 0;
    // Events without their twin (same kind, address and size, in order of occurrence) at the same
    // time in the other run, at the trace's resolution: paired events at different times, and
    // events of either run the other lacks.
    int64_t timeDiffers = 0;
    int64_t maxTimeDiffNs = 0; // largest time difference of paired events
    int64_t firstDiffer = -1;  // time of the first event that differs (either run), -1: none
    // Largest |reserved(real) - reserved(replay)| after the events of any instant (a step of
    // the trace's resolution), and when (the first event of that step).
    uint64_t maxReservedDiff = 0;
    int64_t maxReservedDiffAt = -1;
    // Largest difference of allocated bytes as PyTorch counts them (whole blocks: rounding and
    // unsplit remainders included) after the events of any instant: blocks of another size, and
    // allocations the replay could not serve.
    uint64_t maxAllocatedDiff = 0;
    bool exact() const { return timeDiffers == 0 && maxReservedDiff == 0 && maxAllocatedDiff == 0; }
};

// `resolutionNs`: times in the same step of this size are equal (Trace::resolutionNs).
TimeCourse compareTimeCourse(const DeviceTrace& real, const DeviceReplay& replay,
                             int64_t resolutionNs);

} // namespace fs::alloc
