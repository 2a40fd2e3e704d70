// The allocator history of a PyTorch snapshot (history.h).
#include "history.h"

#include <algorithm>
#include <charconv>
#include <sstream>

#include <fmt/format.h>

namespace fs::analysis {

namespace {

bool number(std::string_view s, int64_t& out, int base = 10)
{
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
    return ec == std::errc() && p == s.data() + s.size();
}

} // namespace

std::vector<TraceHistory> traceHistory(const std::map<std::string, std::string>& meta)
{
    std::vector<TraceHistory> out;
    const auto it = meta.find("pytorch.history");
    if (it == meta.end()) return out;
    std::istringstream lines(it->second);
    std::string line;
    while (std::getline(lines, line)) {
        // device=0 truncated=1 max_entries=N entries=N ghost_blocks=K ghost_ns=T ghosts=a,b,...
        TraceHistory h;
        bool ok = false;
        std::istringstream words(line);
        std::string w;
        while (words >> w) {
            const size_t eq = w.find('=');
            if (eq == std::string::npos) continue;
            const std::string_view k(w.data(), eq), v(w.data() + eq + 1, w.size() - eq - 1);
            int64_t n = 0;
            if (k == "ghosts") {
                for (size_t a = 0; a < v.size();) {
                    const size_t b = std::min(v.find(',', a), v.size());
                    uint64_t addr = 0;
                    auto [p, ec] = std::from_chars(v.data() + a, v.data() + b, addr, 16);
                    if (ec == std::errc() && p == v.data() + b) h.ghosts.push_back(addr);
                    a = b + 1;
                }
            } else if (number(v, n)) {
                if (k == "device") {
                    h.device = static_cast<uint32_t>(n);
                    ok = true;
                } else if (k == "truncated") {
                    h.truncated = n != 0;
                } else if (k == "max_entries") {
                    h.maxEntries = n;
                } else if (k == "entries") {
                    h.entries = n;
                } else if (k == "ghost_blocks") {
                    h.ghostBlocks = n;
                } else if (k == "ghost_ns") {
                    h.ghostNs = n;
                }
            }
        }
        std::sort(h.ghosts.begin(), h.ghosts.end());
        if (ok) out.push_back(std::move(h));
    }
    return out;
}

bool isGhostBlock(const std::vector<TraceHistory>& hs, uint32_t device, uint64_t address,
                  int64_t allocNs)
{
    for (const TraceHistory& h : hs)
        if (h.device == device)
            return allocNs == h.ghostNs &&
                   std::binary_search(h.ghosts.begin(), h.ghosts.end(), address);
    return false;
}

std::string historyNote(const TraceHistory& h)
{
    if (!h.truncated) return {};
    return fmt::format(
        "device {}: the allocator history is truncated ({}): the trace starts mid-run, "
        "and {} ghost blocks allocated before its first entry carry no stack",
        h.device,
        h.maxEntries > 0
            ? fmt::format("the trace's ring buffer of {} entries overflowed", h.maxEntries)
            : std::string("the trace's ring buffer overflowed"),
        h.ghostBlocks);
}

std::string historyBadge(const TraceHistory& h)
{
    if (!h.truncated) return {};
    return fmt::format("device {}: history TRUNCATED, {} ghost block{}", h.device, h.ghostBlocks,
                       h.ghostBlocks == 1 ? "" : "s");
}

namespace {
int64_t keptNs(const std::vector<RecordedWindow>& windows)
{
    int64_t n = 0;
    for (const RecordedWindow& w : windows)
        n += w.endNs - w.beginNs;
    return n;
}
} // namespace

std::string windowsNote(const std::vector<RecordedWindow>& windows)
{
    if (windows.empty()) return {};
    return fmt::format("flight recording: only {} window{} ({:.1f} s in all) around triggers "
                       "were recorded; nothing between them is in the session, so figures "
                       "describe the windows only",
                       windows.size(), windows.size() == 1 ? "" : "s",
                       static_cast<double>(keptNs(windows)) / 1e9);
}

std::string windowsBadge(const std::vector<RecordedWindow>& windows)
{
    if (windows.empty()) return {};
    return fmt::format("flight recording: {} window{}, gaps not recorded", windows.size(),
                       windows.size() == 1 ? "" : "s");
}

std::string windowLine(const RecordedWindow& w, int64_t origin)
{
    return fmt::format("{:.3f}-{:.3f} s  ({} events)  {}",
                       static_cast<double>(w.beginNs - origin) / 1e9,
                       static_cast<double>(w.endNs - origin) / 1e9, w.events, w.trigger);
}

void writeWindows(JsonWriter& j, const std::vector<RecordedWindow>& windows)
{
    j.key("windows").beginArray();
    for (const RecordedWindow& w : windows)
        j.beginObject()
            .field("begin_ns", w.beginNs)
            .field("end_ns", w.endNs)
            .field("trigger", w.trigger)
            .field("events", w.events)
            .endObject();
    j.endArray();
}

std::vector<std::pair<int64_t, int64_t>> unrecordedSpans(const std::vector<RecordedWindow>& windows,
                                                         int64_t begin, int64_t end)
{
    std::vector<std::pair<int64_t, int64_t>> out;
    if (windows.empty() || end <= begin) return out;
    std::vector<std::pair<int64_t, int64_t>> kept;
    for (const RecordedWindow& w : windows)
        kept.emplace_back(w.beginNs, w.endNs);
    std::sort(kept.begin(), kept.end());
    int64_t at = begin;
    for (const auto& [b, e] : kept) {
        if (b > at) out.emplace_back(at, std::min(b, end));
        at = std::max(at, e);
        if (at >= end) break;
    }
    if (at < end) out.emplace_back(at, end);
    return out;
}

void writeHistory(JsonWriter& j, const std::vector<TraceHistory>& hs)
{
    j.key("history").beginArray();
    for (const TraceHistory& h : hs) {
        j.beginObject().field("device", h.device).field("truncated", h.truncated);
        j.key("max_entries");
        if (h.maxEntries > 0)
            j.value(h.maxEntries);
        else
            j.null();
        j.field("ghost_blocks", h.ghostBlocks).endObject();
    }
    j.endArray();
}

} // namespace fs::analysis
