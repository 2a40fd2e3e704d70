#include "timeline_export.h"

#include "core/json.h"

#include <cmath>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <stdexcept>

namespace fs::analysis {

namespace {

// Byte figures are whole numbers held in doubles (exact below 2^53).
uint64_t bytes(double v)
{
    return v <= 0 ? 0 : static_cast<uint64_t>(std::llround(v));
}

// One sample's values as text, in timelineColumns() order.
std::vector<std::string> rowValues(const Timeline& tl, size_t i, bool quoteLevel)
{
    const std::string level(levelName(tl.level));
    return {fmt::format("{}", tl.time[i]),
            fmt::format("{}", tl.device),
            quoteLevel ? "\"" + level + "\"" : level,
            fmt::format("{}", bytes(tl.reserved[i])),
            fmt::format("{}", bytes(tl.allocated[i])),
            fmt::format("{}", bytes(tl.freeInRegions[i])),
            fmt::format("{}", static_cast<int64_t>(tl.fragmentCount[i])),
            fmt::format("{}", bytes(tl.largestFragment[i])),
            fmt::format("{}", tl.fragmentationRatio[i]),
            fmt::format("{}", tl.fragmentEntropy[i]),
            fmt::format("{}", tl.eventEntropy[i])};
}

void check(std::FILE* out)
{
    if (std::ferror(out)) throw std::runtime_error("write error");
}

} // namespace

const std::vector<std::string>& timelineColumns()
{
    static const std::vector<std::string> cols = {"time_ns",
                                                  "device",
                                                  "level",
                                                  "reserved_bytes",
                                                  "allocated_bytes",
                                                  "free_bytes",
                                                  "fragment_count",
                                                  "largest_free_bytes",
                                                  "fragmentation_ratio",
                                                  "fragment_entropy_bits",
                                                  "event_size_entropy_bits"};
    return cols;
}

void writeTimelineCsv(std::FILE* out, const std::vector<Timeline>& timelines)
{
    fmt::print(out, "{}\n", fmt::join(timelineColumns(), ","));
    for (const Timeline& tl : timelines)
        for (size_t i = 0; i < tl.time.size(); ++i)
            fmt::print(out, "{}\n", fmt::join(rowValues(tl, i, false), ","));
    check(out);
}

void writeTimelineJson(std::FILE* out, const std::vector<Timeline>& timelines,
                       const std::string& file, bool ordinal, const Caveats& caveats)
{
    const auto& cols = timelineColumns();
    fmt::print(out,
               "{{\n  \"schema_version\": {},\n  \"file\": \"{}\",\n  \"time_axis\": \"{}\",\n",
               kJsonSchemaVersion, JsonWriter::escape(file), ordinal ? "ordinal" : "ns");
    fmt::print(out, "  \"entropy_window_ns\": {},\n  \"columns\": [",
               timelines.empty() ? 0 : timelines.front().entropyWindowNs);
    for (size_t c = 0; c < cols.size(); ++c)
        fmt::print(out, "{}\"{}\"", c ? ", " : "", cols[c]);
    fmt::print(out, "],\n  \"samples\": [");
    bool first = true;
    for (const Timeline& tl : timelines)
        for (size_t i = 0; i < tl.time.size(); ++i) {
            const auto v = rowValues(tl, i, true);
            fmt::print(out, "{}\n    {{", first ? "" : ",");
            first = false;
            for (size_t c = 0; c < cols.size(); ++c)
                fmt::print(out, "{}\"{}\": {}", c ? ", " : "", cols[c], v[c]);
            fmt::print(out, "}}");
        }
    fmt::print(out, "\n  ],\n  \"caveats\": [");
    for (size_t k = 0; k < caveats.notes.size(); ++k)
        fmt::print(out, "{}\"{}\"", k ? ", " : "", JsonWriter::escape(caveats.notes[k]));
    fmt::print(out, "]\n}}\n");
    check(out);
}

} // namespace fs::analysis
