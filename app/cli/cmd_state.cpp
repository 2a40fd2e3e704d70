// fragscope state FILE --at TIME|end|peak [--device D] [--level L] [--pools | --pool P]
// [--by category] [--json]: the allocator state of each device and level at one instant, of each
// memory pool and the live blocks by memory category on request (definitions:
// docs/analysis.md).
#include "cli_engine.h"
#include "cli_settings.h"
#include "command.h"
#include "core/analysis/categories.h"
#include "core/analysis/engine.h"
#include "core/analysis/explore.h"
#include "core/analysis/serialize.h"
#include "core/json.h"
#include "core/store/session.h"

#include <fmt/format.h>

using namespace fs;
using namespace fs::cli;
using namespace fs::analysis;

namespace {

int runState(Args& a)
{
    a.expectPositional(1, "FILE");
    const auto at = a.get("at");
    if (!at) throw UsageError("--at TIME is required (ns, 12.5s, 300ms, end, or frame:N)");
    std::optional<uint32_t> device;
    if (auto d = a.get("device")) device = static_cast<uint32_t>(a.getInt("device", 0));
    std::optional<Level> level;
    if (auto l = a.get("level")) {
        Level lv;
        if (!parseLevel(*l, lv))
            throw UsageError("unknown level '" + *l + "' (driver, pool, framework)");
        level = lv;
    }
    std::optional<uint64_t> onlyPool;
    if (auto p = a.get("pool")) {
        uint64_t id = 0;
        if (!parsePoolId(*p, id))
            throw UsageError("--pool '" + *p +
                             "': expected default, a PyTorch pool id 'a,b', or a number");
        onlyPool = id;
    }
    const bool pools = a.flag("pools") || onlyPool.has_value();
    bool byCategory = false;
    if (auto b = a.get("by")) {
        if (*b != "category") throw UsageError("--by '" + *b + "': expected category");
        byCategory = true;
    }
    const settings::Settings st = commandSettings(a);
    const auto engine = openEngine(a.positional()[0], st.loadOptions());
    int64_t t = 0;
    try {
        t = parseTime(*engine, *at);
    } catch (const std::invalid_argument& e) {
        throw UsageError(std::string("--at: ") + e.what());
    }
    if (t < engine->timeBegin() || t > engine->timeEnd()) {
        const bool ord = engine->summary().timeAxis == TimeAxis::Ordinal;
        const auto span = [&](int64_t v) {
            return ord ? fmt::format("{}", v)
                       : fmt::format("{:.3f}s", static_cast<double>(v - engine->timeBegin()) / 1e9);
        };
        throw UsageError(fmt::format("--at {} lies outside the session, which spans {} to {}{}",
                                     *at, span(engine->timeBegin()), span(engine->timeEnd()),
                                     ord ? " (ordinals)" : " from its start; use --at end"));
    }
    std::vector<State> states;
    for (const Track& tr : engine->tracks()) {
        if ((device && tr.device != *device) || (level && tr.level != *level)) continue;
        states.push_back(engine->stateAt(tr.device, tr.level, t));
    }
    if (device && level && states.empty()) // asked for a track with no data: report zeros
        states.push_back(engine->stateAt(*device, *level, t));
    // Per pool: the states' tracks split by regions.pool_id (--pool: that pool only).
    std::vector<PoolState> poolStates;
    if (pools)
        for (const State& s : states)
            for (PoolState& p : engine->poolStatesAt(s.device, s.level, t))
                if (!onlyPool || p.pool == *onlyPool) poolStates.push_back(std::move(p));
    // Memory by category (core/analysis/categories.h), one breakdown per state.
    std::vector<CategoryBreakdown> cats;
    if (byCategory)
        for (const State& s : states)
            cats.push_back(categoriesAt(*engine, s.device, s.level, t, st.categoryRules));
    const auto& sum = engine->summary();
    const bool ordinal = sum.timeAxis == TimeAxis::Ordinal;
    if (a.flag("json")) {
        JsonWriter j;
        j.beginDocument();
        j.field("file", a.positional()[0]);
        j.field("time_ns", t);
        j.field("time_axis", ordinal ? "ordinal" : "ns");
        j.field("synthetic", sum.synthetic);
        j.key("states").beginArray();
        for (const State& s : states) {
            // The verdict as the text's (F beside the free share; docs/json.md).
            const Headline h = headline(s, st.fragmented);
            j.beginObject();
            writeStateFields(j, s);
            j.field("fragmented", h.fragmented);
            j.field("free_share_ratio", h.freeShare);
            j.field("verdict", h.text);
            if (byCategory) {
                const CategoryBreakdown& b = cats[static_cast<size_t>(&s - states.data())];
                j.field("category_total_bytes", b.totalBytes);
                writeCategoryRows(j, b);
            }
            j.endObject();
        }
        j.endArray();
        if (pools) {
            j.key("pools").beginArray();
            for (const PoolState& p : poolStates)
                writePoolState(j, p);
            j.endArray();
        }
        writeCaveats(j, engine->caveats());
        j.endObject();
        fmt::print("{}\n", j.str());
        return Ok;
    }
    fmt::print("{}{}\n", a.positional()[0],
               sum.synthetic ? "   SYNTHETIC DATA (simulated, not a measurement)" : "");
    if (states.empty())
        fmt::print("  no allocator data{}\n", device || level ? " for this device/level" : "");
    if (onlyPool) {
        if (poolStates.empty()) fmt::print("  no pool {} on the selected tracks\n", *a.get("pool"));
        for (const PoolState& p : poolStates)
            fmt::print("pool {}: {}", poolLabel(p.pool, p.state.level),
                       stateText(p.state, engine->timeBegin(), ordinal));
    } else {
        for (const State& s : states) {
            fmt::print("{}", stateText(s, engine->timeBegin(), ordinal));
            // F beside the free share (docs/settings.md, fragmented_min_*).
            fmt::print("  verdict            {}\n", headline(s, st.fragmented).text);
            if (byCategory) {
                const CategoryBreakdown& b = cats[static_cast<size_t>(&s - states.data())];
                fmt::print("  by category        {} in {} blocks{}\n", humanBytes(b.totalBytes),
                           b.blocks,
                           b.stacksRecorded ? "" : " (no stack, tag or note recorded: all other)");
                for (const CategoryRow& r : b.rows)
                    fmt::print("    {:<16} {:>12}  {:>6.2f}%  {:>8} blocks\n",
                               memoryCategoryName(r.category), humanBytes(r.bytes),
                               b.totalBytes ? 100.0 * static_cast<double>(r.bytes) /
                                                  static_cast<double>(b.totalBytes)
                                            : 0.0,
                               r.blocks);
            }
            if (!pools) continue;
            fmt::print("  pools (a private pool's figures apart from the default pool's)\n");
            for (const PoolState& p : poolStates)
                if (p.state.device == s.device && p.state.level == s.level)
                    fmt::print("    {:<10} regions {:>5}  reserved {:>10}  allocated {:>10}  free "
                               "{:>10}  pending {:>10}  fragments {:>5}  largest {:>10}  F "
                               "{:.6f}\n",
                               poolLabel(p.pool, p.state.level), p.state.regionCount,
                               humanBytes(p.state.reservedBytes),
                               humanBytes(p.state.allocatedBytes), humanBytes(p.state.freeBytes),
                               humanBytes(p.state.pendingFreeBytes), p.state.fragmentCount,
                               humanBytes(p.state.largestFreeFragmentBytes),
                               p.state.fragmentationRatio);
        }
    }
    for (const auto& n : engine->caveats().notes)
        fmt::print("note: {}\n", n);
    return Ok;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "state",
    .synopsis =
        "FILE --at TIME|end|peak [--device D] [--level L] [--pools | --pool P] [--by category] "
        "[--json] [--quiet]",
    .summary = "Allocator state at one instant: reserved, allocated, free fragments, F, entropy, "
               "histogram",
    .options = withSettingsOptions(
        {{"at", "TIME",
          "instant: ns (absolute session time, or the ordinal on ordinal sessions),\n"
          "a duration from the session start (12.5s, 300ms, 2h), 'end',\n"
          "'peak' (the default track's allocated-bytes peak), or frame:N (the end\n"
          "of frame N)"},
         {"device", "D", "only this device (default: every device)"},
         {"level", "L", "only this level: driver, pool or framework (default: every level)"},
         {"pools", "", "also each memory pool's figures (PyTorch private pools apart)"},
         {"pool", "P",
          "only pool P: default, a PyTorch segment_pool_id 'a,b', or a pool-level\n"
          "id (0x...)"},
         {"by", "category",
          "also the live blocks by memory category (parameters, gradients,\n"
          "optimizer_state, activations, kv_cache, workspace, other; rules:\n"
          "docs/analysis.md \"Memory by category\", settings \"categories\")"},
         {"json", "", "print one JSON object instead of text"},
         {"quiet", "", "no progress line on stderr (shown only when stderr is a terminal)"}}),
    .details =
        "The state at TIME includes every event at or before TIME. A free fragment is a maximal\n"
        "range inside one region not covered by a live allocation of the level the region\n"
        "hosts; F = 1 - largest/free; entropy over size classes 2^n KiB, n = 2..12.\n"
        "Pending frees (freed by the program, still used by another stream; PyTorch's\n"
        "active_pending_free) are neither allocated nor free: in no fragment, nor in free,\n"
        "the largest fragment or F; their bytes are shown beside them, with the figures\n"
        "once they complete (PyTorch memory_viz's free and F, which count them as free).\n"
        "verdict: fragmented only when F > fragmented_min_ratio (0.35) and free is at\n"
        "least fragmented_min_free_share (5 %) of reserved (settings file).\n"
        "JSON (fields: docs/json.md): {schema_version, file, time_ns, states: [{device,\n"
        "level, reserved_bytes, allocated_bytes, free_bytes, fragment_count,\n"
        "largest_free_bytes, fragmentation_ratio, fragment_entropy_bits,\n"
        "pending_free_blocks, pending_free_bytes, free_including_pending_bytes,\n"
        "largest_free_once_pending_complete_bytes,\n"
        "fragmentation_ratio_once_pending_complete,\n"
        "event_size_entropy_bits, entropy_window_ns, histogram: [{lo_bytes, hi_bytes, count,\n"
        "bytes}], clusters: [...], fragmented, free_share_ratio, verdict}], caveats}.\n"
        "event_size_entropy_bits: the same size classes over the alloc and free events in\n"
        "(TIME - window, TIME], window from the settings (docs/settings.md, default 300 s).\n"
        "--pools / --pool: the same figures per memory pool (regions.pool_id: PyTorch's\n"
        "segment_pool_id, e.g. CUDA-graph pools; the pool of a CUDA mempool); the pools of a\n"
        "track add up to its state. JSON: pools: [{pool, pool_label, device, level, ...}]\n"
        "(no event-size entropy: that is a figure of the whole track).\n"
        "--by category: each state also gets category_total_bytes (= allocated_bytes +\n"
        "allocated_outside_regions_bytes), stacks_recorded and categories: [{category,\n"
        "bytes, blocks}], largest first, every category once.",
    .run = runState,
    .order = 40,
});
