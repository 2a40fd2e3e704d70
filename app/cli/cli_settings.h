// The analysis settings a CLI command runs with: the user's settings file
// (settings::defaultPath(), or --settings FILE), then --rules FILE, then single flags.
#pragma once

#include "command.h"
#include "core/settings/settings.h"

#include <vector>

namespace fs::cli {

// The options every settings-reading command accepts, appended to its own.
std::vector<Option> withSettingsOptions(std::vector<Option> own);
settings::Settings commandSettings(const Args& a);

} // namespace fs::cli
