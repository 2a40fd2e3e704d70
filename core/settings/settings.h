// The user's analysis settings, one JSON file shared by the CLI and the GUI (docs/settings.md):
// collapse rules, precursor lookback, event-size entropy window and timeline step, burst gap, the
// frame pattern and memory-category rules. The GUI's rules editor writes it; `report`, `collapse`,
// `state`, `export` and `import` read it, so both always show the same collapses. Plain C++, no Qt.
#pragma once

#include "core/analysis/engine.h"
#include "core/analysis/explore.h"
#include "core/analysis/report.h"

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace fs::settings {

struct Rule
{
    analysis::CollapseRule rule;
    bool enabled = true; // kept in the file so that the editor can switch a rule off and back
    bool operator==(const Rule& o) const
    {
        return enabled == o.enabled && rule.metric == o.rule.metric &&
               rule.compare == o.rule.compare && rule.threshold == o.rule.threshold;
    }
};

struct Settings
{
    std::vector<Rule> rules;                   // default: the built-in collapse rules
    int64_t lookbackFrames = 2;                // precursor window: frames before the collapse
    int64_t entropyWindowNs = 300'000'000'000; // event-size entropy window (300 s)
    int64_t timelineStepNs = 0;                // timeline sample spacing; 0: span / 1000
    int64_t burstGapNs = 5'000'000;            // a burst ends at a gap of 5 ms or more
    std::string framePattern;                  // ECMAScript regex, group 1 = frame number
    analysis::FragmentedRule fragmented;       // when an instant counts as fragmented
    // Memory-category rules ("categories": {pattern: category}), tried in file order before
    // the built-in ones (core/analysis/categories.h).
    std::vector<analysis::CategoryRule> categoryRules;

    Settings();                                              // the defaults
    std::vector<analysis::CollapseRule> activeRules() const; // enabled rules only
    // Engine options these settings select (rules, lookback, entropy window).
    analysis::LoadOptions loadOptions() const;
    // Report options these settings select (burst gap, entropy window, category rules): `report`
    // and the GUI's report window use them.
    analysis::ReportOptions reportOptions() const;
    bool operator==(const Settings&) const = default;
};

// Where the settings file lives: $FRAGSCOPE_SETTINGS when set, else
// $XDG_CONFIG_HOME/fragscope/settings.json, else $HOME/.config/fragscope/settings.json.
std::string defaultPath();

// Reads a settings file over base: keys present replace base's values, absent keys keep them.
// The file may also be a bare JSON array of rules (a rules file). Throws SessionError naming the
// file and the byte offset or key that is wrong.
Settings read(const std::string& path, const Settings& base = Settings());
// defaultPath() (or path) when it exists, else the defaults. Errors as read().
Settings loadUser(const std::string& path = defaultPath());
// Writes every key (creating the folder), atomically: a temporary file renamed over the old one.
// Throws std::runtime_error naming the file on failure.
void write(const Settings& s, const std::string& path = defaultPath());
std::string toJson(const Settings& s);

// Parses "300s", "5ms", "1.5min", "250000000" (ns) into ns; throws std::invalid_argument.
int64_t parseDuration(const std::string& text);

} // namespace fs::settings
