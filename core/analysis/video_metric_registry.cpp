#include "video_metric_registry.h"

#include <array>

namespace fs::analysis {

namespace {

// Floors: a tenth of a pixel of displacement, half a grey level of error or flicker, and 0.005
// of SSIM are below what a viewer or the codec's own noise distinguishes.
constexpr std::array kMetrics = {
    VideoMetric{"flow_l2_px", "px", true, 0.1, true,
                "mean DIS optical-flow magnitude, in the video's own pixels"},
    VideoMetric{"warp_error", "0..255", true, 0.5, false,
                "mean absolute error of the previous frame warped by the flow, over the pixels "
                "whose forward and backward flows agree"},
    VideoMetric{"flicker", "0..255", true, 0.5, true, "mean absolute luma difference"},
    VideoMetric{"ssim_prev", "0..1", false, 0.005, false, "SSIM against the previous frame"},
};

} // namespace

std::span<const VideoMetric> videoMetrics()
{
    return kMetrics;
}

const VideoMetric* findVideoMetric(std::string_view name)
{
    for (const VideoMetric& m : kMetrics)
        if (name == m.name) return &m;
    if (name.ends_with("_z")) {
        name.remove_suffix(2);
        for (const VideoMetric& m : kMetrics)
            if (name == m.name) return &m;
    }
    return nullptr;
}

std::vector<std::string> videoMetricNames()
{
    std::vector<std::string> out;
    for (const VideoMetric& m : kMetrics)
        out.emplace_back(m.name);
    for (const VideoMetric& m : kMetrics)
        out.push_back(std::string(m.name) + "_z");
    return out;
}

bool videoMetricHigherIsWorse(std::string_view name)
{
    const VideoMetric* m = findVideoMetric(name);
    return !m || m->higherIsWorse;
}

} // namespace fs::analysis
