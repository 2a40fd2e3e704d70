// JSON and text forms of the graphs report (`fragscope graphs`, the graphs section of `report`),
// so that a figure is spelt the same way everywhere (docs/json.md documents the JSON).
#pragma once

#include "graphs.h"

#include "core/json.h"

#include <string>

namespace fs::analysis {

// The fields of `fragscope graphs --json` (graphs, pools, sharing, sharing_all, health, notes,
// caveats) into an open object.
void writeGraphsReport(JsonWriter& j, const GraphsReport& r);
void writeGraphHealth(JsonWriter& j, const GraphHealth& h);     // {...}
void writeGraphsSummary(JsonWriter& j, const GraphsSummary& s); // {...}

std::string graphsReportText(const GraphsReport& r, int64_t begin, bool ordinal);
std::string graphHealthText(const GraphHealth& h); // indented lines for `info`'s health
std::string graphsSummaryText(const GraphsSummary& s);
// "1.234 ms", "12.5 us": a duration in ns as the graph figures print it.
std::string durationText(double ns);

} // namespace fs::analysis
