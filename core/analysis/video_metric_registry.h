// The per-frame video metrics, found by name (docs/architecture.md "Add a per-frame video
// metric"): the one table every user reads — the scoring (video_frames.h), the A/B judge, the
// GUI's metric lists, `metrics compute` — and the one list the video module's measurements
// (core/video/frame_measure.cpp) are checked against when it is loaded. Plain C++: the host,
// which does not link OpenCV, and the module share it.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fs::analysis {

struct VideoMetric
{
    const char* name; // the frame metric `metrics compute` writes; its z-score is name + "_z"
    const char* unit; // of the raw value, for the reader
    bool higherIsWorse;
    // The smallest spread its z-score divides by (a run whose values hardly vary would otherwise
    // turn codec noise into huge z-scores).
    double scaleFloor;
    // Grows with the frames between the two compared (displacement, flicker): divided by that
    // gap when a frame is scored against the one two before it (scoreVideo).
    bool perFrame;
    const char* description;
};

// Every video metric, in the order `metrics compute` writes them.
std::span<const VideoMetric> videoMetrics();
// The metric named `name`, or its z-score's metric ("warp_error_z" -> warp_error); null when
// there is none.
const VideoMetric* findVideoMetric(std::string_view name);
// Every frame metric `metrics compute` writes: the metrics, then their "_z" scores.
std::vector<std::string> videoMetricNames();
// Whether a larger value of a video metric (or its z-score) is worse; false for ssim_prev.
bool videoMetricHigherIsWorse(std::string_view name);

} // namespace fs::analysis
