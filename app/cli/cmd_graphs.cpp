// fragscope graphs SESSION [--json]: every CUDA graph and memory pool of a session, the replays
// against the allocator's state, and the pools that could share one with what sharing would
// save (docs/analysis.md "Graphs and pools").
#include "cli_engine.h"
#include "cli_settings.h"
#include "command.h"
#include "core/alloc/graph_sharing.h"
#include "core/analysis/graphs_text.h"
#include "core/json.h"
#include "core/store/session.h"

#include <fmt/format.h>

using namespace fs;
using namespace fs::cli;
using namespace fs::analysis;

namespace {

int runGraphs(Args& a)
{
    a.expectPositional(1, "SESSION");
    const std::string& path = a.positional()[0];
    const auto engine = openEngine(path, commandSettings(a).loadOptions());
    const GraphsReport r = alloc::graphsReport(*engine);
    const SessionSummary& sum = engine->summary();
    if (a.flag("json")) {
        JsonWriter j;
        j.beginDocument();
        j.field("file", path);
        j.field("synthetic", sum.synthetic);
        writeGraphsReport(j, r);
        j.endObject();
        fmt::print("{}\n", j.str());
        return Ok;
    }
    fmt::print("fragscope graphs: {}\n", path);
    if (sum.synthetic) fmt::print("SYNTHETIC DATA (simulated, not a measurement)\n");
    fmt::print("\n{}", graphsReportText(r, engine->timeBegin(), sum.timeAxis == TimeAxis::Ordinal));
    return Ok;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "graphs",
    .synopsis = "SESSION [--json] [--quiet]",
    .summary = "CUDA graphs and memory pools: what each holds, replays, what sharing would save",
    .options = withSettingsOptions(
        {{"json", "", "print one JSON object instead of text (docs/json.md)"},
         {"quiet", "", "no progress line on stderr (shown only when stderr is a terminal)"}}),
    .details =
        "Graphs: one row per graph (captures with one name are re-captures of it), with its pool,\n"
        "replays (from the launch to the end of its last kernel: p50, p99, max, jitter) and the\n"
        "Spearman correlation of replay duration with the fragmentation ratio at the replay's\n"
        "start (with n). Pools: PyTorch's private pools and CUDA memory pools, reserved and\n"
        "allocated bytes at the end and at their peak, and the graphs using each.\n"
        "Sharing: pools whose graphs never replay concurrently may share one pool; the\n"
        "recorded requests are replayed through the allocator model with them merged and the\n"
        "peak reserved bytes saved are given per group and for all: computed, not measured.\n"
        "docs/analysis.md \"Graphs and pools\" gives every rule.",
    .run = runGraphs,
    .order = 44,
});
