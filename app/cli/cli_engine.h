// Opening a session for a CLI command: the analysis engine with a progress line on stderr
// (core/progress.h: only on a terminal, never with --quiet).
#pragma once

#include "core/analysis/engine.h"

#include <memory>
#include <string>

namespace fs::cli {

std::shared_ptr<const analysis::Engine> openEngine(const std::string& path,
                                                   analysis::LoadOptions opts = {});

} // namespace fs::cli
