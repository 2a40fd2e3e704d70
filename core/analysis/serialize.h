// JSON and text forms of analysis results, shared by the CLI commands (state, report, collapse)
// so that the same figure is always spelt the same way.
#pragma once

#include "categories.h"
#include "graphs.h"
#include "summary.h"
#include "types.h"

#include "core/format.h"
#include "core/json.h"
#include "core/store/session.h"

#include <string>

namespace fs::analysis {

using fs::humanBytes;
std::string formatTime(int64_t t, int64_t begin, bool ordinal); // "12.345 s" from begin, or "#N"

void writeCaveats(JsonWriter& j, const Caveats& c); // "caveats": [...]
// {dropped_records, ...}; with graphs, its CUDA-graph input health under "graphs" (info --json).
void writeHealth(JsonWriter& j, const HealthSummary& h, const GraphHealth* graphs = nullptr);
void writeHistogramBins(JsonWriter& j, const std::vector<HistogramBin>& bins);
void writeStateFields(JsonWriter& j, const State& s);   // fields of one state object
void writeState(JsonWriter& j, const State& s);         // {...}
void writePoolState(JsonWriter& j, const PoolState& p); // {pool, pool_label, ...state fields}
void writePrecursor(JsonWriter& j, const Precursor& p);
// "verdict": {allocator_related, mechanism, headline, healthy_frames, evidence: [...]}.
void writeVerdict(JsonWriter& j, const Verdict& v, const std::vector<Precursor>& rows);
void writeCollapseReport(JsonWriter& j, const CollapseReport& r);
void writeCollapseReportFields(JsonWriter& j, const CollapseReport& r); // without {}
void writeCorrelation(JsonWriter& j, const Correlation& c);
// The fields of one correlation without its names and q: n, pearson, spearman, test, lag,
// r_changes, n_eff, p (null: not tested).
void writeCorrelationFields(JsonWriter& j, const Correlation& c);
// One line: "largest_fragment_end vs coherence_score  n 24  Pearson +0.512  Spearman +0.498
// changes r +0.61 lag 0 n_eff 21.3 p 0.0021 q 0.042 [significant]".
std::string correlationText(const Correlation& c);
// Whether a correlation is called significant: its q under kSignificanceLevel.
bool significant(const Correlation& c);
// A time field: the value, or null for kNoTime.
void writeTimeField(JsonWriter& j, const char* key, int64_t t);
// The summary figures under their one set of names (docs/json.md "Summary figures"), as fields
// of the object being written: peak_reserved_bytes, peak_reserved_at_ns, ...
void writeSummaryFields(JsonWriter& j, const SummaryFigures& f);
void writeSummaryDelta(JsonWriter& j, const SummaryDelta& d); // fields, B - A
// Fields of a memory-by-category breakdown: device, level, time_ns, total_bytes, blocks,
// stacks_recorded, categories: [{category, bytes, blocks}] (largest first).
void writeCategoryFields(JsonWriter& j, const CategoryBreakdown& b);
// Only "stacks_recorded" and "categories": [{category, bytes, blocks}] (state --by category).
void writeCategoryRows(JsonWriter& j, const CategoryBreakdown& b);

// The summary figures as text lines, each starting with indent.
std::string summaryText(const SummaryFigures& f, int64_t begin, bool ordinal,
                        const std::string& indent);

std::string stateText(const State& s, int64_t begin, bool ordinal);
// What an event-size entropy was taken over, elapsedNs into the run: "300 s window", or every
// event so far when the run has no timestamps or is shorter than the window.
std::string entropyWindowText(int64_t windowNs, int64_t elapsedNs, bool ordinal);
// The fields of a kernel-variant shift, one per line ("family: ...", "variant: ...", "share:
// ...", "first ran in frame N", "preceded by: ..."), for the CLI and the GUI's inspector.
std::string kernelShiftText(const KernelShift& s);
// A robust z for text: "3.72", or "inf" when the healthy frames never varied.
std::string zText(double z);
// The row's departure and score: "stands out (kernel_fallback): variant_share = 0.95 in frame
// 22 against median 0, ...; score 1.000 = closeness 1.00 x m/(1+m), m = z / threshold".
std::string evidenceText(const Precursor& p);
std::string collapseReportText(const CollapseReport& r, int64_t begin, bool ordinal,
                               size_t maxPrecursors);

} // namespace fs::analysis
