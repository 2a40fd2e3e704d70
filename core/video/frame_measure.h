// The pixel work of the video metrics (docs/analysis.md "Video metrics"): a decoded frame reduced
// to the images the metrics need, and the measurements of one pair of frames. Internal to
// fragscope_video (OpenCV types).
#pragma once

#include "core/analysis/video_frames.h"

#include <opencv2/core.hpp>
#include <opencv2/video/tracking.hpp>

#include <cstdint>
#include <vector>

namespace fs::video {

// Sizes derived from the video's frame size once.
struct Geometry
{
    cv::Size video;     // the video's own frames
    cv::Size work;      // flow, warp and flicker: at most workLongSide on the long side
    cv::Size ssim;      // SSIM: reduced as Wang et al.'s reference code does (see .cpp)
    cv::Size thumbnail; // at most thumbLongSide on the long side
    cv::Size flowThumbnail;
    double toVideoPixels = 1; // video pixels per work pixel (flow is reported in video pixels)
    int finestScale = 0;      // DIS's finest pyramid level on the work image
    static Geometry of(cv::Size video, int workLongSide, int thumbLongSide);
};

// One decoded frame, reduced.
struct Prepared
{
    int64_t index = -1;
    cv::Mat work;                       // BGR, Geometry::work
    cv::Mat gray;                       // 8-bit luma of work
    cv::Mat ssimGray;                   // 32-bit float luma, Geometry::ssim
    std::vector<uint8_t> thumbnailJpeg; // empty when not asked for
};
Prepared prepare(const cv::Mat& bgr, int64_t index, const Geometry& g, bool thumbnail);

// A DIS optical-flow instance (not thread-safe: one per thread).
cv::Ptr<cv::DISOpticalFlow> makeFlow(const Geometry& g);

// Measures `cur` against `ref`: forward flow ref -> cur and backward flow cur -> ref are given
// (the caller computes them on two threads). flowPng: the forward flow's magnitude as an 8-bit
// PNG of Geometry::flowThumbnail, a quarter of a video pixel per level (saturating at 63.75 px);
// left empty when null.
analysis::VideoPair measurePair(const Prepared& ref, const Prepared& cur, const cv::Mat& forward,
                                const cv::Mat& backward, const Geometry& g,
                                std::vector<uint8_t>* flowPng);

// Mean SSIM of two float lumas (0..255), Gaussian window 11x11, sigma 1.5, K1 0.01, K2 0.03.
double ssim(const cv::Mat& a, const cv::Mat& b);

} // namespace fs::video
