#include "module.h"

#include "core/locate.h"

#include "core/analysis/video_metric_registry.h"

#include <algorithm>
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <mutex>

namespace fs::video {

namespace {

const ModuleApi* load(std::string& error)
{
    std::vector<std::string> tried;
    std::vector<std::string> buildTree;
#ifdef FRAGSCOPE_VIDEO_MODULE_BUILD_PATH
    buildTree.emplace_back(FRAGSCOPE_VIDEO_MODULE_BUILD_PATH);
#endif
    const std::string path =
        findRuntimeLibrary("libfragscope-video.so", "FRAGSCOPE_VIDEO_MODULE", buildTree, &tried);
    if (path.empty()) {
        error = fmt::format("the video module libfragscope-video.so was not found (looked for {}; "
                            "FRAGSCOPE_VIDEO_MODULE names it)",
                            fmt::join(tried, ", "));
        return nullptr;
    }
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        error = fmt::format("{}: cannot load the video module: {}", path, ::dlerror());
        return nullptr;
    }
    using Entry = const ModuleApi* (*)();
    auto entry = reinterpret_cast<Entry>(::dlsym(h, "fragscope_video_module"));
    const ModuleApi* api = entry ? entry() : nullptr;
    if (!api || api->version != kModuleVersion) {
        error = fmt::format("{}: not this fragscope's video module (version {}, expected {})", path,
                            api ? api->version : 0, kModuleVersion);
        return nullptr;
    }
    // The metrics by name: a module built with another list of metrics than this build's
    // registry (a stale build) would leave some unmeasured or write some nobody knows.
    std::vector<std::string> theirs = api->metricNames();
    std::vector<std::string> ours;
    for (const analysis::VideoMetric& m : analysis::videoMetrics())
        ours.emplace_back(m.name);
    std::sort(theirs.begin(), theirs.end());
    std::sort(ours.begin(), ours.end());
    if (theirs != ours) {
        error = fmt::format("{}: not this fragscope's video module (it measures {}, expected {})",
                            path, fmt::join(theirs, ", "), fmt::join(ours, ", "));
        return nullptr;
    }
    return api; // never unloaded: its code may run until exit
}

} // namespace

const ModuleApi& module()
{
    static std::once_flag once;
    static const ModuleApi* api = nullptr;
    static std::string error;
    std::call_once(once, [] { api = load(error); });
    if (!api) throw std::runtime_error(error);
    return *api;
}

} // namespace fs::video
