// fragscope report FILE [--json]: capture health, allocator summary over time, per-frame table,
// collapses with their top precursors, correlations (each with its n) and OOM diagnosis. The
// report is fs::analysis::buildReport's (core/analysis/report.h), printed by reportText or
// reportJson: this file only reads the options.
#include "cli_engine.h"
#include "cli_settings.h"
#include "command.h"
#include "core/alloc/graph_sharing.h"
#include "core/analysis/engine.h"
#include "core/analysis/report_format.h"
#include "report_ranks.h"

#include <fmt/format.h>

using namespace fs;
using namespace fs::cli;
using namespace fs::analysis;

namespace {

int runReport(Args& a)
{
    if (a.flag("ranks")) return runReportRanks(a); // report_ranks.cpp
    a.expectPositional(1, "FILE");
    const settings::Settings st = commandSettings(a);
    ReportOptions o = st.reportOptions();
    o.topPrecursors = static_cast<size_t>(std::max<int64_t>(a.getInt("top", 5), 0));
    const auto engine = openEngine(a.positional()[0], st.loadOptions());
    Report r = buildReport(*engine, a.positional()[0], o);
    alloc::addGraphsSummary(r, *engine);
    fmt::print("{}", a.flag("json") ? reportJson(r) : reportText(r));
    return Ok;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "report",
    .synopsis = "FILE [--top K] [--json] [--quiet] | --ranks A B… [--align MODE] [--json]",
    .summary =
        "Summary for people and CI: health, allocator over time, frames, collapses, correlations",
    .options = withSettingsOptions(
        {{"top", "K", "precursors shown per collapse (default 5)"},
         {"json", "", "print one JSON object instead of text (fields: docs/json.md)"},
         {"quiet", "", "no progress line on stderr (shown only when stderr is a terminal)"},
         {"ranks", "",
          "the files are the ranks of one job: per-rank summary, first rank to collapse or hit an "
          "OOM, spread of peak reserved (docs/ranks.md)"},
         {"align", "MODE",
          "with --ranks: auto (default: wall clock, else frame), wall, frame, or none"}}),
    .details =
        "Per track: peak reserved and allocated bytes, mean and max F, the smallest largest\n"
        "free block and the most fragments, each with its time, exact over every instant at\n"
        "which the track changes (mean F weighted by time; docs/analysis.md \"Summary\"); the\n"
        "same figures `compare`, `whatif` and the GUI print.\n"
        "Correlations are Pearson and Spearman between per-frame allocator figures and each\n"
        "frame metric, always with n; those with n < 3 are left out. Per-frame series drift\n"
        "and are autocorrelated, so the p-value tests the frame-to-frame changes (Pearson and\n"
        "Spearman, allocator leading by 0 or 1 frame, Bonferroni over the four) with Bartlett's\n"
        "effective sample size n_eff: at most 5 % false alarms on unrelated autocorrelated\n"
        "series (docs/analysis.md \"Correlations\").\n"
        "Each also has a q-value (Benjamini-Hochberg over the pairs the report tests): only\n"
        "q < 0.05 is called significant.\n"
        "Each collapse starts with its verdict: allocator-related with the mechanism and the\n"
        "evidence rows, or no allocator precursor stands out (docs/analysis.md \"Verdict\").\n"
        "Each OOM is diagnosed (JSON key \"ooms\"): the request, device free memory, reserved\n"
        "and allocated bytes, what was cached in the request's pool and stream, pending frees\n"
        "that would have fitted, and a cause (capacity, fragmentation, pending_free, external)\n"
        "with a suggestion; docs/analysis.md gives the rules.\n"
        "With --ranks the files are lined up on the wall clock where every file carries it, else\n"
        "on the start of the first frame number they share; files of different jobs (other job\n"
        "ids, no common clock or frame number, no overlap in time) are refused (exit 2) unless\n"
        "--align none is given.",
    .run = runReport,
    .order = 41,
});
