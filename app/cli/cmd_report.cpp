// fragscope report FILE [--json]: capture health, allocator summary over time, per-frame table,
// collapses with their top precursors, and correlations (each with its n).
#include "cli_engine.h"
#include "cli_settings.h"
#include "command.h"
#include "core/analysis/engine.h"
#include "core/analysis/oom.h"
#include "core/analysis/serialize.h"
#include "core/json.h"
#include "core/store/session.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <set>

using namespace fs;
using namespace fs::cli;
using namespace fs::analysis;

namespace {

struct TrackSummary
{
    Track track;
    State end;
    std::vector<PoolState> endPools; // when the track has more than one memory pool
    double peakReserved = 0, peakAllocated = 0, peakOutside = 0, maxRatio = 0, minLargest = 0,
           maxFragments = 0;
    int64_t maxRatioTime = 0;
    Trend ratioTrend, entropyTrend;
    size_t bursts = 0;
    int64_t largestBurst = 0;
    int64_t samples = 0;
};

TrackSummary summarise(const Engine& e, const Track& t, int64_t step, const settings::Settings& st)
{
    TrackSummary s;
    s.track = t;
    s.end = e.stateAt(t.device, t.level, e.timeEnd());
    s.endPools = e.poolStatesAt(t.device, t.level, e.timeEnd());
    if (s.endPools.size() < 2) s.endPools.clear();
    TimelineOptions o;
    o.device = t.device;
    o.level = t.level;
    o.step = step;
    o.entropyWindowNs = st.entropyWindowNs;
    const Timeline tl = e.timeline(o);
    s.samples = static_cast<int64_t>(tl.time.size());
    s.minLargest = tl.largestFragment.empty() ? 0 : tl.largestFragment.front();
    s.maxRatioTime = e.timeBegin();
    for (size_t i = 0; i < tl.time.size(); ++i) {
        s.peakReserved = std::max(s.peakReserved, tl.reserved[i]);
        s.peakAllocated = std::max(s.peakAllocated, tl.allocated[i]);
        s.peakOutside = std::max(s.peakOutside, tl.allocatedOutside[i]);
        s.maxFragments = std::max(s.maxFragments, tl.fragmentCount[i]);
        if (tl.reserved[i] > 0) s.minLargest = std::min(s.minLargest, tl.largestFragment[i]);
        if (tl.fragmentationRatio[i] > s.maxRatio) {
            s.maxRatio = tl.fragmentationRatio[i];
            s.maxRatioTime = tl.time[i];
        }
    }
    s.ratioTrend = e.trend(tl, "fragmentation_ratio", kNoTime, kNoTime);
    s.entropyTrend = e.trend(tl, "event_entropy", kNoTime, kNoTime);
    const BurstSummary bursts = e.burstSummary(t.device, t.level, st.burstGapNs);
    s.bursts = static_cast<size_t>(bursts.bursts);
    s.largestBurst = bursts.largestAllocations;
    return s;
}

void writeTrend(JsonWriter& j, const char* name, const Trend& t)
{
    j.key(name)
        .beginObject()
        .field("slope_per_hour", t.slope)
        .field("intercept", t.intercept)
        .field("r2", t.r2)
        .field("n", t.n)
        .endObject();
}

int runReport(Args& a)
{
    a.expectPositional(1, "FILE");
    const int64_t top = a.getInt("top", 5);
    const settings::Settings st = commandSettings(a);
    const auto engine = openEngine(a.positional()[0], st.loadOptions());
    const Engine& e = *engine;
    const SessionSummary& sum = e.summary();
    const bool ordinal = sum.timeAxis == TimeAxis::Ordinal;
    const int64_t step = std::max<int64_t>(1, (e.timeEnd() - e.timeBegin()) / 2000);
    std::vector<TrackSummary> tracks;
    for (const Track& t : e.tracks())
        tracks.push_back(summarise(e, t, step, st));
    const auto def = e.defaultTrack(0);
    std::vector<CollapseReport> reports;
    for (const Collapse& c : e.collapses())
        if (auto r = e.collapseReport(c.firstFrame)) {
            if (r->precursors.size() > static_cast<size_t>(std::max<int64_t>(top, 0)))
                r->precursors.resize(static_cast<size_t>(std::max<int64_t>(top, 0)));
            reports.push_back(std::move(*r));
        }
    const std::vector<OomDiagnosis> ooms = e.ooms();
    std::vector<Correlation> corr;
    for (const Correlation& c : e.correlations())
        if (c.n >= 3) corr.push_back(c);

    if (a.flag("json")) {
        JsonWriter j;
        j.beginObject();
        j.field("file", a.positional()[0]);
        j.field("synthetic", sum.synthetic);
        j.field("time_axis", ordinal ? "ordinal" : "ns");
        j.field("time_begin", e.timeBegin());
        j.field("time_end", e.timeEnd());
        j.field("events", sum.events);
        j.key("health").beginObject();
        j.field("dropped_records", sum.health.droppedRecords);
        j.field("ended_abruptly", sum.health.endedAbruptly);
        j.field("recording", sum.health.recording);
        j.key("anomalies").beginObject();
        for (const auto& [k, v] : sum.health.anomalies)
            j.field(k, v);
        j.endObject();
        j.key("warnings").beginArray();
        for (const auto& w : sum.health.warnings)
            j.value(w);
        j.endArray();
        j.endObject();
        writeCaveats(j, e.caveats());
        j.key("tracks").beginArray();
        for (const TrackSummary& t : tracks) {
            j.beginObject();
            j.field("device", t.track.device);
            j.field("level", std::string(levelName(t.track.level)));
            j.field("allocations", t.track.allocations);
            j.field("regions", t.track.regions);
            j.field("peak_reserved_bytes", static_cast<uint64_t>(t.peakReserved));
            j.field("peak_allocated_bytes", static_cast<uint64_t>(t.peakAllocated));
            j.field("peak_allocated_outside_regions_bytes", static_cast<uint64_t>(t.peakOutside));
            j.field("max_fragmentation_ratio", t.maxRatio);
            j.field("max_fragmentation_ratio_time", t.maxRatioTime);
            j.field("min_largest_free_fragment_bytes", static_cast<uint64_t>(t.minLargest));
            j.field("max_fragment_count", static_cast<int64_t>(t.maxFragments));
            j.field("timeline_samples", t.samples);
            writeTrend(j, "fragmentation_ratio_trend", t.ratioTrend);
            writeTrend(j, "event_entropy_trend", t.entropyTrend);
            j.field("bursts", static_cast<int64_t>(t.bursts));
            j.field("largest_burst_allocations", t.largestBurst);
            j.key("end_state");
            writeState(j, t.end);
            if (!t.endPools.empty()) { // private pools apart (docs/analysis.md, "Pools")
                j.key("end_state_pools").beginArray();
                for (const PoolState& p : t.endPools)
                    writePoolState(j, p);
                j.endArray();
            }
            j.endObject();
        }
        j.endArray();
        j.key("frames").beginArray();
        for (const FrameInfo& f : e.frames()) {
            j.beginObject();
            j.field("index", f.index);
            if (f.start == kNoTime) {
                j.key("start").null();
                j.key("end").null();
            } else {
                j.field("start", f.start).field("end", f.end);
            }
            j.key("metrics").beginObject();
            for (const auto& [k, v] : f.metrics)
                j.field(k, v);
            j.endObject();
            j.field("breaks_rule", f.breaksRule);
            j.field("collapse", f.collapse);
            j.field("kernels", f.kernels);
            j.field("new_kernel_variants", f.newKernelVariants);
            for (const FrameAllocator& fa : f.allocator) {
                if (!def || fa.device != def->device || fa.level != def->level) continue;
                j.key("allocator").beginObject();
                j.field("device", fa.device).field("level", std::string(levelName(fa.level)));
                j.field("largest_fragment_end", fa.atEnd.largestFreeFragmentBytes);
                j.field("fragmentation_ratio_end", fa.atEnd.fragmentationRatio);
                j.field("fragment_count_end", fa.atEnd.fragmentCount);
                j.field("fragment_entropy_end", fa.atEnd.fragmentEntropyBits);
                j.field("min_largest_fragment", fa.minLargestFragment);
                j.field("max_fragmentation_ratio", fa.maxRatio);
                j.field("allocs", fa.allocs)
                    .field("frees", fa.frees)
                    .field("alloc_bytes", fa.allocBytes);
                j.endObject();
            }
            j.endObject();
        }
        j.endArray();
        j.key("rules").beginArray();
        for (const CollapseRule& r : e.rules())
            j.value(r.describe());
        j.endArray();
        j.key("collapses").beginArray();
        for (const CollapseReport& r : reports)
            writeCollapseReport(j, r);
        j.endArray();
        j.key("correlations").beginArray();
        for (const Correlation& c : corr)
            writeCorrelation(j, c);
        j.endArray();
        j.key("ooms").beginArray();
        for (const OomDiagnosis& o : ooms)
            writeOom(j, o);
        j.endArray();
        j.endObject();
        fmt::print("{}\n", j.str());
        return Ok;
    }

    fmt::print("fragscope report: {}\n", a.positional()[0]);
    if (sum.synthetic) fmt::print("SYNTHETIC DATA (simulated, not a measurement)\n");
    fmt::print("\nCapture health\n");
    fmt::print("  span {} .. {}, {} events\n", formatTime(e.timeBegin(), e.timeBegin(), ordinal),
               formatTime(e.timeEnd(), e.timeBegin(), ordinal), sum.events);
    fmt::print("  dropped records {}, anomalies {}, ended abruptly {}\n", sum.health.droppedRecords,
               sum.health.anomalyTotal(), sum.health.endedAbruptly ? "YES" : "no");
    for (const auto& n : e.caveats().notes)
        fmt::print("  note: {}\n", n);
    fmt::print("\nAllocator over time\n");
    for (const TrackSummary& t : tracks) {
        fmt::print("  device {} level {}: {} allocations, {} regions\n", t.track.device,
                   levelName(t.track.level), t.track.allocations, t.track.regions);
        fmt::print("    peak reserved {}, peak allocated {}\n",
                   humanBytes(static_cast<uint64_t>(t.peakReserved)),
                   humanBytes(static_cast<uint64_t>(t.peakAllocated)));
        if (t.peakOutside > 0)
            fmt::print("    peak allocated outside any region {}\n",
                       humanBytes(static_cast<uint64_t>(t.peakOutside)));
        fmt::print("    max F {:.4f} at {}, min largest fragment {}, max fragments {}\n",
                   t.maxRatio, formatTime(t.maxRatioTime, e.timeBegin(), ordinal),
                   humanBytes(static_cast<uint64_t>(t.minLargest)),
                   static_cast<int64_t>(t.maxFragments));
        fmt::print("    trend of F: {:+.6f}/h (R² {:.3f}, n {}); event-size entropy: {:+.6f} "
                   "bits/h (R² {:.3f})\n",
                   t.ratioTrend.slope, t.ratioTrend.r2, t.ratioTrend.n, t.entropyTrend.slope,
                   t.entropyTrend.r2);
        fmt::print("    bursts (gap < 5 ms): {}, largest {} allocations\n", t.bursts,
                   t.largestBurst);
        fmt::print("    at end: F {:.4f}, {} fragments, largest {}, entropy {:.4f} bits\n",
                   t.end.fragmentationRatio, t.end.fragmentCount,
                   humanBytes(t.end.largestFreeFragmentBytes), t.end.fragmentEntropyBits);
        for (const PoolState& p : t.endPools)
            fmt::print("      pool {}: reserved {}, allocated {}, F {:.4f}, {} fragments, largest "
                       "{}\n",
                       poolLabel(p.pool, p.state.level), humanBytes(p.state.reservedBytes),
                       humanBytes(p.state.allocatedBytes), p.state.fragmentationRatio,
                       p.state.fragmentCount, humanBytes(p.state.largestFreeFragmentBytes));
    }
    if (!e.frames().empty()) {
        std::set<std::string> names;
        for (const FrameInfo& f : e.frames())
            for (const auto& [k, v] : f.metrics)
                names.insert(k);
        fmt::print("\nFrames ({})\n  {:>6} {:>12} {:>8} {:>12}", e.frames().size(), "frame",
                   "largest", "F", "new kernels");
        for (const auto& n : names)
            fmt::print(" {:>18}", n);
        fmt::print("\n");
        for (const FrameInfo& f : e.frames()) {
            std::string largest = "-", ratio = "-";
            for (const FrameAllocator& fa : f.allocator)
                if (def && fa.device == def->device && fa.level == def->level) {
                    largest = humanBytes(fa.atEnd.largestFreeFragmentBytes);
                    ratio = fmt::format("{:.4f}", fa.atEnd.fragmentationRatio);
                }
            fmt::print("  {:>6} {:>12} {:>8} {:>12}", f.index, largest, ratio, f.newKernelVariants);
            for (const auto& n : names) {
                auto it = f.metrics.find(n);
                fmt::print(" {:>18}", it == f.metrics.end() ? std::string("-")
                                                            : fmt::format("{:.4g}", it->second));
            }
            fmt::print("{}\n", f.collapse >= 0 ? "  COLLAPSE" : "");
        }
    }
    if (!ooms.empty()) {
        fmt::print("\nOOMs ({})\n", ooms.size());
        for (const OomDiagnosis& o : ooms)
            fmt::print("{}", oomText(o, e.timeBegin(), ordinal));
    }
    fmt::print("\nCollapses ({})\n", reports.size());
    for (const CollapseReport& r : reports)
        fmt::print("{}", collapseReportText(r, e.timeBegin(), ordinal, r.precursors.size()));
    if (!corr.empty()) {
        fmt::print("\nCorrelations (per frame, default track; q: Benjamini-Hochberg over these {} "
                   "pairs; significant only when q < 0.05)\n",
                   corr.size());
        for (const Correlation& c : corr)
            fmt::print("  {}\n", correlationText(c));
    }
    return Ok;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "report",
    .synopsis = "FILE [--top K] [--json] [--quiet]",
    .summary =
        "Summary for people and CI: health, allocator over time, frames, collapses, correlations",
    .options = withSettingsOptions(
        {{"top", "K", "precursors shown per collapse (default 5)"},
         {"json", "", "print one JSON object instead of text"},
         {"quiet", "", "no progress line on stderr (shown only when stderr is a terminal)"}}),
    .details =
        "Correlations are Pearson and Spearman between per-frame allocator figures and each\n"
        "frame metric, always with n and a two-sided p-value; those with n < 3 are left out.\n"
        "Each also has a q-value (Benjamini-Hochberg over the pairs the report tests): only\n"
        "q < 0.05 is called significant.\n"
        "Each collapse starts with its verdict: allocator-related with the mechanism and the\n"
        "evidence rows, or no allocator precursor stands out (docs/analysis.md \"Verdict\").\n"
        "Each OOM is diagnosed (JSON key \"ooms\"): the request, device free memory, reserved\n"
        "and allocated bytes, what was cached in the request's pool and stream, pending frees\n"
        "that would have fitted, and a cause (capacity, fragmentation, pending_free, external)\n"
        "with a suggestion; docs/analysis.md gives the rules.",
    .run = runReport,
    .order = 41,
});
