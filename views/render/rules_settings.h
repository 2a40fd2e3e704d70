// The user's collapse rules (core/settings: the file the CLI reads too) as the views' rule type.
// Header-only: the GUI's rules editor and `fragscope export` convert with it, so an image, the
// GUI and `report` always evaluate the same rules.
#pragma once

#include "core/settings/settings.h"
#include "render/scene.h"

#include <vector>

namespace fs::render {

inline std::vector<CollapseRule> rulesFromSettings(const settings::Settings& s)
{
    std::vector<CollapseRule> out;
    for (const settings::Rule& r : s.rules)
        out.push_back({r.rule.metric, r.rule.compare == analysis::Compare::Less, r.rule.threshold,
                       r.enabled});
    return out;
}

inline void setRules(settings::Settings& s, const std::vector<CollapseRule>& rules)
{
    s.rules.clear();
    for (const CollapseRule& r : rules)
        s.rules.push_back(
            {{r.metric, r.below ? analysis::Compare::Less : analysis::Compare::Greater,
              r.threshold},
             r.enabled});
}

} // namespace fs::render
