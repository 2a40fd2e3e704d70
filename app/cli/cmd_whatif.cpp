// fragscope whatif SESSION [--alloc-conf CONF]... [--policy NAME] [--capacity BYTES] [--json]
// [-o OUT]: replay a session's allocator requests under its recorded settings and under others
// (docs/whatif.md). Every figure comes from fs::alloc::whatIf, which reads it back through the
// analysis engine; this file only prints.
#include "command.h"
#include "core/alloc/whatif.h"
#include "core/alloc/whatif_rank.h"
#include "core/analysis/serialize.h"
#include "core/format.h"
#include "core/json.h"

#include <algorithm>
#include <cstdlib>
#include <fmt/format.h>

using namespace fs;
using namespace fs::cli;
using namespace fs::alloc;

namespace {

void writeSizes(JsonWriter& j, const char* key, const std::vector<uint64_t>& v)
{
    j.key(key).beginArray();
    for (uint64_t x : v)
        j.value(x);
    j.endArray();
}

template <typename T> void realReplay(JsonWriter& j, const char* key, T real, T replay)
{
    j.key(key).beginObject();
    j.field("real", real).field("replay", replay).field("equal", real == replay);
    j.endObject();
}

void writeDevices(JsonWriter& j, const std::vector<DeviceFigures>& devices, bool replay);

// "unmodelled_settings": [{"setting": ..., "reason": ...}] (docs/json.md).
void writeUnmodelled(JsonWriter& j, const std::vector<UnmodelledSetting>& v)
{
    j.key("unmodelled_settings").beginArray();
    for (const UnmodelledSetting& u : v) {
        j.beginObject();
        j.field("setting", u.setting).field("reason", u.reason);
        j.endObject();
    }
    j.endArray();
}

// "recommendation", "ranking" (best first) and "alternatives_skipped".
void writeRanking(JsonWriter& j, const WhatIfResult& r)
{
    j.key("recommendation").beginObject();
    j.field("text", r.recommendation);
    j.key("alloc_conf");
    r.recommended < 0 ? j.null() : j.value(r.ranking[static_cast<size_t>(r.recommended)].allocConf);
    j.key("rank");
    r.recommended < 0 ? j.null() : j.value(int64_t{r.recommended} + 1);
    j.endObject();
    j.key("ranking").beginArray();
    for (const RankedRun& row : r.ranking) {
        j.beginObject();
        j.field("label", row.label).field("alloc_conf", row.allocConf);
        j.field("recorded_settings", row.recorded);
        j.field("policy", policyName(row.policy));
        j.key("run");
        row.run < 0 ? j.null() : j.value(int64_t{row.run});
        j.field("why", row.why);
        j.field("peak_reserved_bytes", row.peakReserved);
        j.field("final_reserved_bytes", row.finalReserved);
        j.field("segments", row.segments).field("cuda_malloc_calls", row.cudaMallocs);
        j.field("ooms", row.ooms);
        j.field("vs_recorded_peak_reserved_bytes", row.vsRecordedPeak);
        writeUnmodelled(j, row.unmodelled);
        j.endObject();
    }
    j.endArray();
    j.key("alternatives_skipped").beginArray();
    for (const SkippedAlternative& s : r.skipped) {
        j.beginObject();
        j.field("label", s.label).field("reason", s.reason);
        j.endObject();
    }
    j.endArray();
}

void writeJson(const WhatIfResult& r)
{
    JsonWriter j;
    j.beginDocument();
    j.field("file", r.session);
    const Fidelity& f = r.fidelity;
    j.key("fidelity").beginObject();
    j.field("complete", f.complete).field("complete_note", f.completeNote);
    j.field("settings_known", f.settingsKnown).field("settings_note", f.settingsNote);
    j.field("recorded_alloc_conf", f.recordedConf);
    j.field("time_resolution_ns", f.resolutionNs);
    j.field("reproduced", f.reproduced).field("summary", f.summary).field("verdict", f.verdict);
    j.field("banner", f.banner);
    j.key("pending_frees").beginObject();
    j.field("replayed", f.pendingFrees).field("before_trace", f.pendingFreesBeforeTrace);
    j.endObject();
    j.key("devices").beginObject();
    for (const DeviceFidelity& d : f.devices) {
        j.key(std::to_string(d.device)).beginObject();
        j.field("reproduced", d.reproduced());
        j.field("segment_sizes_equal", d.firstSegmentMismatch < 0);
        j.key("first_segment_mismatch");
        d.firstSegmentMismatch < 0 ? j.null() : j.value(d.firstSegmentMismatch);
        writeSizes(j, "real_segment_size_bytes", d.realSegmentSizes);
        writeSizes(j, "replay_segment_size_bytes", d.replaySegmentSizes);
        realReplay(j, "final_reserved_bytes", d.realFinalReserved, d.replayFinalReserved);
        realReplay(j, "peak_reserved_bytes", d.realPeakReserved, d.replayPeakReserved);
        realReplay(j, "segments", d.realSegments, d.replaySegments);
        j.key("addresses").beginObject();
        j.field("allocations", d.allocations).field("matched", d.addressesMatched);
        j.key("first_mismatch");
        d.firstAddressMismatch < 0 ? j.null() : j.value(d.firstAddressMismatch);
        j.endObject();
        j.field("final_layout_equal", d.finalLayoutEqual);
        j.field("state_at_end_equal", d.stateAtEndEqual);
        const TimeCourse& t = d.time;
        j.key("time_course").beginObject();
        j.field("exact", t.exact());
        j.field("real_segment_events", t.realEvents).field("replay_segment_events", t.replayEvents);
        j.field("events_time_differs", t.timeDiffers);
        j.field("max_time_difference_ns", t.maxTimeDiffNs);
        j.key("first_difference_ns");
        t.firstDiffer < 0 ? j.null() : j.value(t.firstDiffer);
        j.field("max_reserved_difference_bytes", t.maxReservedDiff);
        j.key("max_reserved_difference_at_ns");
        t.maxReservedDiffAt < 0 ? j.null() : j.value(t.maxReservedDiffAt);
        j.field("max_allocated_difference_bytes", t.maxAllocatedDiff);
        j.endObject();
        const TakenFromTrace& k = d.taken;
        j.key("taken_from_trace").beginObject();
        j.field("creation_times", k.creations).field("release_times", k.releases);
        j.field("max_burst_span_ns", k.maxBurstSpanNs);
        j.field("empty_cache_calls", k.emptyCaches);
        j.field("empty_cache_before_malloc", k.emptyCachesBefore);
        j.field("free_and_retries", k.retries).field("failed_requests", k.failuresFollowed);
        j.key("usable_bytes_at_retry");
        d.usableMark == 0 ? j.null() : j.value(d.usableMark);
        j.field("events_timed_by_assumption", k.assumed);
        j.endObject();
        j.endObject();
    }
    j.endObject();
    j.endObject();
    j.key("real_run").beginObject();
    writeDevices(j, r.real, false);
    j.endObject();
    j.key("runs").beginArray();
    for (const RunResult& run : r.runs) {
        j.beginObject();
        j.field("alloc_conf", run.allocConf);
        j.field("recorded_settings", run.spec.recorded);
        j.field("policy", policyName(run.spec.policy));
        j.field("experimental", run.spec.policy != Policy::PyTorch);
        j.field("requests", run.requests);
        writeUnmodelled(j, run.unmodelled);
        j.key("output_file");
        run.sessionPath.empty() ? j.null() : j.value(run.sessionPath);
        writeDevices(j, run.devices, true);
        j.endObject();
    }
    j.endArray();
    writeRanking(j, r);
    j.endObject();
    fmt::print("{}\n", j.str());
}

// {"devices": {"0": {...}}} of a run, or of the real run (no replay counters of its own).
void writeDevices(JsonWriter& j, const std::vector<DeviceFigures>& devices, bool replay)
{
    j.key("devices").beginObject();
    for (const DeviceFigures& d : devices) {
        j.key(std::to_string(d.device)).beginObject();
        analysis::writeSummaryFields(j, d.summary);
        j.field("segments", d.segments);
        j.field("cuda_malloc_calls", d.cudaMallocs);
        j.field("ooms", d.ooms);
        if (replay) {
            j.field("alloc_retries", d.retries);
            j.field("events_timed_by_assumption", d.timedByAssumption);
            // B - A against runs[0], as compare's "difference" (a replay has no collapses).
            j.key("vs_recorded").beginObject();
            analysis::writeSummaryDelta(j, d.vsRecorded.figures);
            j.field("ooms", d.vsRecorded.ooms);
            j.endObject();
        }
        j.key("frames").beginArray();
        for (const FrameFigure& fr : d.frames) {
            j.beginObject();
            j.field("frame", fr.frame).field("fragmentation_ratio", fr.fragmentation);
            j.field("largest_free_bytes", fr.largestFree);
            j.field("reserved_bytes", fr.reserved);
            j.endObject();
        }
        j.endArray();
        j.endObject();
    }
    j.endObject();
}

void writeText(const WhatIfResult& r)
{
    const Fidelity& f = r.fidelity;
    // The answer first, then the one thing to know about fidelity; the details below.
    fmt::print("{}\n", r.recommendation);
    fmt::print("fidelity: {}\n\n", f.summary);
    fmt::print("{}\n", r.session);
    fmt::print("recorded settings: {} ({})\n", f.recordedConf, f.settingsNote);
    fmt::print("trace: {} ({})\n", f.complete ? "complete" : "incomplete", f.completeNote);
    if (f.pendingFrees + f.pendingFreesBeforeTrace > 0)
        fmt::print("frees waiting on stream events: {} replayed at their completion, {} began "
                   "before the trace\n",
                   f.pendingFrees, f.pendingFreesBeforeTrace);
    for (const DeviceFidelity& d : f.devices) {
        fmt::print("fidelity, device {}: segments {}/{} sizes {}, final reserved {} vs {}, peak {} "
                   "vs {}, addresses {}/{}, final layout {}, state at end {}\n",
                   d.device, d.replaySegmentSizes.size(), d.realSegmentSizes.size(),
                   d.firstSegmentMismatch < 0 ? "equal" : "differ", d.replayFinalReserved,
                   d.realFinalReserved, d.replayPeakReserved, d.realPeakReserved,
                   d.addressesMatched, d.allocations, d.finalLayoutEqual ? "equal" : "differs",
                   d.stateAtEndEqual ? "equal" : "differs");
        const TimeCourse& t = d.time;
        fmt::print("time course, device {}: {} segment events (replay {}), {} at another time or "
                   "missing (resolution {} ns), largest reserved difference {} B, allocated {} "
                   "B\n",
                   d.device, t.realEvents, t.replayEvents, t.timeDiffers, f.resolutionNs,
                   t.maxReservedDiff, t.maxAllocatedDiff);
    }
    fmt::print("verdict: {}\n", f.verdict);
    fmt::print("note: {}\n\n", f.banner);

    const bool multi = !r.runs.empty() && r.runs.front().devices.size() > 1;
    size_t width = 19; // "real run (measured)"
    for (const RankedRun& row : r.ranking)
        width = std::max(width, rankedName(row).size());
    fmt::print("{:>3}  {:<{}} {}{:>12} {:>12} {:>6} {:>8} {:>5} {:>8} {:>8} {:>12} {:>12} {:>9}\n",
               "#", "settings", width, multi ? "dev " : "", "peak resv", "final resv", "segs",
               "cudaMal", "OOMs", "mean F", "max F", "min largest", "d peak", "d mean F");
    auto line = [&](const std::string& rank, const std::string& name, const std::string& dev,
                    uint64_t peak, uint64_t final, int64_t segs, int64_t mallocs, int64_t ooms,
                    const analysis::SummaryFigures* fig, const std::string& dPeak,
                    const std::string& dMeanF) {
        fmt::print("{:>3}  {:<{}} {}{:>12} {:>12} {:>6} {:>8} {:>5} {:>8} {:>8} {:>12} {:>12} "
                   "{:>9}\n",
                   rank, name, width, multi ? fmt::format("{:<4}", dev) : "", humanBytes(peak),
                   humanBytes(final), segs, mallocs, ooms,
                   fig ? fmt::format("{:.4f}", fig->meanFragmentationRatio) : "-",
                   fig ? fmt::format("{:.4f}", fig->maxFragmentationRatio) : "-",
                   fig ? humanBytes(fig->minLargestFreeBytes) : "-", dPeak, dMeanF);
    };
    // A run replayed in full: the engine's figures of each device, as `report` gives a session.
    auto deviceLine = [&](const std::string& rank, const std::string& name, const DeviceFigures& d,
                          bool delta) {
        const analysis::SummaryFigures& fig = d.summary;
        const analysis::SummaryDelta& x = d.vsRecorded.figures;
        line(rank, name, std::to_string(d.device), fig.peakReservedBytes, fig.finalReservedBytes,
             d.segments, d.cudaMallocs, d.ooms, &fig,
             delta ? signedHumanBytes(x.peakReservedBytes) : "-",
             delta ? fmt::format("{:+.4f}", x.meanFragmentationRatio) : "-");
    };
    // The real run first, unranked: the figures `report` gives the session, and its segments,
    // cudaMallocs and OOMs as recorded.
    for (const DeviceFigures& d : r.real)
        deviceLine("-", "real run (measured)", d, false);
    int rank = 0;
    bool modelOnly = false;
    for (const RankedRun& row : r.ranking) {
        const std::string n = std::to_string(++rank);
        const std::string name = rankedName(row);
        if (row.run >= 0) {
            for (const DeviceFigures& d : r.runs[static_cast<size_t>(row.run)].devices)
                deviceLine(n, name, d, !row.recorded);
            continue;
        }
        modelOnly = true;
        line(n, name, "all", row.peakReserved, row.finalReserved, row.segments, row.cudaMallocs,
             row.ooms, nullptr, signedHumanBytes(row.vsRecordedPeak), "-");
    }
    fmt::print("(ranked: fewest OOMs, then lowest peak reserved; d peak, d mean F: the run minus "
               "the replay under the recorded settings)\n");
    if (modelOnly)
        fmt::print(
            "('-' under F: replayed through the allocator model only, no session written)\n");
    for (const RankedRun& row : r.ranking)
        if (!row.why.empty()) fmt::print("tried {}: {}\n", row.label, row.why);
    for (const SkippedAlternative& s : r.skipped)
        fmt::print("skipped {}: {}\n", s.label, s.reason);
    // Settings the model parsed but did not replay: named, never silently dropped.
    for (const RankedRun& row : r.ranking)
        for (const UnmodelledSetting& u : row.unmodelled)
            fmt::print("not modelled under {}: {}: {}\n", rankedName(row), u.setting, u.reason);
    for (const RunResult& run : r.runs)
        if (!run.sessionPath.empty())
            fmt::print("\nwrote {} (a model's replay, labelled as such; not a measurement)\n",
                       run.sessionPath);
}

int runWhatIf(Args& a)
{
    a.expectPositional(1, "SESSION");
    WhatIfOptions o;
    o.session = a.positional()[0];
    for (const std::string& conf : a.getAll("alloc-conf")) {
        RunSpec s;
        s.label = conf;
        try {
            s.config = Config::parse(conf);
        } catch (const std::invalid_argument& e) {
            throw UsageError(fmt::format("--alloc-conf '{}': {}", conf, e.what()));
        }
        o.runs.push_back(s);
    }
    if (auto p = a.get("policy")) {
        Policy policy;
        if (!parsePolicy(*p, policy))
            throw UsageError("unknown --policy '" + *p + "' (pytorch, tiered)");
        if (policy != Policy::PyTorch) {
            RunSpec s;
            if (o.runs.empty())
                s.recordedConfig = true;
            else
                s = o.runs.back();
            s.policy = policy;
            o.runs.push_back(s);
        }
    }
    if (auto c = a.get("capacity"))
        o.capacity = static_cast<uint64_t>(parseCount(*c, "--capacity"));
    // No settings given: answer "which setting would have helped" with the default alternatives.
    o.rankAlternatives = o.runs.empty();
    o.output = a.get("output", "");
    if (!std::getenv("FRAGSCOPE_NO_PROGRESS") && !a.flag("json"))
        o.progress = [](const std::string& s) { fmt::print(stderr, "{}\n", s); };
    const WhatIfResult r = whatIf(o);
    if (a.flag("json"))
        writeJson(r);
    else
        writeText(r);
    return Ok;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "whatif",
    .synopsis = "SESSION [--alloc-conf CONF]... [--policy NAME] [--capacity BYTES] [--json] "
                "[-o OUT.fragscope]",
    .summary = "Replay a session's allocator requests under its recorded settings and others; "
               "rank them",
    .options = {{"alloc-conf", "CONF",
                 "allocator settings (PYTORCH_ALLOC_CONF / PYTORCH_CUDA_ALLOC_CONF text) to\n"
                 "replay under (repeatable), e.g. expandable_segments:True,max_split_size_mb:128;\n"
                 "every key of today's PyTorch is accepted, and those the model cannot replay\n"
                 "(backend:cudaMallocAsync, pinned_*, ...) are named in the output; without it\n"
                 "(and --policy), the default alternatives (below) are tried and ranked"},
                {"policy", "NAME",
                 "pytorch (default) or tiered: lifetime-tiered pools of 4/64/512 MiB\n"
                 "granularity, experimental; added as one more run (on the last CONF, else\n"
                 "the recorded settings)"},
                {"capacity", "BYTES",
                 "device memory the what-if runs may use (k, M, G suffixes); default: what\n"
                 "the session's OOMs tell, else the device's size, else no limit"},
                {"json", "",
                 "print {\"fidelity\": {...}, \"runs\": [...], \"recommendation\": {...},\n"
                 "\"ranking\": [...]} instead of text"},
                {"output", "OUT.fragscope",
                 "write the replay of the last run asked for (--alloc-conf, --policy), else\n"
                 "the recorded settings', as a session labelled \"what-if: ... replay of FILE\"\n"
                 "and marked synthetic, with the source's kernels, stacks, frames, annotations\n"
                 "and (the recorded run's) metrics (-o)"}},
    .details =
        "The first line is the answer in one sentence: the setting that would have given the\n"
        "lowest peak reserved bytes (fewer OOMs first) and by how much, or that none of\n"
        "those tried does better than the recorded settings; the second says in one line\n"
        "how far the model can be trusted (exact, not exact and by how much, or a partial\n"
        "trace). Without --alloc-conf or --policy the default alternatives are tried, each\n"
        "the recorded settings with one setting changed: expandable_segments:True,\n"
        "roundup_power2_divisions:4, max_split_size_mb at the median and the 90th\n"
        "percentile of the requests over 1 MiB (rounded up to a power of two MiB, at least\n"
        "32), and garbage_collection_threshold:0.6 when a capacity is known. They are\n"
        "replayed through the allocator model alone (no session written, on all cores); the\n"
        "best one, when it beats the recorded settings, is then replayed in full. Skipped\n"
        "alternatives are listed with the reason.\n"
        "runs[0] replays the session under its recorded settings (the snapshot's\n"
        "allocator_settings, else PyTorch defaults, said so) and is compared with the real\n"
        "run: segment sizes in order, final and peak reserved bytes, live segments, every\n"
        "allocation's address, the final block layout, the state at the end, and the time\n"
        "course: every segment event at its recorded time (at the trace's resolution) and\n"
        "reserved bytes equal after each. The verdict says what was taken from the trace\n"
        "(when each release of a burst happened, empty_cache() calls, free-and-retries).\n"
        "A free that waited on stream events (pending_frees) returns its block when the\n"
        "wait completed.\n"
        "The table ranks the runs best first: fewest OOMs, then lowest peak reserved bytes\n"
        "(summed over devices), below the real run's own figures; 'd peak' and 'd mean F'\n"
        "are each run minus the replay under the recorded settings (model against model).\n"
        "Peaks, F and the smallest largest free block of runs replayed in full are the\n"
        "analysis engine's summary of each session (exact over every instant, mean F\n"
        "weighted by time; the figures `report` and `compare` print; docs/analysis.md\n"
        "\"Summary\"); rows replayed through the model only show its counters and '-' for F.\n"
        "JSON fields: docs/json.md. See docs/whatif.md.",
    .run = runWhatIf,
    .order = 75,
});
