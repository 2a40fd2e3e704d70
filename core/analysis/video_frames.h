// Per-frame quality from the generated video (docs/analysis.md "Video metrics"): what the
// measurements of consecutive video frames become as frame metrics. Plain C++ over numbers: the
// pixels are measured in core/video (OpenCV), the scores, the isolated-frame rule, the robust
// z-scores and the video-to-session frame mapping are decided here, once, for the CLI and the GUI.
#pragma once

#include "video_metric_registry.h"

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace fs::analysis {

// The raw measurements of video frame `frame` against an earlier frame `reference` (frame - 1,
// or frame - 2 after an isolated broken frame; see scoreVideo).
struct VideoPair
{
    int64_t frame = 0;
    int64_t reference = 0;
    // Each video metric's raw value by its name (video_metric_registry.h): flow_l2_px (mean
    // |forward flow| over all pixels, in the video's own pixels), warp_error (mean |frame - warped
    // reference| over consistent pixels, 0..255), flicker (mean |luma difference|, 0..255),
    // ssim_prev (SSIM of the lumas). By name, so that a new metric changes no layout across the
    // video module's boundary.
    std::map<std::string, double> values;
    double consistentShare = 0; // share of pixels that passed the forward-backward check
};

// The z-score beyond which a frame breaks: the default rule `warp_error_z > 6`, and the
// isolated-frame test.
inline constexpr double kVideoBreakZ = 6.0;

// Median and median absolute deviation of a run's values (stats.h), and the spread z-scores
// divide by: max(1.4826 * MAD, floor) (1.4826 * MAD estimates the standard deviation of normal
// data; the floor keeps a still video's tiny spread from turning noise into breaks).
struct RobustScale
{
    double median = 0;
    double mad = 0;
    double scale = 1;
    double z(double x) const { return (x - median) / scale; }
};
RobustScale videoScale(std::span<const double> values, double floor);

// One video frame's metrics (frame 0 has none: nothing precedes it).
struct VideoFrameScore
{
    int64_t frame = 0;
    int64_t reference = 0;
    std::map<std::string, double> values; // the four metrics and their "_z"
};

// Frames i whose pair and whose successor's pair both break (warp_error z > kVideoBreakZ): frame
// i may be an isolated broken frame that only spoils its successor's comparison. The caller
// measures frame i + 1 against frame i - 1 for each and passes those pairs to scoreVideo.
std::vector<int64_t> isolatedBreakCandidates(std::span<const VideoPair> pairs);

// The scores of every measured frame, by frame. `skips` are pairs (i - 1 -> i + 1) measured for
// isolatedBreakCandidates: where one's warp error is not a break against the run, frame i was an
// isolated broken frame and frame i + 1 is scored against frame i - 1 instead (its displacement
// and flicker per frame, i.e. halved). Then every metric gets its robust z-score over the run.
std::vector<VideoFrameScore> scoreVideo(std::span<const VideoPair> pairs,
                                        std::span<const VideoPair> skips = {});

// How video frames map to the session's frames: video frame v is session frame
// offset + floor(v / perSessionFrame) (chunked generators write several video frames per
// session frame).
struct FrameMap
{
    int64_t perSessionFrame = 1;
    int64_t offset = 0;
    int64_t sessionFrame(int64_t videoFrame) const;
    std::string text() const; // as --map takes it: "4" or "4:1"
    bool operator==(const FrameMap&) const = default;
};
// "K" or "K:OFFSET" (K >= 1); nullopt with a reason otherwise.
std::optional<FrameMap> parseFrameMap(std::string_view s, std::string* error = nullptr);

// Whether a video of `videoFrames` frames fits the session's frame indices under a map: every
// session frame gets exactly perSessionFrame video frames and no video frame is left over.
// Otherwise `problem` gives both counts and `suggestion` the map that fits, when one does.
struct MapFit
{
    bool fits = false;
    std::string problem;
    std::optional<FrameMap> suggestion;
};
MapFit fitFrameMap(int64_t videoFrames, std::span<const int64_t> sessionFrames, const FrameMap& m);

// Session frame -> metric -> value: each session frame takes, metric by metric, the worst value
// of its video frames (the largest; the smallest for ssim_prev and ssim_prev_z).
std::map<int64_t, std::map<std::string, double>>
sessionFrameValues(std::span<const VideoFrameScore> scores, const FrameMap& m);

} // namespace fs::analysis
