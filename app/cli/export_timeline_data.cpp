#include "export_timeline_data.h"

#include "cli_engine.h"
#include "cli_settings.h"
#include "core/analysis/engine.h"
#include "core/analysis/timeline_export.h"
#include "core/store/session.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <memory>

using namespace fs;
using namespace fs::analysis;

namespace fs::cli {

std::string extensionOf(const std::string& path)
{
    std::string ext = std::filesystem::path(path).extension().string();
    std::transform(ext.begin(), ext.end(), ext.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return ext;
}

namespace {

int64_t timeArg(const Engine& e, const std::string& text, const char* opt)
{
    try {
        return parseTime(e, text);
    } catch (const std::invalid_argument& ex) {
        throw UsageError(fmt::format("--{}: {}", opt, ex.what()));
    }
}

// The session's caveats plus the pool timelines' own note.
Caveats poolCaveats(Caveats c, const std::vector<Timeline>& timelines)
{
    for (const Timeline& tl : timelines)
        for (const std::string& n : tl.caveats.notes)
            if (std::find(c.notes.begin(), c.notes.end(), n) == c.notes.end()) c.notes.push_back(n);
    return c;
}

} // namespace

bool isTimelineDataOutput(const std::string& out)
{
    const std::string ext = extensionOf(out);
    return ext == ".csv" || ext == ".json";
}

int exportTimelineData(Args& a)
{
    const std::string in = a.positional()[1];
    const std::string out = *a.get("output");
    const bool json = extensionOf(out) == ".json";
    for (const char* imageOnly : {"size", "frame", "at", "dark"})
        if (a.get(imageOnly))
            throw UsageError(fmt::format("--{} applies to images, not to {} data", imageOnly,
                                         json ? "JSON" : "CSV"));
    std::optional<uint32_t> device;
    if (a.get("device")) device = static_cast<uint32_t>(a.getInt("device", 0));
    std::optional<Level> level;
    if (auto l = a.get("level")) {
        Level lv;
        if (!parseLevel(*l, lv))
            throw UsageError(fmt::format("--level '{}': expected driver, pool or framework", *l));
        level = lv;
    }
    std::optional<uint64_t> pool; // one memory pool's figures (PyTorch private pools)
    if (auto p = a.get("pool")) {
        uint64_t id = 0;
        if (!parsePoolId(*p, id))
            throw UsageError(fmt::format(
                "--pool '{}': expected default, a PyTorch pool id 'a,b', or a number", *p));
        pool = id;
    }
    const settings::Settings st = commandSettings(a);
    const LoadOptions lo = st.loadOptions();
    const auto engine = openEngine(in, lo);

    int64_t from = kNoTime, to = kNoTime;
    if (auto fr = a.get("frames")) {
        if (a.get("from") || a.get("to"))
            throw UsageError("use either --frames or --from/--to, not both");
        int64_t fa = 0, fb = 0;
        if (std::sscanf(fr->c_str(), "%ld-%ld", &fa, &fb) != 2 || fb < fa)
            throw UsageError(fmt::format("--frames '{}': expected A-B with A <= B", *fr));
        const FrameInfo *ra = nullptr, *rb = nullptr;
        for (const FrameInfo& f : engine->frames()) {
            if (f.index == fa) ra = &f;
            if (f.index == fb) rb = &f;
        }
        if (!ra || !rb)
            throw UsageError(fmt::format("--frames {}-{}: no such frames in the session", fa, fb));
        from = ra->start;
        to = rb->end;
    } else {
        if (auto f = a.get("from")) from = timeArg(*engine, *f, "from");
        if (auto t = a.get("to")) to = timeArg(*engine, *t, "to");
        if (from != kNoTime && to != kNoTime && to <= from)
            throw UsageError("--to must be after --from");
    }
    int64_t step = st.timelineStepNs;
    if (auto s = a.get("step")) try {
            step = settings::parseDuration(*s);
        } catch (const std::invalid_argument& ex) {
            throw UsageError(std::string("--step: ") + ex.what());
        }

    std::vector<Timeline> timelines;
    for (const Track& tr : engine->tracks()) {
        if ((device && tr.device != *device) || (level && tr.level != *level)) continue;
        if (pool) { // only the tracks that have the pool
            const auto ps = engine->poolStatesAt(tr.device, tr.level, engine->timeEnd());
            if (std::none_of(ps.begin(), ps.end(),
                             [&](const PoolState& p) { return p.pool == *pool; }))
                continue;
        }
        TimelineOptions o;
        o.device = tr.device;
        o.level = tr.level;
        o.from = from;
        o.to = to;
        o.step = step;
        o.entropyWindowNs = lo.entropyWindowNs; // the window stateAt uses: rows equal `state`
        timelines.push_back(pool ? engine->poolTimeline(o, *pool) : engine->timeline(o));
    }
    if (timelines.empty())
        throw UsageError(fmt::format("{}: no allocator data{}{}", in,
                                     device || level ? " for this device/level" : "",
                                     pool ? " in pool " + *a.get("pool") : ""));

    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(out.c_str(), "wb"), &std::fclose);
    if (!f) throw std::runtime_error(fmt::format("cannot write {}", out));
    try {
        if (json)
            writeTimelineJson(f.get(), timelines, in,
                              engine->summary().timeAxis == TimeAxis::Ordinal,
                              pool ? poolCaveats(engine->caveats(), timelines) : engine->caveats());
        else
            writeTimelineCsv(f.get(), timelines);
        if (std::fflush(f.get()) != 0) throw std::runtime_error("write error");
    } catch (const std::exception& ex) {
        f.reset();
        std::error_code ec;
        std::filesystem::remove(out, ec);
        throw std::runtime_error(fmt::format("{}: {}", out, ex.what()));
    }
    size_t rows = 0;
    for (const Timeline& tl : timelines)
        rows += tl.time.size();
    fmt::print("wrote {} ({} rows, {} track{}, {})\n", out, rows, timelines.size(),
               timelines.size() == 1 ? "" : "s", json ? "JSON" : "CSV");
    return Ok;
}

} // namespace fs::cli
