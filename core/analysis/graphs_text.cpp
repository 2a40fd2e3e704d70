#include "graphs_text.h"

#include "serialize.h"

#include <fmt/format.h>

namespace fs::analysis {

namespace {

void writePool(JsonWriter& j, uint64_t pool)
{
    j.beginArray().value(pool >> 32).value(pool & 0xffffffffu).endArray();
}

void writeTime(JsonWriter& j, std::string_view key, int64_t t)
{
    j.key(key);
    if (t == kNoTime)
        j.null();
    else
        j.value(t);
}

void writeGraphCorrelation(JsonWriter& j, const Correlation& c)
{
    j.beginObject();
    writeCorrelationFields(j, c);
    j.endObject();
}

std::string graphNames(const GraphsReport& r, const std::vector<uint32_t>& graphs)
{
    std::string s;
    for (uint32_t g : graphs)
        s += (s.empty() ? "" : ", ") + r.graphs[g].name;
    return s.empty() ? "-" : s;
}

} // namespace

std::string durationText(double v)
{
    if (v >= 1e9) return fmt::format("{:.3f} s", v / 1e9);
    if (v >= 1e6) return fmt::format("{:.3f} ms", v / 1e6);
    if (v >= 1e3) return fmt::format("{:.1f} us", v / 1e3);
    return fmt::format("{:.0f} ns", v);
}

void writeGraphHealth(JsonWriter& j, const GraphHealth& h)
{
    j.beginObject()
        .field("launches", h.launches)
        .field("instantiations_recorded", h.instantiationsRecorded)
        .field("launches_without_instantiation", h.launchesWithoutInstantiation)
        .field("self_overlapping_replays", h.selfOverlappingReplays)
        .field("execs_destroyed_twice", h.execsDestroyedTwice)
        .field("unknown_exec_destroys", h.unknownExecDestroys)
        .field("pools_only_in_frees", h.poolsOnlyInFrees)
        .field("graphs_with_unknown_pool", h.graphsWithUnknownPool)
        .field("problems", h.total())
        .endObject();
}

void writeGraphsReport(JsonWriter& j, const GraphsReport& r)
{
    j.key("graphs").beginArray();
    for (const GraphInfo& g : r.graphs) {
        j.beginObject();
        j.field("device", g.device);
        j.field("graph", g.name);
        j.key("graph_ids").beginArray();
        for (int64_t id : g.graphIds)
            j.value(id);
        j.endArray();
        j.key("exec_ids").beginArray();
        for (uint64_t id : g.execIds)
            j.value(id);
        j.endArray();
        j.field("captures", static_cast<int64_t>(g.captures.size()));
        writeTime(j, "captured_at_ns", g.capturedAt);
        j.field("capture_ns", g.captureNs);
        writeTime(j, "instantiated_at_ns", g.instantiatedAt);
        j.key("pool");
        if (g.poolKnown())
            writePool(j, g.pool);
        else
            j.null();
        j.field("pool_label", graphPoolLabel(g));
        j.field("pool_source", poolSourceName(g.poolSource));
        const PoolInfo* p = r.poolOf(g);
        j.field("pool_reserved_bytes", p ? p->reservedBytes : 0);
        j.field("pool_peak_reserved_bytes", p ? p->peakReservedBytes : 0);
        j.field("replays", g.replay.count);
        j.key("replay_ns")
            .beginObject()
            .field("p50", g.replay.p50)
            .field("p99", g.replay.p99)
            .field("max", g.replay.max)
            .field("mean", g.replay.mean)
            .field("jitter", g.replay.jitter)
            .endObject();
        j.key("replay_vs_fragmentation");
        writeGraphCorrelation(j, g.vsFragmentation);
        j.key("replay_vs_largest_free");
        writeGraphCorrelation(j, g.vsLargestFree);
        j.key("recaptures").beginArray();
        for (const Recapture& rc : g.recaptures)
            j.beginObject()
                .field("time_ns", rc.time)
                .field("allocations", rc.allocations)
                .field("previous_allocations", rc.previousAllocations)
                .field("moved", rc.moved)
                .field("moved_bytes", rc.movedBytes)
                .field("held_allocations", rc.heldAllocations)
                .field("held_bytes", rc.heldBytes)
                .field("same_pool", rc.samePool)
                .field("previous_pool_reserved_bytes", rc.previousPoolReserved)
                .endObject();
        j.endArray();
        j.endObject();
    }
    j.endArray();

    j.key("pools").beginArray();
    for (const PoolInfo& p : r.pools) {
        j.beginObject();
        j.field("device", p.device);
        j.field("level", std::string(levelName(p.level)));
        j.key("pool");
        writePool(j, p.pool);
        j.field("pool_label", poolLabel(p.pool, p.level));
        j.field("segments", p.segments);
        j.field("segments_created", p.segmentsCreated);
        j.field("reserved_bytes", p.reservedBytes);
        j.field("allocated_bytes", p.allocatedBytes);
        j.field("peak_reserved_bytes", p.peakReservedBytes);
        j.field("peak_time_ns", p.peakTime);
        j.field("allocated_at_peak_bytes", p.allocatedAtPeak);
        j.field("peak_allocated_bytes", p.peakAllocatedBytes);
        j.key("graphs").beginArray();
        for (uint32_t g : p.graphs)
            j.value(r.graphs[g].name);
        j.endArray();
        j.endObject();
    }
    j.endArray();

    j.key("concurrent").beginArray(); // graph pairs that replayed at the same time
    for (const auto& [a, b] : r.concurrent)
        j.beginArray().value(r.graphs[a].name).value(r.graphs[b].name).endArray();
    j.endArray();
    j.key("sharing").beginArray();
    for (const SharingGroup& s : r.sharing) {
        j.beginObject();
        j.field("device", s.device);
        j.key("pools").beginArray();
        for (uint64_t p : s.pools)
            writePool(j, p);
        j.endArray();
        j.key("graphs").beginArray();
        for (uint32_t g : s.graphs)
            j.value(r.graphs[g].name);
        j.endArray();
        j.field("computed", s.computed);
        j.field("peak_reserved_before_bytes", s.peakReservedBefore);
        j.field("peak_reserved_after_bytes", s.peakReservedAfter);
        j.field("peak_reserved_saved_bytes", s.peakReservedSavedBytes);
        j.endObject();
    }
    j.endArray();
    const SharingSummary& a = r.sharingAll;
    j.key("sharing_all")
        .beginObject()
        .field("computed", a.computed)
        .field("computed_by", "allocator model (what-if replay), not measured")
        .field("recorded_peak_reserved_bytes", a.recordedPeakReserved)
        .field("peak_reserved_before_bytes", a.peakReservedBefore)
        .field("peak_reserved_after_bytes", a.peakReservedAfter)
        .field("peak_reserved_saved_bytes", a.peakReservedSavedBytes)
        .field("reproduced", a.reproduced)
        .field("note", a.note)
        .endObject();
    j.key("health");
    writeGraphHealth(j, r.health);
    j.key("notes").beginArray();
    for (const std::string& n : r.notes)
        j.value(n);
    j.endArray();
    writeCaveats(j, r.caveats);
}

void writeGraphsSummary(JsonWriter& j, const GraphsSummary& s)
{
    j.beginObject()
        .field("graphs", s.graphs)
        .field("recaptures", s.recaptures)
        .field("replays", s.replays)
        .field("private_pools", s.privatePools)
        .field("private_pool_reserved_bytes", s.privatePoolReservedBytes)
        .field("sharing_groups", s.sharingGroups)
        .field("sharing_computed", s.sharingComputed)
        .field("peak_reserved_saved_bytes", s.peakReservedSavedBytes)
        .field("health_problems", s.healthProblems)
        .endObject();
}

std::string graphHealthText(const GraphHealth& h)
{
    std::string out = fmt::format("    graph launches   {}\n", h.launches);
    if (h.launches > 0 && !h.instantiationsRecorded)
        out += "      instantiations not recorded by the source\n";
    else
        out += fmt::format("      without an instantiation  {}\n", h.launchesWithoutInstantiation);
    out += fmt::format("      overlapping themselves    {}\n", h.selfOverlappingReplays);
    out += fmt::format("      execs destroyed twice     {}\n", h.execsDestroyedTwice);
    out += fmt::format("      unknown execs destroyed   {}\n", h.unknownExecDestroys);
    out += fmt::format("      pools only in frees       {}\n", h.poolsOnlyInFrees);
    return out;
}

std::string graphsSummaryText(const GraphsSummary& s)
{
    std::string out = fmt::format(
        "  {} graphs ({} re-captures), {} replays; {} private pools holding {} at the end\n",
        s.graphs, s.recaptures, s.replays, s.privatePools, humanBytes(s.privatePoolReservedBytes));
    if (s.sharingGroups == 0)
        out += "  sharing: no two private pools may share one\n";
    else if (s.sharingComputed)
        out += fmt::format(
            "  sharing: {} groups of pools may share one; merged, the peak reserved "
            "would drop by {} (computed by the allocator model)\n",
            s.sharingGroups,
            humanBytes(static_cast<uint64_t>(std::max<int64_t>(0, s.peakReservedSavedBytes))));
    else
        out += fmt::format("  sharing: {} groups of pools may share one (not computed)\n",
                           s.sharingGroups);
    if (s.healthProblems > 0)
        out += fmt::format("  {} problems in the graph input (fragscope info)\n", s.healthProblems);
    out += "  details: fragscope graphs FILE\n";
    return out;
}

std::string graphsReportText(const GraphsReport& r, int64_t begin, bool ordinal)
{
    std::string out = fmt::format("Graphs ({})\n", r.graphs.size());
    if (!r.graphs.empty())
        out += fmt::format("  {:<22} {:>3} {:>8} {:<12} {:>12} {:>8} {:>11} {:>11} {:>11} {:>11} "
                           "{:>14}\n",
                           "graph", "dev", "captures", "pool", "pool bytes", "replays", "p50",
                           "p99", "max", "jitter", "rho(F) (n)");
    for (const GraphInfo& g : r.graphs) {
        const PoolInfo* p = r.poolOf(g);
        out += fmt::format(
            "  {:<22} {:>3} {:>8} {:<12} {:>12} {:>8} {:>11} {:>11} {:>11} {:>11} {:>14}\n", g.name,
            g.device, g.captures.size(), graphPoolLabel(g), p ? humanBytes(p->reservedBytes) : "-",
            g.replay.count, g.replay.count ? durationText(static_cast<double>(g.replay.p50)) : "-",
            g.replay.count ? durationText(static_cast<double>(g.replay.p99)) : "-",
            g.replay.count ? durationText(static_cast<double>(g.replay.max)) : "-",
            g.replay.count > 1 ? durationText(g.replay.jitter) : "-",
            g.vsFragmentation.n >= 3
                ? fmt::format("{:+.3f} ({})", g.vsFragmentation.spearman, g.vsFragmentation.n)
                : fmt::format("- ({})", g.vsFragmentation.n));
    }
    bool any = false;
    for (const GraphInfo& g : r.graphs)
        for (const Recapture& rc : g.recaptures) {
            if (!any) out += "\nRe-captures\n";
            any = true;
            out += fmt::format("  {} at {}: {} of {} allocations moved ({}); the capture before "
                               "still held {} allocations ({})",
                               g.name, formatTime(rc.time, begin, ordinal), rc.moved,
                               rc.allocations, humanBytes(rc.movedBytes), rc.heldAllocations,
                               humanBytes(rc.heldBytes));
            if (!rc.samePool)
                out += fmt::format("; another pool, the old one holding {}",
                                   humanBytes(rc.previousPoolReserved));
            out += "\n";
        }
    out += fmt::format("\nPools ({})\n", r.pools.size());
    if (!r.pools.empty())
        out += fmt::format("  {:>3} {:<9} {:<12} {:>8} {:>12} {:>12} {:>12} {:>14}  {}\n", "dev",
                           "level", "pool", "segments", "reserved", "allocated", "peak reserved",
                           "peak at", "graphs");
    for (const PoolInfo& p : r.pools)
        out += fmt::format("  {:>3} {:<9} {:<12} {:>8} {:>12} {:>12} {:>12} {:>14}  {}\n", p.device,
                           levelName(p.level), poolLabel(p.pool, p.level), p.segments,
                           humanBytes(p.reservedBytes), humanBytes(p.allocatedBytes),
                           humanBytes(p.peakReservedBytes), formatTime(p.peakTime, begin, ordinal),
                           graphNames(r, p.graphs));
    if (!r.concurrent.empty()) {
        out += "\nReplayed concurrently\n ";
        for (const auto& [a, b] : r.concurrent)
            out += fmt::format(" {} + {};", r.graphs[a].name, r.graphs[b].name);
        out.back() = '\n';
    }
    out += "\nSharing what-if (computed by fragscope's allocator model, not measured)\n";
    if (r.sharing.empty())
        out += "  no two private pools have graphs that never replay concurrently\n";
    for (const SharingGroup& s : r.sharing) {
        std::string pools;
        for (uint64_t p : s.pools)
            pools += (pools.empty() ? "" : " + ") + poolLabel(p, Level::Framework);
        out += fmt::format("  device {}: pools {} ({})", s.device, pools, graphNames(r, s.graphs));
        if (s.computed)
            out += fmt::format(
                ": peak reserved {} -> {}, saves {}\n", humanBytes(s.peakReservedBefore),
                humanBytes(s.peakReservedAfter),
                humanBytes(static_cast<uint64_t>(std::max<int64_t>(0, s.peakReservedSavedBytes))));
        else
            out += ": not computed\n";
    }
    const SharingSummary& a = r.sharingAll;
    if (a.computed)
        out += fmt::format(
            "  every group merged: peak reserved {} -> {}, saves {}\n",
            humanBytes(a.peakReservedBefore), humanBytes(a.peakReservedAfter),
            humanBytes(static_cast<uint64_t>(std::max<int64_t>(0, a.peakReservedSavedBytes))));
    if (!a.note.empty() && !r.sharing.empty()) out += fmt::format("  note: {}\n", a.note);
    out += "\nGraph input health\n" + graphHealthText(r.health);
    for (const std::string& n : r.notes)
        out += fmt::format("  note: {}\n", n);
    for (const std::string& n : r.caveats.notes)
        out += fmt::format("  caveat: {}\n", n);
    return out;
}

} // namespace fs::analysis
