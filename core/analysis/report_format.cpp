// Each section of the report is a pair of writers, one per format, listed once in kSections: a
// new section is a Report member, its computation in buildReport() and a row here.
#include "report_format.h"

#include "graphs_text.h"
#include "oom.h"
#include "serialize.h"

#include "core/json.h"

#include <fmt/format.h>

namespace fs::analysis {

namespace {

std::string at(const Report& r, int64_t t)
{
    return formatTime(t, r.timeBegin, r.ordinal());
}

// The per-frame figures of the report's default track, or nullptr.
const FrameAllocator* frameAllocator(const Report& r, const FrameInfo& f)
{
    if (!r.defaultTrack) return nullptr;
    for (const FrameAllocator& fa : f.allocator)
        if (fa.device == r.defaultTrack->device && fa.level == r.defaultTrack->level) return &fa;
    return nullptr;
}

// ---- header and capture health ----

void headerJson(JsonWriter& j, const Report& r)
{
    j.field("file", r.file);
    j.field("synthetic", r.synthetic);
    j.field("time_axis", r.ordinal() ? "ordinal" : "ns");
    j.field("time_begin_ns", r.timeBegin);
    j.field("time_end_ns", r.timeEnd);
    j.field("events", r.events);
    j.key("health");
    writeHealth(j, r.health);
    writeCaveats(j, r.caveats);
}

void headerText(std::string& out, const Report& r)
{
    out += fmt::format("fragscope report: {}\n", r.file);
    if (r.synthetic) out += "SYNTHETIC DATA (simulated, not a measurement)\n";
    out += "\nCapture health\n";
    out +=
        fmt::format("  span {} .. {}, {} events\n", at(r, r.timeBegin), at(r, r.timeEnd), r.events);
    out += fmt::format("  dropped records {}, anomalies {}, ended abruptly {}\n",
                       r.health.droppedRecords, r.health.anomalyTotal(),
                       r.health.endedAbruptly ? "YES" : "no");
    for (const auto& n : r.caveats.notes)
        out += fmt::format("  note: {}\n", n);
}

// ---- allocator summary per track ----

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

void tracksJson(JsonWriter& j, const Report& r)
{
    j.key("tracks").beginArray();
    for (const TrackReport& t : r.tracks) {
        j.beginObject();
        j.field("device", t.track.device);
        j.field("level", std::string(levelName(t.track.level)));
        j.field("allocations", t.track.allocations);
        j.field("regions", t.track.regions);
        writeSummaryFields(j, t.figures);
        if (t.trendNotGiven.empty()) {
            writeTrend(j, "fragmentation_ratio_trend", t.ratioTrend);
            writeTrend(j, "event_size_entropy_trend", t.entropyTrend);
            j.key("trend_not_given").null();
        } else {
            j.key("fragmentation_ratio_trend").null();
            j.key("event_size_entropy_trend").null();
            j.field("trend_not_given", t.trendNotGiven);
        }
        j.field("trend_samples", t.trendSamples);
        j.field("burst_gap_ns", t.burstGapNs);
        if (t.burstsNotGiven.empty()) {
            j.field("bursts", t.bursts.bursts);
            j.field("largest_burst_allocations", t.bursts.largestAllocations);
            j.key("bursts_not_given").null();
        } else {
            j.key("bursts").null();
            j.key("largest_burst_allocations").null();
            j.field("bursts_not_given", t.burstsNotGiven);
        }
        j.key("end_state");
        writeState(j, t.end);
        if (!t.pools.empty()) { // private pools apart (docs/analysis.md, "Pools")
            j.key("pools").beginArray();
            for (const PoolReport& p : t.pools) {
                j.beginObject();
                j.field("pool", p.pool);
                j.field("pool_label", poolLabel(p.pool, t.track.level));
                writeSummaryFields(j, p.figures);
                j.key("end_state");
                writeState(j, p.end);
                j.endObject();
            }
            j.endArray();
        }
        j.endObject();
    }
    j.endArray();
}

void tracksText(std::string& out, const Report& r)
{
    out += "\nAllocator over time (exact over every instant; docs/analysis.md \"Summary\")\n";
    for (const TrackReport& t : r.tracks) {
        out += fmt::format("  device {} level {}: {} allocations, {} regions\n", t.track.device,
                           levelName(t.track.level), t.track.allocations, t.track.regions);
        out += summaryText(t.figures, r.timeBegin, r.ordinal(), "    ");
        if (t.trendNotGiven.empty())
            out += fmt::format("    trend of F: {:+.6f}/h (R² {:.3f}, n {} samples); event-size "
                               "entropy: {:+.6f} bits/h (R² {:.3f})\n",
                               t.ratioTrend.slope, t.ratioTrend.r2, t.ratioTrend.n,
                               t.entropyTrend.slope, t.entropyTrend.r2);
        else
            out += fmt::format("    trends: not given: {}\n", t.trendNotGiven);
        if (t.burstsNotGiven.empty())
            out += fmt::format("    bursts (gap < {:g} ms): {}, largest {} allocations\n",
                               static_cast<double>(t.burstGapNs) / 1e6, t.bursts.bursts,
                               t.bursts.largestAllocations);
        else
            out += fmt::format("    bursts: not given: {}\n", t.burstsNotGiven);
        out += fmt::format("    at end: F {:.4f}, {} fragments, largest {}, entropy {:.4f} bits\n",
                           t.end.fragmentationRatio, t.end.fragmentCount,
                           humanBytes(t.end.largestFreeFragmentBytes), t.end.fragmentEntropyBits);
        for (const PoolReport& p : t.pools) {
            out += fmt::format("    pool {}\n", poolLabel(p.pool, t.track.level));
            out += summaryText(p.figures, r.timeBegin, r.ordinal(), "      ");
            out += fmt::format("      at end: reserved {}, allocated {}, F {:.4f}, {} fragments, "
                               "largest {}\n",
                               humanBytes(p.end.reservedBytes), humanBytes(p.end.allocatedBytes),
                               p.end.fragmentationRatio, p.end.fragmentCount,
                               humanBytes(p.end.largestFreeFragmentBytes));
        }
    }
}

// ---- memory by category at the peak ----

void categoriesJson(JsonWriter& j, const Report& r)
{
    j.key("peak_categories");
    if (!r.peakCategories) {
        j.null();
        return;
    }
    j.beginObject();
    writeCategoryFields(j, *r.peakCategories);
    j.endObject();
}

void categoriesText(std::string& out, const Report& r)
{
    if (!r.peakCategories) return;
    const CategoryBreakdown& b = *r.peakCategories;
    out += fmt::format("  by category at the allocated peak of device {} level {} ({}): {}\n",
                       b.device, levelName(b.level), at(r, b.time), categoryLine(b));
}

// ---- frames ----

void framesJson(JsonWriter& j, const Report& r)
{
    j.key("default_track");
    if (r.defaultTrack)
        j.beginObject()
            .field("device", r.defaultTrack->device)
            .field("level", std::string(levelName(r.defaultTrack->level)))
            .endObject();
    else
        j.null();
    j.key("frames").beginArray();
    for (const FrameInfo& f : r.frames) {
        j.beginObject();
        j.field("frame", f.index);
        writeTimeField(j, "start_ns", f.start);
        writeTimeField(j, "end_ns", f.start == kNoTime ? kNoTime : f.end);
        j.key("metrics").beginObject();
        for (const auto& [k, v] : f.metrics)
            j.field(k, v);
        j.endObject();
        j.field("breaks_rule", f.breaksRule);
        j.key("collapse");
        f.collapse < 0 ? j.null() : j.value(f.collapse);
        j.field("kernels", f.kernels);
        j.field("new_kernel_variants", f.newKernelVariants);
        if (const FrameAllocator* fa = frameAllocator(r, f)) { // the default track's
            j.key("allocator").beginObject();
            j.field("device", fa->device).field("level", std::string(levelName(fa->level)));
            j.field("reserved_bytes_at_end", fa->atEnd.reservedBytes);
            j.field("allocated_bytes_at_end", fa->atEnd.allocatedBytes);
            j.field("largest_free_bytes_at_end", fa->atEnd.largestFreeFragmentBytes);
            j.field("fragmentation_ratio_at_end", fa->atEnd.fragmentationRatio);
            j.field("fragment_count_at_end", fa->atEnd.fragmentCount);
            j.field("fragment_entropy_bits_at_end", fa->atEnd.fragmentEntropyBits);
            j.field("min_largest_free_bytes", fa->minLargestFragment);
            j.field("max_fragmentation_ratio", fa->maxRatio);
            j.field("max_fragment_count", fa->maxFragmentCount);
            j.field("allocations", fa->allocs);
            j.field("frees", fa->frees);
            j.field("allocation_bytes", fa->allocBytes);
            j.endObject();
        }
        j.endObject();
    }
    j.endArray();
    j.key("rules").beginArray();
    for (const CollapseRule& rule : r.rules)
        j.value(rule.describe());
    j.endArray();
    j.key("rules_not_breaks").beginArray();
    for (const CommonRule& c : r.commonRules)
        j.beginObject()
            .field("rule", c.rule.describe())
            .field("fires", c.fires)
            .field("frames", c.frames)
            .field("text", c.describe())
            .endObject();
    j.endArray();
}

void framesText(std::string& out, const Report& r)
{
    if (r.frames.empty()) return;
    out += fmt::format("\nFrames ({})\n  {:>6} {:>12} {:>8} {:>12}", r.frames.size(), "frame",
                       "largest", "F", "new kernels");
    for (const auto& n : r.frameMetricNames)
        out += fmt::format(" {:>18}", n);
    out += "\n";
    for (const FrameInfo& f : r.frames) {
        std::string largest = "-", ratio = "-";
        if (const FrameAllocator* fa = frameAllocator(r, f)) {
            largest = humanBytes(fa->atEnd.largestFreeFragmentBytes);
            ratio = fmt::format("{:.4f}", fa->atEnd.fragmentationRatio);
        }
        out += fmt::format("  {:>6} {:>12} {:>8} {:>12}", f.index, largest, ratio,
                           f.newKernelVariants);
        for (const auto& n : r.frameMetricNames) {
            auto it = f.metrics.find(n);
            out +=
                fmt::format(" {:>18}", it == f.metrics.end() ? std::string("-")
                                                             : fmt::format("{:.4g}", it->second));
        }
        out += f.collapse >= 0 ? "  COLLAPSE\n" : "\n";
    }
}

// ---- OOMs, graphs, collapses, correlations ----

void oomsJson(JsonWriter& j, const Report& r)
{
    j.key("ooms").beginArray();
    for (const OomDiagnosis& o : r.ooms)
        writeOom(j, o);
    j.endArray();
}

void oomsText(std::string& out, const Report& r)
{
    if (r.ooms.empty()) return;
    out += fmt::format("\nOOMs ({})\n", r.ooms.size());
    for (const OomDiagnosis& o : r.ooms)
        out += oomText(o, r.timeBegin, r.ordinal());
}

void graphsJson(JsonWriter& j, const Report& r)
{
    if (!r.graphs) return;
    j.key("graphs");
    writeGraphsSummary(j, *r.graphs);
}

void graphsText(std::string& out, const Report& r)
{
    if (!r.graphs || (r.graphs->graphs == 0 && r.graphs->privatePools == 0)) return;
    out += "\nCUDA graphs and pools\n" + graphsSummaryText(*r.graphs);
}

void collapsesJson(JsonWriter& j, const Report& r)
{
    j.key("collapses").beginArray();
    for (const CollapseReport& c : r.collapses)
        writeCollapseReport(j, c);
    j.endArray();
}

void collapsesText(std::string& out, const Report& r)
{
    out += fmt::format("\nCollapses ({})\n", r.collapses.size());
    for (const CommonRule& c : r.commonRules)
        out += "  " + c.explain() + "\n";
    for (const CollapseReport& c : r.collapses)
        out += collapseReportText(c, r.timeBegin, r.ordinal(), c.precursors.size());
}

void correlationsJson(JsonWriter& j, const Report& r)
{
    j.key("correlations").beginArray();
    for (const Correlation& c : r.correlations)
        writeCorrelation(j, c);
    j.endArray();
}

void correlationsText(std::string& out, const Report& r)
{
    if (r.correlations.empty()) return;
    out +=
        fmt::format("\nCorrelations (per frame, default track; test: Pearson and Spearman of the "
                    "frame-to-frame changes, allocator leading by 0 or 1 frame, Bartlett's "
                    "effective sample size n_eff, Bonferroni over the four; q: Benjamini-Hochberg "
                    "over these {} pairs; significant only "
                    "when q < {:g})\n",
                    r.correlations.size(), kSignificanceLevel);
    for (const Correlation& c : r.correlations)
        out += "  " + correlationText(c) + "\n";
}

struct Section
{
    void (*json)(JsonWriter&, const Report&);
    void (*text)(std::string&, const Report&);
};

// In output order.
constexpr Section kSections[] = {
    {headerJson, headerText},
    {tracksJson, tracksText},
    {categoriesJson, categoriesText},
    {framesJson, framesText},
    {oomsJson, oomsText},
    {graphsJson, graphsText},
    {collapsesJson, collapsesText},
    {correlationsJson, correlationsText},
};

} // namespace

std::string reportText(const Report& r)
{
    std::string out;
    for (const Section& s : kSections)
        s.text(out, r);
    return out;
}

std::string reportJson(const Report& r)
{
    JsonWriter j;
    j.beginDocument();
    for (const Section& s : kSections)
        s.json(j, r);
    j.endObject();
    return j.str() + "\n";
}

} // namespace fs::analysis
