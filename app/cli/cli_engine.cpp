#include "cli_engine.h"

#include "core/progress.h"

#include <filesystem>

namespace fs::cli {

std::shared_ptr<const analysis::Engine> openEngine(const std::string& path,
                                                   analysis::LoadOptions opts)
{
    auto progress = std::make_shared<Progress>(
        "analysing " + std::filesystem::path(path).filename().string(), 0, "rows");
    opts.progress = [progress](int64_t done, int64_t total) { progress->update(done, total); };
    auto engine = analysis::Engine::open(path, std::move(opts));
    progress->finish();
    return engine;
}

} // namespace fs::cli
