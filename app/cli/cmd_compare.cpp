// fragscope compare A B [--json] [--by callsite [--at peak|end]]: two sessions side by side
// (actual vs what-if, or two recordings), or their bytes by call site. Figures come from
// fs::analysis::compareSessions (the analysis engine); this file only prints.
#include "command.h"
#include "core/analysis/compare.h"
#include "core/analysis/engine.h"
#include "core/analysis/serialize.h"
#include "core/format.h"
#include "core/json.h"

#include <cmath>
#include <fmt/format.h>

using namespace fs;
using namespace fs::cli;
using namespace fs::analysis;

namespace {

void side(JsonWriter& j, const char* key, const SideSummary& s)
{
    j.key(key).beginObject();
    j.field("file", s.path).field("label", s.label).field("synthetic", s.synthetic);
    j.field("device", s.device).field("level", std::string(levelName(s.level)));
    j.field("frames", s.frames).key("collapses");
    s.collapsesKnown() ? j.value(s.collapses) : j.null();
    j.field("ooms", s.ooms);
    writeSummaryFields(j, s.figures);
    j.endObject();
}

void point(JsonWriter& j, const char* key, const PointFigures& p, bool frames)
{
    if (!p.present) { // that session has no data there
        j.key(key).null();
        return;
    }
    j.key(key).beginObject();
    j.field("reserved_bytes", p.reserved).field("fragmentation_ratio", p.fragmentation);
    j.field("largest_free_bytes", p.largestFree).field("ooms", p.ooms);
    if (frames) j.field("collapsed", p.collapsed);
    j.endObject();
}

// --by callsite: the bytes each call site holds at each run's peak (or end), B - A.
int runByCallSite(Args& a)
{
    const std::string at = a.get("at").value_or("peak");
    if (at != "peak" && at != "end") throw UsageError("--at '" + at + "': expected peak or end");
    const int64_t top = a.getInt("top", 20);
    if (top < 1) throw UsageError("--top must be at least 1");
    const std::string& pa = a.positional()[0];
    const std::string& pb = a.positional()[1];
    const CallSiteComparison c = compareCallSites(Engine::open(pa), Engine::open(pb), at == "end");
    if (a.flag("json")) {
        JsonWriter j;
        j.beginDocument();
        j.field("at", at);
        auto sideJson = [&](const char* key, const std::string& path, int64_t t, uint64_t held) {
            j.key(key).beginObject();
            j.field("file", path).field("time_ns", t).field("held_bytes", held);
            j.endObject();
        };
        sideJson("a", pa, c.aTime, c.aBytes);
        sideJson("b", pb, c.bTime, c.bBytes);
        j.field("stacks_recorded", c.stacksRecorded);
        j.key("callsites").beginArray();
        for (const CallSiteDelta& r : c.rows)
            j.beginObject()
                .field("site", r.site)
                .field("a_bytes", r.aBytes)
                .field("b_bytes", r.bBytes)
                .field("delta_bytes", r.deltaBytes)
                .endObject();
        j.endArray();
        j.endObject();
        fmt::print("{}\n", j.str());
        return Ok;
    }
    fmt::print("A: {}\nB: {}\nbytes held by call site at each run's {}{}\n\n", pa, pb,
               at == "end" ? "end" : "allocated peak",
               c.stacksRecorded ? "" : " (no stacks recorded: one row)");
    fmt::print("{:>12} {:>12} {:>12}  {}\n", "A", "B", "B - A", "call site");
    fmt::print("{:>12} {:>12} {:>12}  {}\n", humanBytes(c.aBytes), humanBytes(c.bBytes),
               signedHumanBytes(static_cast<int64_t>(c.bBytes) - static_cast<int64_t>(c.aBytes)),
               "(all)");
    for (size_t i = 0; i < c.rows.size() && i < static_cast<size_t>(top); ++i) {
        const CallSiteDelta& r = c.rows[i];
        fmt::print("{:>12} {:>12} {:>12}  {}\n", humanBytes(r.aBytes), humanBytes(r.bBytes),
                   signedHumanBytes(r.deltaBytes), r.site);
    }
    if (c.rows.size() > static_cast<size_t>(top))
        fmt::print("... {} more call sites (--top N, or --json for all)\n",
                   c.rows.size() - static_cast<size_t>(top));
    return Ok;
}

int runCompare(Args& a)
{
    a.expectPositional(2, "A B");
    if (auto by = a.get("by")) {
        if (*by != "callsite") throw UsageError("--by '" + *by + "': expected callsite");
        return runByCallSite(a);
    }
    if (a.get("at")) throw UsageError("--at needs --by callsite");
    const int samples = static_cast<int>(a.getInt("samples", 100));
    if (samples < 1 || samples > 100000) throw UsageError("--samples must be 1..100000");
    const Comparison c = compareSessions(a.positional()[0], a.positional()[1], samples);
    if (a.flag("json")) {
        JsonWriter j;
        j.beginDocument();
        side(j, "a", c.a);
        side(j, "b", c.b);
        j.key("difference").beginObject();
        writeSummaryDelta(j, c.difference.figures);
        j.key("collapses");
        c.a.collapsesKnown() && c.b.collapsesKnown() ? j.value(c.difference.collapses) : j.null();
        j.field("ooms", c.difference.ooms);
        j.endObject();
        j.field("aligned_by", c.byFrame ? "frame" : "time_from_start");
        j.key("rows").beginArray();
        for (const CompareRow& r : c.rows) {
            j.beginObject();
            j.field(c.byFrame ? "frame" : "offset_ns", r.key);
            point(j, "a", r.a, c.byFrame);
            point(j, "b", r.b, c.byFrame);
            j.endObject();
        }
        j.endArray();
        j.key("notes").beginArray();
        for (const auto& n : c.notes)
            j.value(n);
        j.endArray();
        j.endObject();
        fmt::print("{}\n", j.str());
        return Ok;
    }
    auto title = [](const SideSummary& s) {
        return s.path + (s.label.empty() ? "" : "  (" + s.label + ")") +
               (s.synthetic ? "  SYNTHETIC" : "");
    };
    fmt::print("A: {}\nB: {}\n\n", title(c.a), title(c.b));
    fmt::print("{:<26} {:>14} {:>14} {:>14}\n", "", "A", "B", "B - A");
    const SummaryFigures &fa = c.a.figures, &fb = c.b.figures;
    const SummaryDelta& d = c.difference.figures;
    auto bytesRow = [](const char* name, uint64_t x, uint64_t y, int64_t diff) {
        fmt::print("{:<26} {:>14} {:>14} {:>14}\n", name, humanBytes(x), humanBytes(y),
                   signedHumanBytes(diff));
    };
    auto ratioRow = [](const char* name, double x, double y, double diff) {
        fmt::print("{:<26} {:>14.4f} {:>14.4f} {:>+14.4f}\n", name, x, y, diff);
    };
    bytesRow("peak reserved", fa.peakReservedBytes, fb.peakReservedBytes, d.peakReservedBytes);
    bytesRow("peak allocated", fa.peakAllocatedBytes, fb.peakAllocatedBytes, d.peakAllocatedBytes);
    bytesRow("final reserved", fa.finalReservedBytes, fb.finalReservedBytes, d.finalReservedBytes);
    ratioRow("mean F", fa.meanFragmentationRatio, fb.meanFragmentationRatio,
             d.meanFragmentationRatio);
    ratioRow("max F", fa.maxFragmentationRatio, fb.maxFragmentationRatio, d.maxFragmentationRatio);
    bytesRow("smallest largest free", fa.minLargestFreeBytes, fb.minLargestFreeBytes,
             d.minLargestFreeBytes);
    fmt::print("{:<26} {:>14} {:>14} {:>+14}\n", "most fragments", fa.maxFragmentCount,
               fb.maxFragmentCount, d.maxFragmentCount);
    auto coll = [](const SideSummary& s) {
        return s.collapsesKnown() ? std::to_string(s.collapses) : std::string("unknown");
    };
    fmt::print("{:<26} {:>14} {:>14} {:>14}\n", "collapses", coll(c.a), coll(c.b),
               c.a.collapsesKnown() && c.b.collapsesKnown()
                   ? fmt::format("{:+}", c.difference.collapses)
                   : std::string("-"));
    fmt::print("{:<26} {:>14} {:>14} {:>+14}\n", "OOMs", c.a.ooms, c.b.ooms, c.difference.ooms);
    fmt::print("\n{} ({} rows)\n", c.byFrame ? "per frame" : "by time from start", c.rows.size());
    fmt::print("{:>12} {:>12} {:>12} {:>7} {:>7} {:>12} {:>12} {:>5} {:>5}\n",
               c.byFrame ? "frame" : "offset s", "resv A", "resv B", "F A", "F B", "largest A",
               "largest B", "OOM", "coll");
    for (const CompareRow& r : c.rows) {
        const std::string key = c.byFrame ? std::to_string(r.key)
                                          : fmt::format("{:.3f}", static_cast<double>(r.key) / 1e9);
        // "-" where a session has no data (past its end, or a frame it lacks).
        auto bytes = [](const PointFigures& p, uint64_t v) {
            return p.present ? humanBytes(v) : std::string("-");
        };
        auto ratio = [](const PointFigures& p) {
            return p.present ? fmt::format("{:.3f}", p.fragmentation) : std::string("-");
        };
        fmt::print("{:>12} {:>12} {:>12} {:>7} {:>7} {:>12} {:>12} {:>5} {:>5}\n", key,
                   bytes(r.a, r.a.reserved), bytes(r.b, r.b.reserved), ratio(r.a), ratio(r.b),
                   bytes(r.a, r.a.largestFree), bytes(r.b, r.b.largestFree),
                   fmt::format("{}/{}", r.a.ooms, r.b.ooms),
                   c.byFrame
                       ? fmt::format("{}{}", r.a.collapsed ? "A" : "-", r.b.collapsed ? "B" : "-")
                       : "");
    }
    for (const auto& n : c.notes)
        fmt::print("note: {}\n", n);
    return Ok;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "compare",
    .synopsis = "A B [--samples N] [--json] | A B --by callsite [--at peak|end] [--top N] [--json]",
    .summary = "Two sessions side by side: reserved, F, largest free block, collapses, OOMs",
    .options = {{"samples", "N", "rows when the sessions are aligned by time (default 100)"},
                {"by", "callsite",
                 "instead: the bytes each call site holds in A and in B, largest growth\n"
                 "first"},
                {"at", "peak|end",
                 "with --by callsite: at each run's allocated-bytes peak (default) or end"},
                {"top", "N", "with --by callsite: text rows (default 20)"},
                {"json", "", "print one JSON object instead of text"}},
    .details =
        "Use it for an actual run against its what-if replay (fragscope whatif -o) or for two\n"
        "recordings. Frames are aligned by number when both sessions have frames, else rows are\n"
        "instants at equal offsets from each session's start. Figures are the analysis\n"
        "engine's, on each session's default track: the summary `report` prints (exact over\n"
        "every instant; docs/analysis.md \"Summary\"); a session with no data at a row (past\n"
        "its end, a frame it lacks) shows none there. JSON: {schema_version, a, b, difference,\n"
        "aligned_by, rows: [{frame|offset_ns, a: {...}|null, b: {...}|null}], notes}\n"
        "(fields: docs/json.md). See docs/whatif.md.\n"
        "--by callsite: each session's default track, live blocks grouped by call site (the\n"
        "innermost user frame, as the call-site table shows) at each run's allocated-bytes\n"
        "peak, or end with --at end. JSON: {schema_version, at, a: {file, time_ns,\n"
        "held_bytes}, b: {...}, stacks_recorded, callsites: [{site, a_bytes, b_bytes,\n"
        "delta_bytes}]}, by delta_bytes descending.",
    .run = runCompare,
    .order = 76,
});
