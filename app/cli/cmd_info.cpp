// fragscope info FILE [--json]: what a session holds and how healthy its capture was.
#include "command.h"
#include "core/analysis/graphs_text.h"
#include "core/analysis/history.h"
#include "core/analysis/serialize.h"
#include "core/format.h"
#include "core/json.h"
#include "core/store/graphs.h"
#include "core/store/session.h"

#include <fmt/format.h>

using namespace fs;
using namespace fs::cli;

namespace {

std::string toJson(const std::string& path, const SessionSummary& s,
                   const std::string& allocatorSettings, const analysis::GraphHealth& graphs)
{
    JsonWriter j;
    j.beginDocument();
    j.field("file", path);
    j.field("format_version", s.formatVersion);
    j.field("synthetic", s.synthetic);
    j.key("sources").beginArray();
    for (const auto& src : s.sources)
        j.value(src);
    j.endArray();
    j.key("devices").beginArray();
    for (const auto& d : s.devices) {
        j.beginObject()
            .field("device", d.id)
            .field("name", d.name)
            .field("capacity_bytes", d.capacityBytes)
            .endObject();
    }
    j.endArray();
    j.field("time_axis", s.timeAxis == TimeAxis::Ordinal ? "ordinal" : "ns");
    j.field("address_view_available", s.addressViewAvailable);
    j.field("time_begin_ns", s.timeBegin);
    j.field("time_end_ns", s.timeEnd);
    j.field("time_span_ns", s.timeEnd - s.timeBegin);
    j.field("events", s.events);
    j.field("regions", s.regions);
    j.field("allocations", s.allocations);
    j.field("kernels", s.kernels);
    j.field("graph_launches", s.graphLaunches);
    j.field("frames", s.frames);
    j.field("frame_metrics", s.frameMetrics);
    j.field("ooms", s.ooms);
    // The recorded allocator settings (PyTorch snapshots), verbatim JSON text; null if none.
    j.key("allocator_settings");
    if (allocatorSettings.empty())
        j.null();
    else
        j.value(allocatorSettings);
    // The allocator history of a PyTorch snapshot, per device ([] for other sources).
    analysis::writeHistory(j, analysis::traceHistory(s.meta));
    // A flight recording's windows ([]: the whole run was recorded).
    analysis::writeWindows(j, s.windows);
    j.key("health");
    analysis::writeHealth(j, s.health, &graphs);
    j.endObject();
    return j.str() + "\n";
}

std::string toText(const std::string& path, const SessionSummary& s,
                   const std::string& allocatorSettings, const analysis::GraphHealth& graphs)
{
    std::string out = fmt::format("{}\n", path);
    out += fmt::format("  format        v{}{}\n", s.formatVersion,
                       s.synthetic ? "   SYNTHETIC DATA (simulated, not a measurement)" : "");
    std::string srcs;
    for (const auto& src : s.sources)
        srcs += (srcs.empty() ? "" : ", ") + src;
    out += fmt::format("  sources       {}\n", srcs);
    for (const auto& d : s.devices)
        out += fmt::format("  device {}      {} ({})\n", d.id, d.name, humanBytes(d.capacityBytes));
    const double span = static_cast<double>(s.timeEnd - s.timeBegin);
    if (s.timeAxis == TimeAxis::Ordinal)
        out += fmt::format(
            "  time span     {} entries (ordinal time axis: the source has no timestamps)\n",
            s.timeEnd - s.timeBegin);
    else
        out += fmt::format("  time span     {:.3f} s\n", span / 1e9);
    out += fmt::format(
        "  events        {}\n  regions       {}\n  allocations   {}\n  kernels       {}\n"
        "  graph launch  {}\n  frames        {}\n  frame metrics {}\n  OOMs          {}\n",
        s.events, s.regions, s.allocations, s.kernels, s.graphLaunches, s.frames, s.frameMetrics,
        s.ooms);
    if (!s.addressViewAvailable)
        out += "  address view  unavailable (the source has no addresses)\n";
    if (!allocatorSettings.empty()) out += fmt::format("  allocator     {}\n", allocatorSettings);
    for (const analysis::TraceHistory& h : analysis::traceHistory(s.meta))
        out += fmt::format(
            "  history       device {}: {}{}, {} ghost blocks (allocated before the trace)\n",
            h.device, h.truncated ? "TRUNCATED (the ring buffer overflowed)" : "complete",
            h.maxEntries > 0 ? fmt::format(", {} of max {} entries", h.entries, h.maxEntries)
                             : fmt::format(", {} entries", h.entries),
            h.ghostBlocks);
    if (!s.windows.empty()) {
        out += fmt::format("  recorded      {} window(s) of a flight recording; nothing between "
                           "them (times from the session's start)\n",
                           s.windows.size());
        // From the session's start, as every view's time axis counts.
        for (const auto& w : s.windows)
            out += "    " + analysis::windowLine(w, s.timeBegin) + "\n";
    }
    out += "  health\n";
    out += fmt::format("    dropped records  {}\n", s.health.droppedRecords);
    out += fmt::format("    ended abruptly   {}\n", s.health.endedAbruptly
                                                        ? "YES (writer stopped before finishing)"
                                                    : s.health.recording ? "no (still recording)"
                                                                         : "no");
    out += fmt::format("    anomalies        {}\n", s.health.anomalyTotal());
    for (const auto& [k, v] : s.health.anomalies)
        out += fmt::format("      {:<16} {}\n", k, v);
    for (const auto& w : s.health.warnings)
        out += fmt::format("    warning: {}\n", w);
    if (graphs.launches > 0 || graphs.total() > 0) out += analysis::graphHealthText(graphs);
    return out;
}

int runInfo(Args& a)
{
    a.expectPositional(1, "FILE");
    const Session s = Session::open(a.positional()[0]);
    const SessionSummary sum = s.summary();
    const std::string settings = s.meta("allocator_settings");
    const analysis::GraphHealth graphs =
        analysis::graphHealth(store::readGraphRows(s), sum.health.anomalies);
    fmt::print("{}", a.flag("json") ? toJson(a.positional()[0], sum, settings, graphs)
                                    : toText(a.positional()[0], sum, settings, graphs));
    return Ok;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "info",
    .synopsis = "FILE [--json]",
    .summary = "Summarise a session: sources, devices, counts and capture health",
    .options = {{"json", "", "print one JSON object instead of text (fields: docs/json.md)"}},
    .details = "A file of a newer format, a non-fragscope file, or a truncated or corrupted file\n"
               "gives a one-line error naming the file and the problem, and exit status 2.",
    .run = runInfo,
    .order = 20,
});
