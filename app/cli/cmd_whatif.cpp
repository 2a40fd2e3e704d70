// fragscope whatif SESSION [--alloc-conf CONF]... [--policy NAME] [--capacity BYTES] [--json]
// [-o OUT]: replay a session's allocator requests under its recorded settings and under others
// (docs/whatif.md). Every figure comes from fs::alloc::whatIf, which reads it back through the
// analysis engine; this file only prints.
#include "command.h"
#include "core/alloc/whatif.h"
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
    j.field("reproduced", f.reproduced).field("verdict", f.verdict);
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
        j.key("output_file");
        run.sessionPath.empty() ? j.null() : j.value(run.sessionPath);
        writeDevices(j, run.devices, true);
        j.endObject();
    }
    j.endArray();
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

    struct Row
    {
        const RunResult* run;
        const DeviceFigures* dev;
    };
    std::vector<Row> rows;
    for (const RunResult& run : r.runs)
        for (const DeviceFigures& d : run.devices)
            rows.push_back({&run, &d});
    // Ranked: runs with OOMs first (most first), then by peak reserved, lowest first.
    std::stable_sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) {
        if ((a.dev->ooms > 0) != (b.dev->ooms > 0)) return a.dev->ooms > 0;
        if (a.dev->ooms != b.dev->ooms) return a.dev->ooms > b.dev->ooms;
        return a.dev->summary.peakReservedBytes < b.dev->summary.peakReservedBytes;
    });
    const bool multi = !r.runs.empty() && r.runs.front().devices.size() > 1;
    auto nameOf = [](const RunResult& run) {
        std::string name = run.spec.recorded ? "recorded: " + run.allocConf : run.allocConf;
        if (run.spec.policy != Policy::PyTorch)
            name += fmt::format(" [{}, experimental]", policyName(run.spec.policy));
        return name;
    };
    size_t width = 19; // "real run (measured)"
    for (const RunResult& run : r.runs)
        width = std::max(width, nameOf(run).size());
    fmt::print("{:>3}  {:<{}} {}{:>12} {:>12} {:>6} {:>8} {:>5} {:>8} {:>8} {:>12} {:>12} {:>9}\n",
               "#", "settings", width, multi ? "dev " : "", "peak resv", "final resv", "segs",
               "cudaMal", "OOMs", "mean F", "max F", "min largest", "d peak", "d mean F");
    auto line = [&](const std::string& rank, const std::string& name, const DeviceFigures& d,
                    bool delta) {
        const analysis::SummaryFigures& fig = d.summary;
        const analysis::SummaryDelta& x = d.vsRecorded.figures;
        fmt::print(
            "{:>3}  {:<{}} {}{:>12} {:>12} {:>6} {:>8} {:>5} {:>8.4f} {:>8.4f} {:>12} {:>12} "
            "{:>9}\n",
            rank, name, width, multi ? fmt::format("{:<4}", d.device) : "",
            humanBytes(fig.peakReservedBytes), humanBytes(fig.finalReservedBytes), d.segments,
            d.cudaMallocs, d.ooms, fig.meanFragmentationRatio, fig.maxFragmentationRatio,
            humanBytes(fig.minLargestFreeBytes),
            delta ? (x.peakReservedBytes < 0 ? "-" : "+") +
                        humanBytes(static_cast<uint64_t>(std::abs(x.peakReservedBytes)))
                  : std::string("-"),
            delta ? fmt::format("{:+.4f}", x.meanFragmentationRatio) : std::string("-"));
    };
    // The real run first, unranked: the figures `report` gives the session, and its segments,
    // cudaMallocs and OOMs as recorded.
    for (const DeviceFigures& d : r.real)
        line("-", "real run (measured)", d, false);
    int rank = 0;
    for (const Row& row : rows)
        line(std::to_string(++rank), nameOf(*row.run), *row.dev, !row.run->spec.recorded);
    fmt::print("(d peak, d mean F: the run minus the replay under the recorded settings)\n");
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
                 "PYTORCH_CUDA_ALLOC_CONF settings to replay under (repeatable), e.g.\n"
                 "expandable_segments:True,max_split_size_mb:128"},
                {"policy", "NAME",
                 "pytorch (default) or tiered: lifetime-tiered pools of 4/64/512 MiB\n"
                 "granularity, experimental; added as one more run (on the last CONF, else\n"
                 "the recorded settings)"},
                {"capacity", "BYTES",
                 "device memory the what-if runs may use (k, M, G suffixes); default: what\n"
                 "the session's OOMs tell, else the device's size, else no limit"},
                {"json", "", "print {\"fidelity\": {...}, \"runs\": [...]} instead of a table"},
                {"output", "OUT.fragscope",
                 "write the last run's replay as a session, labelled \"what-if: ... replay of\n"
                 "FILE\" and marked synthetic, with the source's kernels, stacks, frames,\n"
                 "annotations and (the recorded run's) metrics (-o)"}},
    .details =
        "runs[0] replays the session under its recorded settings (the snapshot's\n"
        "allocator_settings, else PyTorch defaults, said so) and is compared with the real\n"
        "run: segment sizes in order, final and peak reserved bytes, live segments, every\n"
        "allocation's address, the final block layout, the state at the end, and the time\n"
        "course: every segment event at its recorded time (at the trace's resolution) and\n"
        "reserved bytes equal after each. The verdict says what was taken from the trace\n"
        "(when each release of a burst happened, empty_cache() calls, free-and-retries).\n"
        "A free that waited on stream events (pending_frees) returns its block when the\n"
        "wait completed.\n"
        "The table is ranked with OOMs first, then by peak reserved bytes, below the real run's\n"
        "own figures; 'd peak' and 'd mean F' are each run minus the replay under the recorded\n"
        "settings (model against model). Peaks, F and the smallest largest free block are the\n"
        "analysis engine's summary of each session (exact over every instant, mean F weighted\n"
        "by time; the figures `report` and `compare` print; docs/analysis.md \"Summary\").\n"
        "JSON fields: docs/json.md. See docs/whatif.md.",
    .run = runWhatIf,
    .order = 75,
});
