// A stand-in for a stale libfragscope-video.so (tst_video_cli, staleModuleIsRefusedByName): the
// module table of this build's layout, but measuring another list of metrics than the registry's
// (one renamed, as a module built before a metric was renamed would). Nothing here is ever called
// but metricNames: the loader refuses it first.
#include "core/video/module.h"

namespace {

std::vector<std::string> names()
{
    return {"flow_l2_px", "warp_error", "flicker", "ssim"};
}

} // namespace

extern "C" __attribute__((visibility("default"))) const fs::video::ModuleApi*
fragscope_video_module()
{
    static const fs::video::ModuleApi api{
        fs::video::kModuleVersion, nullptr, nullptr, nullptr, nullptr, &names};
    return &api;
}
