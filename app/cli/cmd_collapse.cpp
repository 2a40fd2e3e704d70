// fragscope collapse FILE --frame N [--json]: precursors and the f-1 -> f state diff of the
// collapse that contains frame N.
#include "cli_engine.h"
#include "cli_settings.h"
#include "command.h"
#include "core/analysis/engine.h"
#include "core/analysis/oom.h"
#include "core/analysis/serialize.h"
#include "core/json.h"
#include "core/store/session.h"

#include <fmt/format.h>

using namespace fs;
using namespace fs::cli;
using namespace fs::analysis;

namespace {

int runCollapse(Args& a)
{
    a.expectPositional(1, "FILE");
    if (!a.get("frame")) throw UsageError("--frame N is required");
    const int64_t frame = a.getInt("frame", -1);
    const int64_t limit = a.getInt("top", 20);
    const auto engine = openEngine(a.positional()[0], commandSettings(a).loadOptions());
    bool known = false;
    for (const FrameInfo& f : engine->frames())
        known = known || f.index == frame;
    if (!known) {
        fmt::print(stderr, "{}: no frame {} in this session ({} frames)\n", a.positional()[0],
                   frame, engine->frames().size());
        return Failure;
    }
    std::optional<CollapseReport> rep = engine->collapseReport(frame);
    if (!rep && !a.flag("any")) {
        std::string rules;
        for (const CollapseRule& r : engine->rules())
            rules += (rules.empty() ? "" : ", ") + r.describe();
        fmt::print(stderr,
                   "{}: frame {} is not part of a collapse (rules: {}); --any reports its "
                   "precursors anyway\n",
                   a.positional()[0], frame, rules);
        for (const CommonRule& c : engine->commonRules())
            fmt::print(stderr, "{}: {}\n", a.positional()[0], c.explain());
        return Failure;
    }
    if (!rep) rep = engine->frameReport(frame);
    if (limit >= 0 && rep->precursors.size() > static_cast<size_t>(limit))
        rep->precursors.resize(static_cast<size_t>(limit));
    const bool ordinal = engine->summary().timeAxis == TimeAxis::Ordinal;
    // OOMs inside the precursor window, diagnosed.
    const std::vector<OomDiagnosis> ooms = engine->oomsBetween(rep->windowBegin, rep->windowEnd);
    if (a.flag("json")) {
        JsonWriter j;
        j.beginDocument();
        j.field("file", a.positional()[0]);
        j.field("time_axis", ordinal ? "ordinal" : "ns");
        writeCollapseReportFields(j, *rep);
        j.key("ooms").beginArray();
        for (const OomDiagnosis& o : ooms)
            writeOom(j, o);
        j.endArray();
        j.endObject();
        fmt::print("{}\n", j.str());
    } else {
        fmt::print("{}",
                   collapseReportText(*rep, engine->timeBegin(), ordinal, rep->precursors.size()));
        if (!ooms.empty()) {
            fmt::print("OOMs in the window ({})\n", ooms.size());
            for (const OomDiagnosis& o : ooms)
                fmt::print("{}", oomText(o, engine->timeBegin(), ordinal));
        }
    }
    return Ok;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "collapse",
    .synopsis = "FILE --frame N [--top K] [--any] [--json] [--quiet]",
    .summary =
        "What the allocator did before a collapse: ranked precursors and the f-1 -> f state diff",
    .options = withSettingsOptions(
        {{"frame", "N", "a frame inside the collapse"},
         {"top", "K", "show the K highest-ranked precursors (default 20)"},
         {"any", "", "report frame N even when no collapse rule breaks there"},
         {"json", "", "print one JSON object instead of text (fields: docs/json.md)"},
         {"quiet", "", "no progress line on stderr (shown only when stderr is a terminal)"}}),
    .details =
        "Collapse rules: the settings file's (docs/settings.md), else the defaults\n"
        "coherence_score < 0.05, id_match_rate < 0.65, clip_entropy_bits > 2.95,\n"
        "warp_error_z > 6 (video breaks relative to the run: no fixed-pixel rule by default).\n"
        "A rule on a video metric that fires on more than half of the frames carrying it\n"
        "(10 or more) describes the video, not a break in it: it makes no collapse and is\n"
        "reported as \"not a break\". The precursor window runs from the start of the frame\n"
        "--lookback frames (2) before the collapse to the end of its first frame.\n"
        "Precursors (allocator events, OOMs, kernel-variant shifts) are ranked by evidence:\n"
        "closeness to the onset x novelty against the healthy frames before the window x\n"
        "effect on the largest free block and on kernel selection (docs/analysis.md).\n"
        "What happens in every healthy frame is marked [background]; events of the same\n"
        "kind and place are folded into one row.\n"
        "OOMs in that window are listed with their diagnosis (JSON key \"ooms\").\n"
        "Exit status 1 when frame N does not exist or is not in a collapse (without --any).",
    .run = runCollapse,
    .order = 42,
});
