// fragscope report --ranks A B C… [--align MODE] [--json]: the ranks of one job as one run. The
// alignment, the first rank to collapse or hit an OOM and every per-rank figure come from
// fs::analysis::analyseRanks (core/analysis/ranks.h); this file only prints them.
#include "report_ranks.h"

#include "cli_engine.h"
#include "cli_settings.h"
#include "core/analysis/ranks.h"
#include "core/analysis/serialize.h"
#include "core/json.h"
#include "core/store/session.h"

#include <algorithm>
#include <fmt/format.h>

namespace fs::cli {

using namespace fs::analysis;

namespace {

std::string ranksText(const std::vector<int>& ranks)
{
    if (ranks.empty()) return "-";
    std::string out;
    for (int r : ranks)
        out += (out.empty() ? "" : ",") + std::to_string(r);
    return out;
}

std::string eventText(const RankEvent& e, int64_t begin)
{
    std::string at =
        e.time == kNoTime ? std::string("(no time)") : formatTime(e.time, begin, false);
    return fmt::format("rank {}{} at {}{}", e.rank,
                       e.frame >= 0 ? fmt::format(", frame {}", e.frame) : std::string(), at,
                       e.detail.empty() ? std::string() : " (" + e.detail + ")");
}

// The frames the report lists: a collapse or an OOM on some rank.
bool eventful(const RankFrame& f)
{
    return !f.collapsedRanks.empty() || !f.oomRanks.empty();
}

void writeEvent(JsonWriter& j, const RankEvent& e)
{
    j.beginObject();
    j.field("rank", e.rank);
    if (e.frame >= 0)
        j.field("frame", e.frame);
    else
        j.key("frame").null();
    if (e.time == kNoTime) {
        j.key("time_ns").null();
        j.key("session_time_ns").null();
    } else {
        j.field("time_ns", e.time).field("session_time_ns", e.sessionTime);
    }
    j.field("detail", e.detail);
    j.endObject();
}

void writeRankList(JsonWriter& j, const char* key, const std::vector<int>& ranks)
{
    j.key(key).beginArray();
    for (int r : ranks)
        j.value(r);
    j.endArray();
}

void writeOptionalRank(JsonWriter& j, const char* key, const std::optional<RankEvent>& e)
{
    if (e)
        j.field(key, e->rank);
    else
        j.key(key).null();
}

// One rank's own figures (its engine's).
void writeRankEntry(JsonWriter& j, const RankSummary& r)
{
    const Engine& e = *r.engine;
    j.beginObject();
    j.field("file", r.path);
    j.field("rank", r.rank);
    j.field("synthetic", e.summary().synthetic);
    j.field("time_begin_ns", e.timeBegin());
    j.field("time_end_ns", e.timeEnd());
    j.key("devices").beginArray();
    for (const DeviceInfo& d : e.summary().devices)
        j.value(static_cast<int64_t>(d.id));
    j.endArray();
    if (r.track) {
        j.field("device", r.track->device);
        j.field("level", std::string(levelName(r.track->level)));
    }
    j.field("peak_reserved_bytes", r.peakReservedBytes);
    j.field("max_fragmentation_ratio", r.maxFragmentationRatio);
    j.field("frames", r.frames);
    j.key("collapses").beginArray();
    for (const RankEvent& c : r.collapses)
        writeEvent(j, c);
    j.endArray();
    j.key("ooms").beginArray();
    for (const RankEvent& o : r.ooms)
        writeEvent(j, o);
    j.endArray();
    j.endObject();
}

void printJson(const RankRun& run)
{
    JsonWriter j;
    j.beginDocument();
    j.key("alignment").beginObject();
    j.field("mode", rankAlignModeName(run.mode));
    j.field("basis", run.basis);
    if (run.alignFrame >= 0)
        j.field("frame", run.alignFrame);
    else
        j.key("frame").null();
    j.field("reference_rank", run.referenceRank);
    if (run.frameSpreadOnWallClockNs)
        j.field("frame_spread_on_wall_clock_ns", *run.frameSpreadOnWallClockNs);
    j.key("ranks").beginArray();
    for (const RankSummary& r : run.ranks) {
        j.beginObject();
        j.field("rank", r.rank).field("file", r.path).field("offset_ns", r.offsetNs);
        j.field("time_begin_ns", r.timeBegin).field("time_end_ns", r.timeEnd);
        j.field("clock", r.identity.clockSource);
        j.field("job_id", r.identity.jobId);
        j.endObject();
    }
    j.endArray();
    j.key("notes").beginArray();
    for (const std::string& n : run.notes)
        j.value(n);
    j.endArray();
    j.endObject();
    j.key("ranks").beginArray();
    for (const RankSummary& r : run.ranks)
        writeRankEntry(j, r);
    j.endArray();
    writeOptionalRank(j, "first_collapse_rank", run.firstCollapse);
    writeOptionalRank(j, "first_oom_rank", run.firstOom);
    j.key("first_collapse");
    if (run.firstCollapse)
        writeEvent(j, *run.firstCollapse);
    else
        j.null();
    j.key("first_oom");
    if (run.firstOom)
        writeEvent(j, *run.firstOom);
    else
        j.null();
    j.key("peak_reserved").beginObject();
    j.field("min_bytes", run.peakReservedMin).field("min_rank", run.peakReservedMinRank);
    j.field("max_bytes", run.peakReservedMax).field("max_rank", run.peakReservedMaxRank);
    j.field("spread_bytes", run.peakReservedSpread());
    j.endObject();
    j.key("frames").beginArray();
    for (const RankFrame& f : run.frames) {
        if (!eventful(f)) continue;
        j.beginObject();
        j.field("frame", f.frame);
        writeRankList(j, "collapsed_ranks", f.collapsedRanks);
        if (f.firstCollapseRank >= 0)
            j.field("first_collapse_rank", f.firstCollapseRank);
        else
            j.key("first_collapse_rank").null();
        writeRankList(j, "oom_ranks", f.oomRanks);
        if (f.firstOomRank >= 0)
            j.field("first_oom_rank", f.firstOomRank);
        else
            j.key("first_oom_rank").null();
        j.endObject();
    }
    j.endArray();
    j.endObject();
    fmt::print("{}\n", j.str());
}

void printText(const RankRun& run)
{
    int64_t begin = INT64_MAX;
    for (const RankSummary& r : run.ranks)
        begin = std::min(begin, r.timeBegin);
    fmt::print("fragscope report --ranks: {} ranks, aligned by {}\n", run.ranks.size(), run.basis);
    for (const std::string& n : run.notes)
        fmt::print("  note: {}\n", n);
    bool synthetic = false;
    for (const RankSummary& r : run.ranks)
        synthetic = synthetic || r.engine->summary().synthetic;
    if (synthetic) fmt::print("SYNTHETIC DATA (simulated, not a measurement)\n");
    fmt::print("\n  {:>4}  {:>12}  {:>14}  {:>7}  {:>10}  {:>18}  {:>5}  {}\n", "rank", "offset",
               "peak reserved", "max F", "collapses", "first collapse", "OOMs", "file");
    for (const RankSummary& r : run.ranks)
        fmt::print("  {:>4}  {:>+9.3f} ms  {:>14}  {:>7.4f}  {:>10}  {:>18}  {:>5}  {}\n", r.rank,
                   static_cast<double>(r.offsetNs) / 1e6, humanBytes(r.peakReservedBytes),
                   r.maxFragmentationRatio, r.collapses.size(),
                   r.collapses.empty() ? std::string("-")
                                       : fmt::format("frame {}", r.collapses.front().frame),
                   r.ooms.size(), r.path);
    fmt::print("\nFirst to collapse: {}\n",
               run.firstCollapse ? eventText(*run.firstCollapse, begin) : "no rank collapsed");
    fmt::print("First OOM:         {}\n",
               run.firstOom ? eventText(*run.firstOom, begin) : "no rank hit an OOM");
    if (run.peakReservedMinRank >= 0)
        fmt::print("Peak reserved:     {} (rank {}) .. {} (rank {}), spread {}\n",
                   humanBytes(run.peakReservedMin), run.peakReservedMinRank,
                   humanBytes(run.peakReservedMax), run.peakReservedMaxRank,
                   humanBytes(run.peakReservedSpread()));
    if (std::any_of(run.frames.begin(), run.frames.end(), eventful)) {
        fmt::print("\nFrames with a collapse or an OOM on any rank\n  {:>6}  {:>16}  {:>17}  "
                   "{:>12}  {:>9}\n",
                   "frame", "collapsed ranks", "first to collapse", "OOM ranks", "first OOM");
        for (const RankFrame& f : run.frames) {
            if (!eventful(f)) continue;
            fmt::print(
                "  {:>6}  {:>16}  {:>17}  {:>12}  {:>9}\n", f.frame, ranksText(f.collapsedRanks),
                f.firstCollapseRank < 0 ? "-" : std::to_string(f.firstCollapseRank),
                ranksText(f.oomRanks), f.firstOomRank < 0 ? "-" : std::to_string(f.firstOomRank));
        }
    }
}

} // namespace

int runReportRanks(Args& a)
{
    const auto& files = a.positional();
    if (files.size() < 2)
        throw UsageError("--ranks needs the files of at least two ranks (fragscope report --ranks "
                         "A B …)");
    const std::string alignText = a.get("align", "auto");
    const auto mode = parseRankAlignMode(alignText);
    if (!mode)
        throw UsageError(fmt::format("--align {}: expected auto, wall, frame or none", alignText));
    const settings::Settings st = commandSettings(a);
    std::vector<RankInput> inputs;
    for (const std::string& f : files)
        inputs.push_back({f, openEngine(f, st.loadOptions()), nullptr});
    RankRun run;
    try {
        run = analyseRanks(inputs, *mode);
    } catch (const RankAlignError& e) {
        fmt::print(stderr, "fragscope report: cannot line these files up as ranks: {}\n", e.what());
        return BadInput;
    }
    if (a.flag("json"))
        printJson(run);
    else
        printText(run);
    return Ok;
}

} // namespace fs::cli
