#include "serialize.h"

#include "graphs_text.h"
#include "metrics.h"
#include "stats.h"

#include <cmath>
#include <fmt/format.h>

namespace fs::analysis {

std::string formatTime(int64_t t, int64_t begin, bool ordinal)
{
    if (ordinal) return fmt::format("#{}", t);
    return fmt::format("{:.6f} s", static_cast<double>(t - begin) / 1e9);
}

void writeCaveats(JsonWriter& j, const Caveats& c)
{
    j.key("caveats").beginArray();
    for (const auto& n : c.notes)
        j.value(n);
    j.endArray();
}

void writeHealth(JsonWriter& j, const HealthSummary& h, const GraphHealth* graphs)
{
    j.beginObject();
    j.field("dropped_records", h.droppedRecords);
    j.field("ended_abruptly", h.endedAbruptly);
    j.field("recording", h.recording);
    j.key("anomalies").beginObject();
    for (const auto& [k, v] : h.anomalies)
        j.field(k, v);
    j.endObject();
    j.field("anomaly_total", h.anomalyTotal());
    j.key("warnings").beginArray();
    for (const auto& w : h.warnings)
        j.value(w);
    j.endArray();
    if (graphs) {
        j.key("graphs"); // CUDA-graph input (docs/analysis.md "Graphs and pools")
        writeGraphHealth(j, *graphs);
    }
    j.endObject();
}

void writeHistogramBins(JsonWriter& j, const std::vector<HistogramBin>& bins)
{
    j.beginArray();
    for (const HistogramBin& b : bins) {
        j.beginObject().field("lo_bytes", b.lo);
        if (b.hi == 0)
            j.key("hi_bytes").null();
        else
            j.field("hi_bytes", b.hi);
        j.field("count", b.count).field("bytes", b.bytes).endObject();
    }
    j.endArray();
}

void writeStateFields(JsonWriter& j, const State& s)
{
    j.field("device", s.device);
    j.field("level", std::string(levelName(s.level)));
    j.field("time_ns", s.time);
    j.field("region_count", s.regionCount);
    j.field("live_allocations", s.liveAllocations);
    j.field("reserved_bytes", s.reservedBytes);
    j.field("allocated_bytes", s.allocatedBytes);
    j.field("allocated_outside_regions_bytes", s.allocatedOutsideBytes);
    j.field("free_bytes", s.freeBytes);
    j.field("fragment_count", s.fragmentCount);
    j.field("largest_free_bytes", s.largestFreeFragmentBytes);
    j.field("fragmentation_ratio", s.fragmentationRatio);
    j.field("fragment_entropy_bits", s.fragmentEntropyBits);
    // Pending frees apart (docs/analysis.md "Pending frees"), and the figures once they complete
    // (PyTorch memory_viz's free and F, which count them as free).
    j.field("pending_free_blocks", s.pendingFreeBlocks);
    j.field("pending_free_bytes", s.pendingFreeBytes);
    j.field("free_including_pending_bytes", s.freeIncludingPendingBytes());
    j.field("largest_free_once_pending_complete_bytes", s.largestFreeOncePendingCompleteBytes);
    j.field("fragmentation_ratio_once_pending_complete", s.fragmentationRatioOncePendingComplete);
    j.field("event_size_entropy_bits", s.eventSizeEntropyBits);
    j.field("entropy_window_ns", s.entropyWindowNs);
    j.key("histogram");
    writeHistogramBins(j, s.histogram.log2);
    j.key("clusters");
    writeHistogramBins(j, s.histogram.clusters);
}

void writePoolState(JsonWriter& j, const PoolState& p)
{
    j.beginObject();
    j.field("pool", p.pool);
    j.field("pool_label", poolLabel(p.pool, p.state.level));
    writeStateFields(j, p.state);
    j.endObject();
}

void writeState(JsonWriter& j, const State& s)
{
    j.beginObject();
    writeStateFields(j, s);
    j.endObject();
}

void writePrecursor(JsonWriter& j, const Precursor& p)
{
    j.beginObject();
    j.field("kind", precursorKindName(p.kind));
    j.field("role", precursorRoleName(p.role));
    if (p.mechanism.empty())
        j.key("mechanism").null();
    else
        j.field("mechanism", p.mechanism);
    j.field("time_ns", p.time);
    j.field("device", p.device);
    j.field("level", std::string(levelName(p.level)));
    j.field("address", p.address);
    j.field("size_bytes", p.size);
    if (p.allocationId >= 0) j.field("allocation_id", p.allocationId);
    j.field("score", p.score);
    j.field("description", p.description);
    j.field("count", p.count);
    j.field("background", p.background);
    const Evidence& e = p.evidence;
    j.key("evidence").beginObject();
    j.field("feature", e.feature);
    j.field("frame", e.frame);
    j.field("value", e.value);
    j.field("healthy_median", e.healthyMedian);
    j.field("healthy_scale", e.healthyScale);
    // JSON has no infinity: a z that the healthy frames' zero spread makes infinite is null.
    j.field("z", e.z);
    j.field("threshold", e.threshold);
    j.field("floor", e.floor); // null when -inf (no healthy value departed infinitely)
    j.field("stands_out", e.standsOut);
    j.field("allocator_linked", e.allocatorLinked);
    j.field("explains_failure", e.explainsFailure);
    j.field("closeness", e.closeness);
    j.field("novelty", e.novelty);
    j.field("largest_effect", e.largestEffect);
    j.field("largest_drop_bytes", e.largestDropBytes);
    j.field("fragmentation_ratio_jump", e.fragmentationJump);
    j.field("kernel_effect", e.kernelEffect);
    j.field("seen_in_healthy", e.seenInHealthy);
    j.field("healthy_frames", e.healthyFrames);
    j.field("run_healthy_frames", e.runHealthyFrames);
    j.field("run_departed", e.runDeparted);
    j.field("base_rate", e.baseRate);
    j.field("common", e.common);
    j.endObject();
    if (p.shift) {
        const KernelShift& s = *p.shift;
        j.key("shift").beginObject();
        j.field("basis", s.basis);
        j.field("family", s.family);
        j.field("families", s.families);
        j.field("variant", s.variant);
        j.field("usual", s.usual);
        j.field("share_before", s.shareBefore);
        j.field("share_after", s.shareAfter);
        j.field("share_after_low", s.shareAfterLow);
        j.field("calls_before", s.callsBefore);
        j.field("total_before", s.totalBefore);
        j.field("calls_after", s.callsAfter);
        j.field("total_after", s.totalAfter);
        j.field("first_frame", s.firstFrame);
        j.field("request_z", s.requestZ); // null when infinite
        j.field("request_threshold", s.requestThreshold);
        j.key("preceding_allocation").beginObject();
        j.field("change", requestChangeName(s.preceding.change));
        if (s.preceding.allocationId >= 0) j.field("allocation_id", s.preceding.allocationId);
        j.field("size_bytes", s.preceding.size);
        j.field("usual_size_bytes", s.preceding.usualSize);
        j.field("address", s.preceding.address);
        j.field("usual_address", s.preceding.usualAddress);
        j.field("regions_released", s.preceding.regionsReleased);
        j.field("oom_requested_bytes", s.preceding.oomRequested);
        j.field("description", s.preceding.description);
        j.endObject();
        j.endObject();
    }
    j.endObject();
}

void writeCorrelation(JsonWriter& j, const Correlation& c)
{
    j.beginObject();
    j.field("allocator_metric", c.allocatorMetric);
    j.field("frame_metric", c.frameMetric);
    writeCorrelationFields(j, c);
    j.field("q", c.q);
    j.field("significant", significant(c));
    j.endObject();
}

void writeCorrelationFields(JsonWriter& j, const Correlation& c)
{
    j.field("n", c.n);
    j.field("pearson", c.pearson);
    j.field("spearman", c.spearman);
    j.field("test", correlationTestName(c));
    j.field("lag", c.lag);
    j.field("r_changes_kind", c.changeSpearman ? "spearman" : "pearson");
    j.field("r_changes", c.changeR);
    j.field("n_eff", c.nEff);
    j.field("p", c.p);
}

bool significant(const Correlation& c)
{
    return c.q < kSignificanceLevel; // false for NaN: not tested
}

std::string correlationText(const Correlation& c)
{
    const std::string test =
        std::isnan(c.p)
            ? std::string("too few changes to test")
            : fmt::format("changes {} {:+.3f} lag {} n_eff {:.1f} p {:.3g} q {:.3g}",
                          c.changeSpearman ? "rho" : "r", c.changeR, c.lag, c.nEff, c.p, c.q);
    return fmt::format("{:<26} vs {:<20} n {:>4}  Pearson {:+.3f}  Spearman {:+.3f}  {}{}",
                       c.allocatorMetric, c.frameMetric, c.n, c.pearson, c.spearman, test,
                       significant(c) ? "  significant" : "");
}

void writeVerdict(JsonWriter& j, const Verdict& v, const std::vector<Precursor>& rows)
{
    j.key("verdict").beginObject();
    j.field("allocator_related", v.allocatorRelated);
    if (v.mechanism.empty())
        j.key("mechanism").null();
    else
        j.field("mechanism", v.mechanism);
    j.field("headline", v.headline);
    j.field("healthy_frames", v.healthyFrames);
    j.key("evidence").beginArray();
    for (size_t i : v.evidence)
        if (i < rows.size()) {
            j.beginObject();
            j.field("rank", static_cast<int64_t>(i) + 1);
            j.field("kind", precursorKindName(rows[i].kind));
            j.field("mechanism", rows[i].mechanism);
            j.field("description", rows[i].description);
            j.endObject();
        }
    j.endArray();
    j.endObject();
}

void writeTimeField(JsonWriter& j, const char* key, int64_t t)
{
    j.key(key);
    t == kNoTime ? j.null() : j.value(t);
}

void writeSummaryFields(JsonWriter& j, const SummaryFigures& f)
{
    j.field("peak_reserved_bytes", f.peakReservedBytes);
    writeTimeField(j, "peak_reserved_at_ns", f.peakReservedAtNs);
    j.field("peak_allocated_bytes", f.peakAllocatedBytes);
    writeTimeField(j, "peak_allocated_at_ns", f.peakAllocatedAtNs);
    j.field("peak_allocated_outside_regions_bytes", f.peakAllocatedOutsideBytes);
    writeTimeField(j, "peak_allocated_outside_regions_at_ns", f.peakAllocatedOutsideAtNs);
    j.field("mean_fragmentation_ratio", f.meanFragmentationRatio);
    j.field("max_fragmentation_ratio", f.maxFragmentationRatio);
    writeTimeField(j, "max_fragmentation_ratio_at_ns", f.maxFragmentationRatioAtNs);
    j.field("min_largest_free_bytes", f.minLargestFreeBytes);
    writeTimeField(j, "min_largest_free_at_ns", f.minLargestFreeAtNs);
    j.field("max_fragment_count", f.maxFragmentCount);
    writeTimeField(j, "max_fragment_count_at_ns", f.maxFragmentCountAtNs);
    j.field("final_reserved_bytes", f.finalReservedBytes);
    j.field("instants", f.instants);
    j.field("reserved_ns", f.reservedNs);
}

void writeSummaryDelta(JsonWriter& j, const SummaryDelta& d)
{
    j.field("peak_reserved_bytes", d.peakReservedBytes);
    j.field("peak_allocated_bytes", d.peakAllocatedBytes);
    j.field("final_reserved_bytes", d.finalReservedBytes);
    j.field("mean_fragmentation_ratio", d.meanFragmentationRatio);
    j.field("max_fragmentation_ratio", d.maxFragmentationRatio);
    j.field("min_largest_free_bytes", d.minLargestFreeBytes);
    j.field("max_fragment_count", d.maxFragmentCount);
}

std::string summaryText(const SummaryFigures& f, int64_t begin, bool ordinal,
                        const std::string& indent)
{
    auto at = [&](int64_t t) {
        return t == kNoTime ? std::string("-") : formatTime(t, begin, ordinal);
    };
    auto span = [&](int64_t ns) {
        return ordinal ? fmt::format("{} entries", ns)
                       : fmt::format("{:.6f} s", static_cast<double>(ns) / 1e9);
    };
    std::string out = fmt::format("{}peak reserved {} at {}, peak allocated {} at {}\n", indent,
                                  humanBytes(f.peakReservedBytes), at(f.peakReservedAtNs),
                                  humanBytes(f.peakAllocatedBytes), at(f.peakAllocatedAtNs));
    if (f.peakAllocatedOutsideBytes > 0)
        out += fmt::format("{}peak allocated outside any region {} at {}\n", indent,
                           humanBytes(f.peakAllocatedOutsideBytes), at(f.peakAllocatedOutsideAtNs));
    if (f.reservedNs > 0)
        out += fmt::format("{}mean F {:.4f} ({}-weighted over {} with memory reserved), max F "
                           "{:.4f} at {}\n",
                           indent, f.meanFragmentationRatio, ordinal ? "entry" : "time",
                           span(f.reservedNs), f.maxFragmentationRatio,
                           at(f.maxFragmentationRatioAtNs));
    else
        out += fmt::format("{}mean F - (no {} with memory reserved to weigh it over), max F {:.4f} "
                           "at {}\n",
                           indent, ordinal ? "entries" : "time", f.maxFragmentationRatio,
                           at(f.maxFragmentationRatioAtNs));
    out += fmt::format("{}min largest free {} at {}, max fragments {} at {}\n", indent,
                       humanBytes(f.minLargestFreeBytes), at(f.minLargestFreeAtNs),
                       f.maxFragmentCount, at(f.maxFragmentCountAtNs));
    return out;
}

void writeCollapseReport(JsonWriter& j, const CollapseReport& r)
{
    j.beginObject();
    writeCollapseReportFields(j, r);
    j.endObject();
}

void writeCollapseReportFields(JsonWriter& j, const CollapseReport& r)
{
    j.field("frame", r.frame);
    j.key("collapse").beginObject();
    j.field("first_frame", r.collapse.firstFrame);
    j.field("last_frame", r.collapse.lastFrame);
    j.key("broken_rules").beginArray();
    for (const auto& s : r.collapse.brokenRules)
        j.value(s);
    j.endArray();
    j.endObject();
    writeVerdict(j, r.verdict, r.precursors);
    j.field("window_begin_ns", r.windowBegin);
    j.field("window_end_ns", r.windowEnd);
    j.key("baseline_frames").beginArray();
    for (int64_t f : r.baselineFrames)
        j.value(f);
    j.endArray();
    j.key("precursors").beginArray();
    for (const Precursor& p : r.precursors)
        writePrecursor(j, p);
    j.endArray();
    j.key("state_diff").beginArray();
    for (const StateDiff& d : r.diff) {
        j.beginObject();
        j.field("device", d.device);
        j.field("level", std::string(levelName(d.level)));
        j.key("before");
        writeState(j, d.before);
        j.key("after");
        writeState(j, d.after);
        j.key("delta").beginObject();
        auto delta = [](uint64_t a, uint64_t b) {
            return static_cast<int64_t>(b) - static_cast<int64_t>(a);
        };
        j.field("reserved_bytes", delta(d.before.reservedBytes, d.after.reservedBytes));
        j.field("allocated_bytes", delta(d.before.allocatedBytes, d.after.allocatedBytes));
        j.field("free_bytes", delta(d.before.freeBytes, d.after.freeBytes));
        j.field("fragment_count", d.after.fragmentCount - d.before.fragmentCount);
        j.field("largest_free_bytes",
                delta(d.before.largestFreeFragmentBytes, d.after.largestFreeFragmentBytes));
        j.field("fragmentation_ratio", d.after.fragmentationRatio - d.before.fragmentationRatio);
        j.endObject();
        j.endObject();
    }
    j.endArray();
    j.key("new_kernels").beginArray();
    for (const KernelSummary& k : r.newKernels)
        j.beginObject()
            .field("name", k.name)
            .field("count", k.count)
            .field("total_ns", k.totalNs)
            .endObject();
    j.endArray();
    writeCaveats(j, r.caveats);
}

std::string entropyWindowText(int64_t windowNs, int64_t elapsedNs, bool ordinal)
{
    // Without timestamps a window in seconds means nothing: the events so far are all counted.
    const std::string window = fmt::format("{:g} s", static_cast<double>(windowNs) / 1e9);
    if (ordinal) return "every event so far: no timestamps for a " + window + " window";
    if (elapsedNs < windowNs)
        return "every event so far: the " + window + " window is longer than the run";
    return window + " window";
}

std::string stateText(const State& s, int64_t begin, bool ordinal)
{
    std::string out = fmt::format("device {} level {} at {}\n", s.device, levelName(s.level),
                                  formatTime(s.time, begin, ordinal));
    out += fmt::format("  regions            {}\n", s.regionCount);
    out += fmt::format("  live allocations   {}\n", s.liveAllocations);
    out += fmt::format("  reserved           {} ({} B)\n", humanBytes(s.reservedBytes),
                       s.reservedBytes);
    out += fmt::format("  allocated          {} ({} B)\n", humanBytes(s.allocatedBytes),
                       s.allocatedBytes);
    if (s.allocatedOutsideBytes)
        out += fmt::format("  outside regions    {} ({} B)\n", humanBytes(s.allocatedOutsideBytes),
                           s.allocatedOutsideBytes);
    out += fmt::format("  free in regions    {} ({} B)\n", humanBytes(s.freeBytes), s.freeBytes);
    if (s.pendingFreeBlocks > 0)
        out += fmt::format("  pending free       {} ({} B) in {} block{}: freed, still used by "
                           "another stream (neither allocated nor free)\n",
                           humanBytes(s.pendingFreeBytes), s.pendingFreeBytes, s.pendingFreeBlocks,
                           s.pendingFreeBlocks == 1 ? "" : "s");
    out += fmt::format("  fragments          {}\n", s.fragmentCount);
    out += fmt::format("  largest fragment   {} ({} B)\n", humanBytes(s.largestFreeFragmentBytes),
                       s.largestFreeFragmentBytes);
    out += fmt::format("  fragmentation F    {:.6f}{}\n", s.fragmentationRatio,
                       s.fragmentationRatio > kReferenceFragmentationRatio
                           ? fmt::format("   (> {}: the largest free block is under {} % of free "
                                         "memory)",
                                         kReferenceFragmentationRatio,
                                         std::lround(100 * (1 - kReferenceFragmentationRatio)))
                           : std::string());
    if (s.pendingFreeBlocks > 0 &&
        (s.fragmentationRatioOncePendingComplete != s.fragmentationRatio ||
         s.largestFreeOncePendingCompleteBytes != s.largestFreeFragmentBytes))
        out += fmt::format("  once pending frees complete: free {} ({} B), largest {} ({} B), "
                           "F {:.6f} (PyTorch memory_viz's figures)\n",
                           humanBytes(s.freeIncludingPendingBytes()), s.freeIncludingPendingBytes(),
                           humanBytes(s.largestFreeOncePendingCompleteBytes),
                           s.largestFreeOncePendingCompleteBytes,
                           s.fragmentationRatioOncePendingComplete);
    out += fmt::format("  fragment entropy   {:.6f} bits\n", s.fragmentEntropyBits);
    if (s.entropyWindowNs > 0)
        out += fmt::format("  event-size entropy {:.6f} bits ({})\n", s.eventSizeEntropyBits,
                           entropyWindowText(s.entropyWindowNs, s.time - begin, ordinal));
    if (!s.histogram.log2.empty()) {
        out += "  histogram (free fragments)\n";
        for (const HistogramBin& b : s.histogram.log2)
            out += fmt::format("    [{:>10}, {:>10})  {:>8}  {}\n", humanBytes(b.lo),
                               b.hi ? humanBytes(b.hi) : std::string("inf"), b.count,
                               humanBytes(b.bytes));
        out += "  seed clusters\n";
        const char* names[] = {"8-32 KiB", "64-128 KiB", ">= 256 KiB"};
        for (size_t i = 0; i < s.histogram.clusters.size() && i < 3; ++i)
            out += fmt::format("    {:<12} {:>8}  {}\n", names[i], s.histogram.clusters[i].count,
                               humanBytes(s.histogram.clusters[i].bytes));
    }
    return out;
}

std::string kernelShiftText(const KernelShift& s)
{
    std::string out = fmt::format("family: {} ({})\n", s.family, s.basis);
    out += fmt::format("variant: {} ({}), first ran in frame {}\n", s.variant,
                       s.usual.empty() ? std::string("the family never ran in the healthy frames")
                                       : "usually " + s.usual,
                       s.firstFrame);
    out += fmt::format("share: {:.1f} % of {} calls in the healthy frames -> {:.1f} % ({}/{})\n",
                       100 * s.shareBefore, s.totalBefore, 100 * s.shareAfter, s.callsAfter,
                       s.totalAfter);
    out += s.preceding.change == RequestChange::None
               ? std::string("preceded by: no allocation that failed, shrank or moved\n")
               : fmt::format("preceded by ({}): {}\n", requestChangeName(s.preceding.change),
                             s.preceding.description);
    return out;
}

std::string zText(double z)
{
    return std::isinf(z) ? std::string("inf") : fmt::format("{:.2f}", z);
}

std::string evidenceText(const Precursor& p)
{
    const Evidence& e = p.evidence;
    if (e.feature.empty())
        return fmt::format("score {:.3f}: context, not measured against the healthy frames",
                           p.score);
    std::string out = fmt::format(
        "{} {}: {} = {:.4g} in frame {} against median {:.4g}, spread {:.4g} over {} healthy "
        "frames: z {} vs threshold {}; score {:.3f} = closeness {:.2f} x m/(1+m), m = z / "
        "threshold",
        e.standsOut ? "stands out" : "within the healthy spread",
        p.mechanism.empty() ? std::string() : "(" + p.mechanism + ")", e.feature, e.value, e.frame,
        e.healthyMedian, e.healthyScale, e.healthyFrames, zText(e.z), zText(e.threshold), p.score,
        e.closeness);
    if (!e.allocatorLinked) out += "; no allocator event before it (not allocator evidence)";
    if (e.common)
        out += fmt::format("; common: {} of the run's {} healthy frames departed as far (base rate "
                           "{:.1f} % > {:.0f} %), not enough alone",
                           e.runDeparted, e.runHealthyFrames, 100 * e.baseRate, 100 * kMaxBaseRate);
    return out;
}

std::string collapseReportText(const CollapseReport& r, int64_t begin, bool ordinal,
                               size_t maxPrecursors)
{
    std::string out = fmt::format("collapse frames {}-{} (asked: frame {})\n",
                                  r.collapse.firstFrame, r.collapse.lastFrame, r.frame);
    for (const auto& b : r.collapse.brokenRules)
        out += fmt::format("  broken: {}\n", b);
    out += fmt::format("  verdict: {}\n", r.verdict.headline);
    for (size_t i : r.verdict.evidence)
        if (i < r.precursors.size())
            out += fmt::format("    evidence #{}: {}\n", i + 1, r.precursors[i].description);
    out += fmt::format("  window {} .. {}\n", formatTime(r.windowBegin, begin, ordinal),
                       formatTime(r.windowEnd, begin, ordinal));
    out += fmt::format("  precursors ({} rows, ranked by departure from {} healthy frames: rows "
                       "that stand out first; docs/analysis.md)\n",
                       r.precursors.size(), r.baselineFrames.size());
    for (size_t i = 0; i < r.precursors.size() && i < maxPrecursors; ++i) {
        const Precursor& p = r.precursors[i];
        out += fmt::format(
            "    {:>2}. {:.3f} {:>5} {:<12} {:<22} {}{}{}\n", i + 1, p.score, zText(p.evidence.z),
            formatTime(p.time, begin, ordinal), precursorKindName(p.kind), p.description,
            p.evidence.standsOut ? " [stands out]" : "", p.background ? " [background]" : "");
    }
    for (const StateDiff& d : r.diff) {
        out += fmt::format(
            "  state diff device {} level {} (end of previous frame -> end of frame {})\n",
            d.device, levelName(d.level), r.collapse.firstFrame);
        out += fmt::format("    reserved          {} -> {}\n", humanBytes(d.before.reservedBytes),
                           humanBytes(d.after.reservedBytes));
        out += fmt::format("    allocated         {} -> {}\n", humanBytes(d.before.allocatedBytes),
                           humanBytes(d.after.allocatedBytes));
        out += fmt::format("    fragments         {} -> {}\n", d.before.fragmentCount,
                           d.after.fragmentCount);
        out += fmt::format("    largest fragment  {} -> {}\n",
                           humanBytes(d.before.largestFreeFragmentBytes),
                           humanBytes(d.after.largestFreeFragmentBytes));
        out += fmt::format("    F                 {:.4f} -> {:.4f}\n", d.before.fragmentationRatio,
                           d.after.fragmentationRatio);
    }
    for (const auto& n : r.caveats.notes)
        out += fmt::format("  note: {}\n", n);
    return out;
}

void writeCategoryFields(JsonWriter& j, const CategoryBreakdown& b)
{
    j.field("device", b.device).field("level", std::string(levelName(b.level)));
    j.field("time_ns", b.time).field("total_bytes", b.totalBytes).field("blocks", b.blocks);
    writeCategoryRows(j, b);
}

void writeCategoryRows(JsonWriter& j, const CategoryBreakdown& b)
{
    j.field("stacks_recorded", b.stacksRecorded);
    j.key("categories").beginArray();
    for (const CategoryRow& r : b.rows)
        j.beginObject()
            .field("category", memoryCategoryName(r.category))
            .field("bytes", r.bytes)
            .field("blocks", r.blocks)
            .endObject();
    j.endArray();
}

} // namespace fs::analysis
