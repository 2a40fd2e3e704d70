#include "cli_settings.h"

#include "core/analysis/viewing_index.h"
#include "core/progress.h"

#include <fmt/format.h>

namespace fs::cli {

std::vector<Option> withSettingsOptions(std::vector<Option> own)
{
    own.push_back({"settings", "FILE",
                   "settings file to use instead of the user's (docs/settings.md; default\n"
                   "$XDG_CONFIG_HOME/fragscope/settings.json, the file the GUI writes)"});
    own.push_back({"rules", "FILE",
                   "collapse rules (a JSON array of {metric, compare, threshold}, or a\n"
                   "settings file) over the settings file's"});
    own.push_back({"lookback", "N", "precursor window: N frames before the collapse (default 2)"});
    own.push_back({"entropy-window", "T", "event-size entropy window (default 300s)"});
    own.push_back({"burst-gap", "T", "a burst ends at a gap of T or more (default 5ms)"});
    return own;
}

settings::Settings commandSettings(const Args& a)
{
    // An explicit --settings file must exist; the user's default file may not.
    const auto f = a.get("settings");
    settings::Settings s = f ? settings::read(*f) : settings::loadUser();
    if (auto r = a.get("rules")) s = settings::read(*r, s);
    if (a.get("lookback")) {
        s.lookbackFrames = a.getInt("lookback", 2);
        if (s.lookbackFrames < 0) throw UsageError("--lookback must be >= 0");
    }
    auto duration = [&](const char* opt, int64_t& out) {
        if (auto v = a.get(opt)) try {
                out = settings::parseDuration(*v);
            } catch (const std::invalid_argument& e) {
                throw UsageError(fmt::format("--{}: {}", opt, e.what()));
            }
    };
    duration("entropy-window", s.entropyWindowNs);
    duration("burst-gap", s.burstGapNs);
    return s;
}

std::vector<Option> withIndexOptions(std::vector<Option> own)
{
    own.push_back({"index", "",
                   "store the analysis index even for a session under 2 M allocations (one that "
                   "small\nis indexed by its first open in well under a second)"});
    own.push_back({"no-index", "",
                   "do not store the analysis index in the file (the first open then builds it)"});
    return own;
}

void storeAnalysisIndex(const std::string& path, const Args& a, const std::atomic<bool>* cancel)
{
    if (a.flag("no-index")) return;
    analysis::ViewingIndexOptions vo;
    try {
        vo.load = settings::loadUser().loadOptions(); // as the GUI's loader reads them
    } catch (const std::exception&) {
        // A broken settings file: the defaults (commands that read it report it).
    }
    vo.always = a.flag("index");
    Progress progress("indexing", 100, "%");
    vo.progress = [&](int percent) { progress.update(percent); };
    vo.cancel = cancel;
    try {
        analysis::storeViewingIndex(path, vo);
        progress.finish();
    } catch (const analysis::Cancelled&) {
        progress.finish();
        fmt::print(stderr,
                   "{}: stopped while indexing: the session is complete, its analysis index is "
                   "not stored (the first open builds it)\n",
                   path);
    } catch (const std::exception& e) {
        progress.finish();
        fmt::print(stderr, "warning: {}: analysis index not stored: {}\n", path, e.what());
    }
}

} // namespace fs::cli
