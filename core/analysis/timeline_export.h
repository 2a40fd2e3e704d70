// Timeline samples as data (`fragscope export timeline FILE -o OUT.csv|OUT.json`): one row per
// sample and track, the same values Engine::timeline() gives the GUI's plots and that
// Engine::stateAt() gives at the row's time. Numbers are written in their shortest round-trip
// form, so a reader gets back exactly the engine's doubles.
#pragma once

#include "types.h"

#include <cstdio>
#include <string>
#include <vector>

namespace fs::analysis {

// Column names, in order (CSV header, JSON keys).
const std::vector<std::string>& timelineColumns();

// Writes every sample of every timeline (track after track). Throws std::runtime_error when the
// stream reports a write error.
void writeTimelineCsv(std::FILE* out, const std::vector<Timeline>& timelines);
// {"file", "time_axis", "entropy_window_ns", "columns", "samples": [{column: value}...],
//  "caveats"}.
void writeTimelineJson(std::FILE* out, const std::vector<Timeline>& timelines,
                       const std::string& file, bool ordinal, const Caveats& caveats);

} // namespace fs::analysis
