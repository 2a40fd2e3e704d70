// libfragscope-video.so's one export (module.h).
#include "module.h"

extern "C" __attribute__((visibility("default"))) const fs::video::ModuleApi*
fragscope_video_module()
{
    static const fs::video::ModuleApi api{
        fs::video::kModuleVersion, &fs::video::addVideo,      &fs::video::opencvVersion,
        &fs::video::analyzeVideo,  &fs::video::compareVideos, &fs::video::measuredMetricNames};
    return &api;
}
