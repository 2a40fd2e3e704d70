#include "flight_options.h"

#include "capture/recorder/launcher.h"
#include "core/analysis/history.h"
#include "core/analysis/types.h"
#include "core/settings/settings.h"

#include <fmt/format.h>

namespace fs::cli {

std::vector<Option> withFlightOptions(std::vector<Option> own)
{
    own.push_back({"keep", "TIME",
                   "flight recorder: hold only the last TIME of events (30s, 10m, 1h) and write\n"
                   "windows around triggers (OOM, a collapse rule firing on a frame's metrics,\n"
                   "`fragscope mark PID`) instead of the whole run"});
    own.push_back({"before", "TIME",
                   "with --keep: a window starts this long before its trigger "
                   "(default: --keep)"});
    own.push_back({"after", "TIME", "with --keep: ... and ends this long after (default 10s)"});
    own.push_back({"max-size", "BYTES",
                   "with --keep: no window is written once the file nears this size (500M, 2G)"});
    return own;
}

std::optional<capture::FlightOptions> flightOptions(const Args& a)
{
    auto duration = [&](const char* name) -> std::optional<int64_t> {
        const auto v = a.get(name);
        if (!v) return std::nullopt;
        const int64_t ms = capture::parseDurationMs(*v);
        if (ms < 0 || (ms == 0 && std::string_view(name) == "keep"))
            throw UsageError(
                fmt::format("--{} wants a time such as 30s, 500ms, 2m or 1h, not '{}'", name, *v));
        return ms * 1'000'000;
    };
    const auto keep = duration("keep");
    if (!keep) {
        for (const char* o : {"before", "after", "max-size"})
            if (a.get(o)) throw UsageError(fmt::format("--{} needs --keep", o));
        return std::nullopt;
    }
    capture::FlightOptions f;
    f.keepNs = *keep;
    f.beforeNs = duration("before").value_or(f.keepNs);
    if (f.beforeNs > f.keepNs)
        throw UsageError("--before cannot be longer than --keep (only --keep is held)");
    f.afterNs = duration("after").value_or(10'000'000'000);
    f.maxBytes = a.getInt("max-size", 0);
    if (a.get("max-size") && f.maxBytes < (1 << 20))
        throw UsageError("--max-size must be at least 1M");
    const auto rules = settings::loadUser().activeRules();
    if (!rules.empty())
        f.breaks = [rules](const std::map<std::string, double>& m) {
            return analysis::breaksAnyRule(m, rules);
        };
    return f;
}

void printWindows(const char* command, const capture::RecordResult& r)
{
    constexpr size_t kListed = 20; // `fragscope info` lists them all
    for (size_t i = 0; i < r.windows.size() && i < kListed; ++i) {
        fmt::print(stderr, "fragscope {}: window {} (from the recording's start)\n", command,
                   analysis::windowLine(r.windows[i], r.flight.firstEventNs));
    }
    if (r.windows.size() > kListed)
        fmt::print(stderr, "fragscope {}: … and {} more windows (fragscope info FILE lists them)\n",
                   command, r.windows.size() - kListed);
    if (r.flight.windowsDropped > 0)
        fmt::print(stderr, "fragscope {}: {} trigger(s) not written: the file reached --max-size\n",
                   command, r.flight.windowsDropped);
}

} // namespace fs::cli
