#include "ab_measure.h"

#include "frame_measure.h"
#include "video_metrics.h"
#include "video_reader.h"

#include "core/store/sqlite.h"

#include <cmath>
#include <fmt/format.h>
#include <limits>
#include <opencv2/core.hpp>

namespace fs::video {

std::vector<study::FrameDistance> compareVideos(const std::string& video,
                                                const std::string& baseline,
                                                const std::atomic<bool>* cancel)
{
    VideoReader a(video);
    VideoReader b(baseline);
    std::vector<study::FrameDistance> out;
    cv::Mat fa, fb;
    Geometry g;
    for (int64_t i = 0;; ++i) {
        if (cancel && cancel->load()) throw Cancelled{};
        const bool hasA = a.next(fa);
        const bool hasB = b.next(fb);
        if (hasA != hasB)
            throw SessionError(video,
                               fmt::format("{} after {} frames than the baseline's video {}",
                                           hasA ? "more frames" : "fewer frames", i, baseline));
        if (!hasA) break;
        if (fa.size() != fb.size())
            throw SessionError(video, fmt::format("frame {} is {}x{}, the baseline's {}x{}", i,
                                                  fa.cols, fa.rows, fb.cols, fb.rows));
        if (i == 0) g = Geometry::of(fa.size(), 640, 320);
        study::FrameDistance d;
        d.frame = i;
        d.mse = cv::norm(fa, fb, cv::NORM_L2SQR) / static_cast<double>(fa.total() * fa.channels());
        d.psnrDb = d.mse == 0 ? std::numeric_limits<double>::infinity() : cv::PSNR(fa, fb, 255.0);
        const Prepared pa = prepare(fa, i, g, false);
        const Prepared pb = prepare(fb, i, g, false);
        d.ssim = ssim(pa.ssimGray, pb.ssimGray);
        out.push_back(d);
    }
    return out;
}

} // namespace fs::video
