// The video metrics as a module loaded on first use (libfragscope-video.so, docs/video.md
// "The video module"): `fragscope` and `fragscope-gui` do not link OpenCV, whose 240 shared
// libraries took 0.2 s of every start of every command. The module holds the one implementation
// (add_video.h); tests and benchmarks link it directly (fragscope_video).
#pragma once

#include "ab_measure.h"
#include "add_video.h"

#include <string>

namespace fs::video {

// What the module exports (fragscope_video_module()); kModuleVersion changes with this table's
// layout only. The metrics cross by name (analysis::VideoPair::values): the loader checks that
// the module measures exactly the metrics of this build's registry (video_metric_registry.h),
// so a new metric needs no version change.
struct ModuleApi
{
    int version;
    AddVideoResult (*addVideo)(const AddVideoOptions&);
    std::string (*opencvVersion)();
    // `fragscope ab` (ab_measure.h): a run's video scored as `metrics compute` scores it, and
    // compared frame by frame with the baseline's.
    VideoAnalysis (*analyzeVideo)(const std::string&, const AnalyzeOptions&);
    std::vector<study::FrameDistance> (*compareVideos)(const std::string&, const std::string&,
                                                       const std::atomic<bool>*);
    std::vector<std::string> (*metricNames)(); // measuredMetricNames()
};
constexpr int kModuleVersion = 3;

// The module, loaded once. Throws std::runtime_error naming the paths tried and the loader's
// message when it is missing or unusable.
const ModuleApi& module();

} // namespace fs::video
