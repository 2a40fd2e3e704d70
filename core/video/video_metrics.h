// `fragscope metrics compute` and File › Add video…, the measuring half: decodes a generated video
// (a file FFmpeg reads, or a folder of numbered PNG/JPEG frames) and measures every frame against
// the one before it with no model weights (docs/analysis.md "Video metrics"): DIS optical flow
// both ways, the warp error where they agree, flicker, SSIM, plus a thumbnail of every frame.
// Decoding runs on one thread while the two flows of each pair run on two others.
#pragma once

#include "core/analysis/video_frames.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace fs::video {

// Thrown when AnalyzeOptions::cancel becomes true.
struct Cancelled
{
};

struct AnalyzeOptions
{
    int workLongSide = 640;  // flow, warp and flicker on the frame reduced to this long side
    int thumbLongSide = 320; // thumbnails kept in the session
    bool thumbnails = true;
    // Called from the calling thread after each frame: frames done, frames expected (0: unknown).
    std::function<void(int64_t done, int64_t total)> progress;
    const std::atomic<bool>* cancel = nullptr;
};

struct VideoImages
{
    std::vector<uint8_t> thumbnailJpeg; // the frame, JPEG
    std::vector<uint8_t> flowPng; // |flow| from the frame it was measured against (none: frame 0)
};

struct VideoAnalysis
{
    std::string path;
    bool folder = false;
    std::string sha256;
    uint64_t bytes = 0;
    int width = 0, height = 0;
    double fps = 0; // 0 when unknown (a folder)
    int64_t frames = 0;
    int workWidth = 0, workHeight = 0;
    int ssimWidth = 0, ssimHeight = 0;
    int thumbWidth = 0, thumbHeight = 0;
    std::vector<analysis::VideoPair> pairs; // frame i against i - 1, i >= 1
    std::vector<analysis::VideoPair> skips; // frame i + 1 against i - 1 (isolated candidates)
    std::vector<analysis::VideoFrameScore> scores; // analysis::scoreVideo(pairs, skips)
    std::vector<VideoImages> images;               // by video frame
};

// Throws SessionError naming the file and the problem (not a video, truncated, one frame, frames
// of different sizes, unreadable folder), Cancelled on cancel.
VideoAnalysis analyzeVideo(const std::string& path, const AnalyzeOptions& o = {});

// Frames the video declares without decoding it (an estimate for some containers; exact for a
// folder): the CLI checks the frame mapping with it before the long work. Throws like
// analyzeVideo.
int64_t declaredFrames(const std::string& path);

// The video metrics this code measures, by name (frame_measure.cpp): the module exports them and
// the apps check them against analysis::videoMetrics() when they load it (module.h).
std::vector<std::string> measuredMetricNames();

// OpenCV's version ("4.6.0"), for --version.
std::string opencvVersion();

} // namespace fs::video
