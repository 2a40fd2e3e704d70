// `fragscope ab` (docs/ab.md), the pixel half: every frame of a run's video against the
// baseline's same frame. The frames are read as `metrics compute` reads them (VideoReader), the
// SSIM is the one `ssim_prev` uses (frame_measure.h), the PSNR OpenCV's.
#pragma once

#include "core/study/ab_study.h"

#include <atomic>
#include <string>
#include <vector>

namespace fs::video {

// Frame i of `video` against frame i of `baseline`, for every frame. Throws SessionError naming
// the video when it cannot be read, when the frame counts differ or when a frame's size differs
// from the baseline's; Cancelled (video_metrics.h) when cancel becomes true.
std::vector<study::FrameDistance> compareVideos(const std::string& video,
                                                const std::string& baseline,
                                                const std::atomic<bool>* cancel);

} // namespace fs::video
