// The what-if ranking (docs/whatif.md "Ranking and the default alternatives"): which settings a
// plain `fragscope whatif` tries besides the recorded ones, their model-only replays, the order
// of the runs, the one-sentence recommendation and the one-line fidelity statement.
#pragma once

#include "whatif.h"

#include <functional>

namespace fs::alloc {

// A default alternative: the recorded settings with one setting changed.
struct Alternative
{
    RunSpec spec; // spec.label: the change ("expandable_segments:True")
    std::string why;
};

struct AlternativeSet
{
    std::vector<Alternative> tried;
    std::vector<SkippedAlternative> skipped;
};

// The documented set: expandable_segments:True, roundup_power2_divisions:4, max_split_size_mb at
// the median and the 90th percentile of the requests over 1 MiB (each rounded up to a power of
// two MiB, at least 32: PyTorch wants more than 20), and garbage_collection_threshold:0.6 (only
// when `capacityKnown`: PyTorch applies it only under a memory limit). One that equals the
// recorded settings, or could change nothing, is skipped with its reason.
AlternativeSet defaultAlternatives(const Trace& trace, bool capacityKnown);

// A run's row from its replays (the model's counters, summed over devices).
RankedRun rankedRun(const RunSpec& spec, const std::string& allocConf,
                    const std::vector<DeviceReplay>& replays);

// The alternatives replayed through the model alone (no session written), at once on the
// machine's cores; optionsFor gives each run's options (capacity, empty_cache() calls) as the
// full runs get them. Throws Cancelled when a replay is cancelled.
std::vector<RankedRun>
screenAlternatives(const Trace& trace, const std::vector<Alternative>& alternatives,
                   const std::function<ReplayOptions(const RunSpec&)>& optionsFor);

// Best first: fewest OOMs, then lowest peak reserved; ties keep their order (the recorded
// settings come first). Fills vsRecordedPeak.
void rankRuns(std::vector<RankedRun>& rows);

// r.recommended and r.recommendation from r.ranking: the best PyTorch setting ranked above the
// recorded settings (experimental policies are ranked, never recommended).
void recommend(WhatIfResult& r);

// A ranked run's name, as the CLI's table and the GUI's ranking show it: its settings
// (allocConf), "recorded: " before the recorded settings, the policy when not PyTorch's.
std::string rankedName(const RankedRun& row);

// Fidelity::summary.
std::string fidelitySummary(const Fidelity& f);

} // namespace fs::alloc
