// `fragscope whatif`: replay a session under its recorded settings and under others, write each
// replay as a session, and read every figure back through the analysis engine (the one place
// figures are computed). docs/whatif.md describes the output.
#pragma once

#include "fidelity.h"
#include "replay.h"

#include "core/analysis/compare.h"
#include "core/analysis/summary.h"

#include <functional>
#include <string>
#include <vector>

namespace fs::alloc {

struct RunSpec
{
    std::string label; // PYTORCH_CUDA_ALLOC_CONF text as given ("" for the recorded settings)
    Config config;
    Policy policy = Policy::PyTorch;
    bool recorded = false;       // runs[0]: the session's own settings
    bool recordedConfig = false; // use the session's settings (with another policy)
};

struct FrameFigure
{
    int64_t frame = 0;
    double fragmentation = 0;
    uint64_t largestFree = 0;
    uint64_t reserved = 0;
};

// One device of a run: the summary the analysis engine gives its framework track (the figures
// `report` and `compare` print for a session; docs/analysis.md "Summary"), and the model's
// counters.
struct DeviceFigures
{
    uint32_t device = 0;
    analysis::SummaryFigures summary;
    int64_t segments = 0; // live at the end
    int64_t cudaMallocs = 0;
    int64_t ooms = 0;
    int64_t retries = 0;
    int64_t timedByAssumption = 0; // segment events the recording lacks (ReplayClock)
    // This run - runs[0] (the replay under the recorded settings): the setting's effect, model
    // against model. Zero on runs[0].
    analysis::SummaryDifference vsRecorded; // collapses: 0 (a replay has none of its own)
    std::vector<FrameFigure> frames;
};

struct RunResult
{
    RunSpec spec;
    std::string allocConf; // canonical text of the settings used
    // Settings the model did not replay (Config::unmodelled(), and a per_process_memory_fraction
    // without a known device size): the run's figures are the model's without them.
    std::vector<UnmodelledSetting> unmodelled;
    std::vector<DeviceFigures> devices;
    int64_t requests = 0;
    double replaySeconds = 0;
    std::string sessionPath; // where the replay was written ("" when only a temp file)
};

struct DeviceFidelity
{
    uint32_t device = 0;
    std::vector<uint64_t> realSegmentSizes;
    std::vector<uint64_t> replaySegmentSizes;
    int64_t firstSegmentMismatch = -1; // index, -1 when equal
    uint64_t realFinalReserved = 0, replayFinalReserved = 0;
    uint64_t realPeakReserved = 0, replayPeakReserved = 0;
    int64_t realSegments = 0, replaySegments = 0; // live at the end
    int64_t allocations = 0, addressesMatched = 0;
    int64_t firstAddressMismatch = -1; // allocation index
    bool finalLayoutEqual = false;     // live blocks and segments at the end
    bool stateAtEndEqual = false;      // `fragscope state --at end` figures of both sessions
    TimeCourse time;                   // every segment event and the bytes at each one
    TakenFromTrace taken;              // what the replay took from the trace
    uint64_t usableMark = 0;           // usable memory a reproduced free-and-retry marked
    bool reproduced() const
    {
        return firstSegmentMismatch < 0 && realFinalReserved == replayFinalReserved &&
               realPeakReserved == replayPeakReserved && realSegments == replaySegments &&
               addressesMatched == allocations && finalLayoutEqual && stateAtEndEqual &&
               time.exact();
    }
};

struct Fidelity
{
    bool complete = false;
    std::string completeNote;
    bool settingsKnown = false;
    std::string settingsNote;
    std::string recordedConf;
    int64_t resolutionNs = 1; // the trace's time step (Trace::resolutionNs)
    bool ordinal = false;     // times are entry numbers (a snapshot without time_us)
    std::vector<DeviceFidelity> devices;
    // Frees that waited on stream events (pending_frees rows): replayed at their completion, and
    // waits that began before the trace (their block's allocation is not in it: not replayed).
    int64_t pendingFrees = 0;
    int64_t pendingFreesBeforeTrace = 0;
    bool reproduced = false;
    // One short line, the one statement about fidelity a reader sees first (the CLI's second
    // line, the GUI's what-if frame): exact, not exact (by how much), or a partial trace. It
    // never says "reproduced" of an incomplete trace. fidelitySummary() (whatif_rank.h).
    std::string summary;
    std::string verdict; // the details: reproduced or why not, what was taken from the trace
    // What the what-if runs' differences are against (the recorded replay) and, where that
    // replay is not exact, by how much it misses the real run.
    std::string banner;
};

// One row of the ranking (docs/whatif.md "Ranking and the default alternatives"): a run's
// allocator-model figures, summed over devices (each device is its own allocator).
struct RankedRun
{
    std::string label;     // the settings as the user or the default set names them
    std::string allocConf; // canonical text of the settings replayed
    std::string why;       // how a default alternative was chosen ("" otherwise)
    bool recorded = false; // the replay under the recorded settings
    Policy policy = Policy::PyTorch;
    int run = -1; // index into WhatIfResult::runs when replayed in full, else -1 (model only)
    uint64_t peakReserved = 0;  // sum of the devices' peaks
    uint64_t finalReserved = 0; // at the end
    int64_t segments = 0;       // live at the end
    int64_t cudaMallocs = 0;
    int64_t ooms = 0;
    int64_t vsRecordedPeak = 0;                // peakReserved minus the recorded run's
    std::vector<UnmodelledSetting> unmodelled; // as RunResult::unmodelled
};

// A default alternative left out, and why (e.g. garbage_collection_threshold without a known
// capacity changes nothing).
struct SkippedAlternative
{
    std::string label;
    std::string reason;
};

struct WhatIfOptions
{
    std::string session;
    std::vector<RunSpec> runs; // after the recorded run
    // Also replay the default alternatives (defaultAlternatives(), whatif_rank.h) through the
    // model alone, rank them with the runs, and replay the best one in full after the others
    // (`fragscope whatif` without --alloc-conf). -o keeps the last of `runs`, else runs[0].
    bool rankAlternatives = false;
    uint64_t capacity = 0; // what-if runs' device capacity; 0: what the session tells
    std::string output;    // -o: the last run's replay session
    // Where to keep runs[0], the replay under the recorded settings, when other runs follow (the
    // GUI draws them against it); "" to drop it.
    std::string outputRecorded;
    std::function<void(const std::string&)> progress;
    // Percent done (0-100) with the stage, for a progress bar (the GUI).
    std::function<void(int, const std::string&)> percent;
    // When it becomes true, whatIf() stops (between stages, or within a replay) and throws
    // Cancelled; no output is left behind.
    const std::atomic<bool>* cancel = nullptr;
};

struct WhatIfResult
{
    std::string session;
    Fidelity fidelity;
    std::vector<RunResult> runs;
    // The real run (the session itself), per device: the summary of its framework track (the
    // same figures `report` and `compare` print for it) and its segments, cudaMallocs and OOMs
    // as recorded: the third curve beside the two replays.
    std::vector<DeviceFigures> real;
    // Every run, best first (fewest OOMs, then lowest peak reserved; ties keep the recorded
    // settings first), with the default alternatives when ranked (model figures).
    std::vector<RankedRun> ranking;
    std::vector<SkippedAlternative> skipped;
    int recommended = -1;       // index into ranking: better than the recorded settings; -1 none
    std::string recommendation; // one sentence: what would have helped, or that nothing tried did
};

// Throws fs::SessionError on a bad session, std::invalid_argument on bad options, Cancelled.
WhatIfResult whatIf(const WhatIfOptions& opts);

// Config::unmodelled() of a run's settings, and per_process_memory_fraction when no device size
// is known to take the fraction of (ReplayOptions::deviceCapacity all 0).
std::vector<UnmodelledSetting> unmodelledSettings(const Config& c, const ReplayOptions& ro);

// Fidelity::banner.
std::string bannerText(const Fidelity& f, const WhatIfResult& r);

// One phrase for what the replay took from the trace (times, calls, usable memory).
std::string takenText(const DeviceFidelity& d, bool ordinal = false);

// One phrase for a time course that is not exact: events at other times, bytes apart.
std::string timeCourseText(const TimeCourse& t, bool ordinal = false);

// The session label of a replay: "what-if: <settings> replay of <file>".
std::string whatIfLabel(const RunSpec& spec, const std::string& conf, const std::string& file);

} // namespace fs::alloc
