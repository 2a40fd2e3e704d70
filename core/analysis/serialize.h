// JSON and text forms of analysis results, shared by the CLI commands (state, report, collapse)
// so that the same figure is always spelt the same way.
#pragma once

#include "summary.h"
#include "types.h"

#include "core/format.h"
#include "core/json.h"
#include "core/store/session.h"

#include <string>

namespace fs::analysis {

using fs::humanBytes;
std::string formatTime(int64_t t, int64_t begin, bool ordinal); // "12.345 s" from begin, or "#N"

void writeCaveats(JsonWriter& j, const Caveats& c);      // "caveats": [...]
void writeHealth(JsonWriter& j, const HealthSummary& h); // {dropped_records, ...}
void writeHistogramBins(JsonWriter& j, const std::vector<HistogramBin>& bins);
void writeStateFields(JsonWriter& j, const State& s);   // fields of one state object
void writeState(JsonWriter& j, const State& s);         // {...}
void writePoolState(JsonWriter& j, const PoolState& p); // {pool, pool_label, ...state fields}
void writePrecursor(JsonWriter& j, const Precursor& p);
void writeCollapseReport(JsonWriter& j, const CollapseReport& r);
void writeCollapseReportFields(JsonWriter& j, const CollapseReport& r); // without {}
void writeCorrelation(JsonWriter& j, const Correlation& c);
// A time field: the value, or null for kNoTime.
void writeTimeField(JsonWriter& j, const char* key, int64_t t);
// The summary figures under their one set of names (docs/json.md "Summary figures"), as fields
// of the object being written: peak_reserved_bytes, peak_reserved_at_ns, ...
void writeSummaryFields(JsonWriter& j, const SummaryFigures& f);
void writeSummaryDelta(JsonWriter& j, const SummaryDelta& d); // fields, B - A

// The summary figures as text lines, each starting with indent.
std::string summaryText(const SummaryFigures& f, int64_t begin, bool ordinal,
                        const std::string& indent);

std::string stateText(const State& s, int64_t begin, bool ordinal);
// The fields of a kernel-variant shift, one per line ("family: ...", "variant: ...", "share:
// ...", "first ran in frame N", "preceded by: ..."), for the CLI and the GUI's inspector.
std::string kernelShiftText(const KernelShift& s);
// The score's factors: "score 0.301 = closeness 1.00 x novelty 1.00 x effect 0.301 (...)".
std::string evidenceText(const Precursor& p);
std::string collapseReportText(const CollapseReport& r, int64_t begin, bool ordinal,
                               size_t maxPrecursors);

} // namespace fs::analysis
