// fragscope state FILE --at TIME|end [--device D] [--level L] [--json]: the allocator state of
// each device and level at one instant (definitions: docs/analysis.md).
#include "cli_engine.h"
#include "cli_settings.h"
#include "command.h"
#include "core/analysis/engine.h"
#include "core/analysis/serialize.h"
#include "core/json.h"
#include "core/session.h"

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
    const auto engine = openEngine(a.positional()[0], commandSettings(a).loadOptions());
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
    const auto& sum = engine->summary();
    const bool ordinal = sum.timeAxis == TimeAxis::Ordinal;
    if (a.flag("json")) {
        JsonWriter j;
        j.beginObject();
        j.field("file", a.positional()[0]);
        j.field("time", t);
        j.field("time_axis", ordinal ? "ordinal" : "ns");
        j.field("synthetic", sum.synthetic);
        j.key("states").beginArray();
        for (const State& s : states)
            writeState(j, s);
        j.endArray();
        writeCaveats(j, engine->caveats());
        j.endObject();
        fmt::print("{}\n", j.str());
        return Ok;
    }
    fmt::print("{}{}\n", a.positional()[0],
               sum.synthetic ? "   SYNTHETIC DATA (simulated, not a measurement)" : "");
    if (states.empty())
        fmt::print("  no allocator data{}\n", device || level ? " for this device/level" : "");
    for (const State& s : states)
        fmt::print("{}", stateText(s, engine->timeBegin(), ordinal));
    for (const auto& n : engine->caveats().notes)
        fmt::print("note: {}\n", n);
    return Ok;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "state",
    .synopsis = "FILE --at TIME|end [--device D] [--level L] [--json] [--quiet]",
    .summary = "Allocator state at one instant: reserved, allocated, free fragments, F, entropy, "
               "histogram",
    .options = withSettingsOptions(
        {{"at", "TIME",
          "instant: ns (absolute session time, or the ordinal on ordinal sessions),\n"
          "a duration from the session start (12.5s, 300ms, 2h), 'end', or\n"
          "frame:N (the end of frame N)"},
         {"device", "D", "only this device (default: every device)"},
         {"level", "L", "only this level: driver, pool or framework (default: every level)"},
         {"json", "", "print one JSON object instead of text"},
         {"quiet", "", "no progress line on stderr (shown only when stderr is a terminal)"}}),
    .details =
        "The state at TIME includes every event at or before TIME. A free fragment is a maximal\n"
        "range inside one region not covered by a live allocation of the level the region\n"
        "hosts; F = 1 - largest/free; entropy over size classes 2^n KiB, n = 2..12.\n"
        "JSON: {time, states: [{device, level, reserved_bytes, allocated_bytes, free_bytes,\n"
        "fragment_count, largest_free_fragment_bytes, fragmentation_ratio,\n"
        "fragment_entropy_bits, event_size_entropy_bits, entropy_window_ns,\n"
        "histogram: [{lo, hi, count, bytes}], clusters: [...]}], caveats}.\n"
        "event_size_entropy_bits: the same size classes over the alloc and free events in\n"
        "(TIME - window, TIME], window from the settings (docs/settings.md, default 300 s).",
    .run = runState,
    .order = 40,
});
