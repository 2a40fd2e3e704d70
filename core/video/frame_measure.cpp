#include "frame_measure.h"

#include "stage_clock.h"

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fs::video {

namespace {

cv::Size fitLongSide(cv::Size s, int longSide)
{
    const int l = std::max(s.width, s.height);
    if (longSide <= 0 || l <= longSide) return s;
    const double f = static_cast<double>(longSide) / l;
    return {std::max(1, static_cast<int>(std::lround(s.width * f))),
            std::max(1, static_cast<int>(std::lround(s.height * f)))};
}

cv::Mat resized(const cv::Mat& m, cv::Size to)
{
    if (m.size() == to) return m;
    cv::Mat out;
    cv::resize(m, out, to, 0, 0, cv::INTER_AREA);
    return out;
}

// DIS's coarse-to-fine search stops at its "finest scale": level 2 of the pyramid in OpenCV's
// fast preset (a quarter of the image). On small frames that level is too coarse for small
// displacements (at 160x120 a 1 px shift measured 1.14 px), so the finest level keeps at least
// this many pixels on its long side: level 2 from 640 px (the work size of any HD video), the
// image itself below 320 px.
constexpr int kFlowFinestLongSide = 160;
constexpr int kPresetFinestScale = 2;

// (x, y) at every pixel of a size, made once per size and thread.
const cv::Mat& pixelGrid(cv::Size size)
{
    thread_local cv::Mat grid;
    if (grid.size() != size) {
        grid.create(size, CV_32FC2);
        for (int y = 0; y < size.height; ++y) {
            auto* g = grid.ptr<cv::Vec2f>(y);
            for (int x = 0; x < size.width; ++x)
                g[x] = cv::Vec2f(static_cast<float>(x), static_cast<float>(y));
        }
    }
    return grid;
}

} // namespace

Geometry Geometry::of(cv::Size video, int workLongSide, int thumbLongSide)
{
    Geometry g;
    g.video = video;
    g.work = fitLongSide(video, workLongSide);
    g.toVideoPixels = static_cast<double>(video.width) / g.work.width;
    // Wang et al.'s ssim.m reduces the image by f = max(1, round(min(H, W) / 256)) first, so that
    // the 11x11 window sees structure at the scale a viewer does.
    const int f =
        std::max(1, static_cast<int>(std::lround(std::min(video.width, video.height) / 256.0)));
    g.ssim = {std::max(1, video.width / f), std::max(1, video.height / f)};
    if (g.ssim.width > g.work.width) g.ssim = g.work; // never finer than what flow sees
    g.thumbnail = fitLongSide(video, thumbLongSide);
    g.flowThumbnail = {std::max(1, g.thumbnail.width / 2), std::max(1, g.thumbnail.height / 2)};
    const int l = std::max(g.work.width, g.work.height);
    while (g.finestScale < kPresetFinestScale && (l >> (g.finestScale + 1)) >= kFlowFinestLongSide)
        ++g.finestScale;
    return g;
}

Prepared prepare(const cv::Mat& bgr, int64_t index, const Geometry& g, bool thumbnail)
{
    Prepared p;
    p.index = index;
    {
        const StageTimer timer(Stage::Reduce);
        p.work = resized(bgr, g.work);
        if (p.work.data == bgr.data) p.work = bgr.clone(); // the decoder reuses its buffer
        cv::cvtColor(p.work, p.gray, cv::COLOR_BGR2GRAY);
        resized(p.gray, g.ssim).convertTo(p.ssimGray, CV_32F);
    }
    if (thumbnail) {
        const StageTimer timer(Stage::Thumbnail);
        // From the reduced frame when that is larger than the thumbnail: a quarter of the work.
        const cv::Mat& from = g.work.width >= g.thumbnail.width ? p.work : bgr;
        const cv::Mat t = g.thumbnail == from.size() ? from : resized(from, g.thumbnail);
        cv::imencode(".jpg", t, p.thumbnailJpeg, {cv::IMWRITE_JPEG_QUALITY, 85});
    }
    return p;
}

cv::Ptr<cv::DISOpticalFlow> makeFlow(const Geometry& g)
{
    auto dis = cv::DISOpticalFlow::create(cv::DISOpticalFlow::PRESET_FAST);
    dis->setFinestScale(g.finestScale);
    return dis;
}

double ssim(const cv::Mat& a, const cv::Mat& b)
{
    constexpr double c1 = (0.01 * 255) * (0.01 * 255), c2 = (0.03 * 255) * (0.03 * 255);
    const cv::Size win(11, 11);
    cv::Mat mu1, mu2, s11, s22, s12;
    cv::GaussianBlur(a, mu1, win, 1.5);
    cv::GaussianBlur(b, mu2, win, 1.5);
    cv::GaussianBlur(a.mul(a), s11, win, 1.5);
    cv::GaussianBlur(b.mul(b), s22, win, 1.5);
    cv::GaussianBlur(a.mul(b), s12, win, 1.5);
    double sum = 0;
    for (int y = 0; y < a.rows; ++y) {
        const float* m1 = mu1.ptr<float>(y);
        const float* m2 = mu2.ptr<float>(y);
        const float* v1 = s11.ptr<float>(y);
        const float* v2 = s22.ptr<float>(y);
        const float* v12 = s12.ptr<float>(y);
        for (int x = 0; x < a.cols; ++x) {
            const double u1 = m1[x], u2 = m2[x];
            const double sig1 = v1[x] - u1 * u1, sig2 = v2[x] - u2 * u2, sig12 = v12[x] - u1 * u2;
            sum += ((2 * u1 * u2 + c1) * (2 * sig12 + c2)) /
                   ((u1 * u1 + u2 * u2 + c1) * (sig1 + sig2 + c2));
        }
    }
    return sum / (static_cast<double>(a.rows) * a.cols);
}

namespace {

// What every measurement of one pair reads: the two frames, both flows, the reference warped onto
// the current frame and the forward-backward consistency pass over them (computed once).
struct PairContext
{
    const Prepared& ref;
    const Prepared& cur;
    const cv::Mat& forward;
    const cv::Mat& backward;
    const Geometry& g;
    cv::Mat warped;
    double flowSum = 0;     // sum of |forward flow| over all work pixels
    double errSum = 0;      // sum of the mean |cur - warped| over the consistent pixels
    int64_t consistent = 0; // pixels that passed the forward-backward check
    double pixels() const { return static_cast<double>(g.work.width) * g.work.height; }
};

// How each video metric is measured, by its name in analysis::videoMetrics() (a new metric: a
// function here and its entry in core/analysis/video_metric_registry.cpp; docs/architecture.md).
// `stage` is where its time is counted (stage_clock.h).
struct Measure
{
    const char* name;
    Stage stage;
    double (*measure)(const PairContext&);
};

const Measure kMeasures[] = {
    {"flow_l2_px", Stage::Warp,
     [](const PairContext& c) { return c.flowSum / c.pixels() * c.g.toVideoPixels; }},
    {"warp_error", Stage::Warp,
     [](const PairContext& c) {
         if (c.consistent > 0) return c.errSum / static_cast<double>(c.consistent);
         // Nothing consistent (another scene entirely): the whole frame's error says so.
         cv::Mat all;
         cv::absdiff(c.cur.work, c.warped, all);
         const cv::Scalar mean = cv::mean(all);
         return (mean[0] + mean[1] + mean[2]) / 3;
     }},
    {"flicker", Stage::Warp,
     [](const PairContext& c) {
         cv::Mat diff;
         cv::absdiff(c.ref.gray, c.cur.gray, diff);
         return cv::mean(diff)[0];
     }},
    {"ssim_prev", Stage::Ssim,
     [](const PairContext& c) { return ssim(c.ref.ssimGray, c.cur.ssimGray); }},
};

const Measure* findMeasure(std::string_view name)
{
    for (const Measure& m : kMeasures)
        if (name == m.name) return &m;
    return nullptr;
}

} // namespace

std::vector<std::string> measuredMetricNames()
{
    std::vector<std::string> out;
    for (const Measure& m : kMeasures)
        out.emplace_back(m.name);
    return out;
}

analysis::VideoPair measurePair(const Prepared& ref, const Prepared& cur, const cv::Mat& forward,
                                const cv::Mat& backward, const Geometry& g,
                                std::vector<uint8_t>* flowPng)
{
    analysis::VideoPair r;
    r.frame = cur.index;
    r.reference = ref.index;
    const int w = g.work.width, h = g.work.height;
    std::optional<StageTimer> timer(std::in_place, Stage::Warp);
    PairContext ctx{ref, cur, forward, backward, g, {}};

    // The reference warped onto the current frame: pixel x of cur comes from x + backward(x).
    cv::Mat map;
    cv::add(backward, pixelGrid(g.work), map);
    cv::Mat forwardThere;
    cv::remap(ref.work, ctx.warped, map, cv::noArray(), cv::INTER_LINEAR, cv::BORDER_CONSTANT);
    cv::remap(forward, forwardThere, map, cv::noArray(), cv::INTER_LINEAR, cv::BORDER_CONSTANT);

    // Forward-backward consistency (Sundaram, Brox and Keutzer 2010, as Ruder et al. 2016 use it
    // for temporal consistency): a pixel counts where going back and forth again lands near where
    // it started, |b + f(x + b)|^2 <= 0.01 (|b|^2 + |f(x + b)|^2) + 0.5, inside the reference.
    // Single precision per pixel, summed per row in double.
    const float maxX = static_cast<float>(w - 1), maxY = static_cast<float>(h - 1);
    for (int y = 0; y < h; ++y) {
        const auto* b = backward.ptr<cv::Vec2f>(y);
        const auto* f = forwardThere.ptr<cv::Vec2f>(y);
        const auto* fw = forward.ptr<cv::Vec2f>(y);
        const auto* m = map.ptr<cv::Vec2f>(y);
        const auto* c = cur.work.ptr<cv::Vec3b>(y);
        const auto* wp = ctx.warped.ptr<cv::Vec3b>(y);
        float rowFlow = 0;
        int rowErr = 0, rowCount = 0;
        for (int x = 0; x < w; ++x) {
            rowFlow += std::sqrt(fw[x][0] * fw[x][0] + fw[x][1] * fw[x][1]);
            if (!(m[x][0] >= 0 && m[x][0] <= maxX && m[x][1] >= 0 && m[x][1] <= maxY)) continue;
            const float sx = b[x][0] + f[x][0], sy = b[x][1] + f[x][1];
            const float nb = b[x][0] * b[x][0] + b[x][1] * b[x][1];
            const float nf = f[x][0] * f[x][0] + f[x][1] * f[x][1];
            if (sx * sx + sy * sy > 0.01f * (nb + nf) + 0.5f) continue;
            rowErr += std::abs(c[x][0] - wp[x][0]) + std::abs(c[x][1] - wp[x][1]) +
                      std::abs(c[x][2] - wp[x][2]);
            ++rowCount;
        }
        ctx.flowSum += rowFlow;
        ctx.errSum += rowErr / 3.0;
        ctx.consistent += rowCount;
    }
    r.consistentShare = static_cast<double>(ctx.consistent) / ctx.pixels();

    // Every registered metric, by name; a registered metric without a measurement here is the
    // video module's error (tst_video_metrics checks both lists agree).
    Stage stage = Stage::Warp;
    for (const analysis::VideoMetric& metric : analysis::videoMetrics()) {
        const Measure* m = findMeasure(metric.name);
        if (!m)
            throw std::logic_error(std::string("the video module has no measurement for ") +
                                   metric.name);
        if (m->stage != stage) timer.emplace(stage = m->stage);
        r.values[metric.name] = m->measure(ctx);
    }

    if (flowPng) {
        timer.emplace(Stage::FlowImage);
        cv::Mat mag(h, w, CV_32F);
        for (int y = 0; y < h; ++y) {
            const auto* fw = forward.ptr<cv::Vec2f>(y);
            auto* o = mag.ptr<float>(y);
            for (int x = 0; x < w; ++x)
                o[x] = std::sqrt(fw[x][0] * fw[x][0] + fw[x][1] * fw[x][1]);
        }
        cv::Mat small, q;
        cv::resize(mag, small, g.flowThumbnail, 0, 0, cv::INTER_AREA);
        small.convertTo(q, CV_8U, 4.0 * g.toVideoPixels); // saturates at 255 = 63.75 px
        cv::imencode(".png", q, *flowPng);
    }
    return r;
}

} // namespace fs::video
