// The analysis settings a CLI command runs with: the user's settings file
// (settings::defaultPath(), or --settings FILE), then --rules FILE, then single flags.
#pragma once

#include "command.h"
#include "core/settings/settings.h"

#include <atomic>
#include <vector>

namespace fs::cli {

// The options every settings-reading command accepts, appended to its own.
std::vector<Option> withSettingsOptions(std::vector<Option> own);
settings::Settings commandSettings(const Args& a);

// After a command wrote a session: builds the analysis index and what the GUI's first look
// needs and stores them in the file (analysis::storeViewingIndex, docs/analysis.md "Caching"), with
// a progress line; the user's settings file gives the options, as the GUI reads them. A failure
// only warns: the file is complete without the index.
// `--index` (store it whatever the size) and `--no-index`, appended to a writer's options;
// storeAnalysisIndex(path, a) honours them (default: analysis::storeViewingIndex's size rule).
std::vector<Option> withIndexOptions(std::vector<Option> own);
// cancel raised while indexing: the index is not stored, and a line on stderr says so.
void storeAnalysisIndex(const std::string& path, const Args& a,
                        const std::atomic<bool>* cancel = nullptr);

} // namespace fs::cli
