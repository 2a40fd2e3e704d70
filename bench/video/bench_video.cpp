// `metrics compute` speed (issue 22): frames per second of analyzeVideo (decode, forward and
// backward DIS flow, warp with the consistency check, SSIM on a reduced image, thumbnails, the
// content hash) on generated 1280x720 H.264 clips, beside the baselines measured in the same
// run: decoding alone, and decoding plus one DIS flow per frame on one thread. Goal: >= 30
// frames/s on this 2-core machine (exit status 1 when missed). Prints the load average: the
// machine is shared.
#include "core/video/video_metrics.h"

#include <opencv2/imgproc.hpp>
#include <opencv2/video/tracking.hpp>
#include <opencv2/videoio.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <sys/resource.h>

namespace {

// CPU seconds of the whole process (every thread, FFmpeg's decoding threads too).
double cpuSeconds()
{
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double seconds(std::chrono::steady_clock::time_point t0)
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double median(std::vector<double> v)
{
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// A smooth texture moved by `at(i)` (an affine map per frame), 1280x720, H.264.
template <class At> void writeMoving(const std::string& path, int frames, uint64_t seed, At at)
{
    cv::RNG rng(seed);
    cv::Mat small(200, 340, CV_32FC3), tex;
    rng.fill(small, cv::RNG::UNIFORM, 0.0, 1.0);
    cv::resize(small, tex, {2000, 1200}, 0, 0, cv::INTER_CUBIC);
    cv::GaussianBlur(tex, tex, {0, 0}, 3);
    cv::normalize(tex, tex, 0, 255, cv::NORM_MINMAX);
    tex.convertTo(tex, CV_8UC3);
    cv::VideoWriter w(path, cv::CAP_FFMPEG, cv::VideoWriter::fourcc('a', 'v', 'c', '1'), 24,
                      {1280, 720});
    if (!w.isOpened()) {
        std::fprintf(stderr, "cannot write %s (no H.264 encoder?)\n", path.c_str());
        std::exit(1);
    }
    for (int i = 0; i < frames; ++i) {
        cv::Mat f;
        cv::warpAffine(tex, f, at(i), {1280, 720}, cv::INTER_LINEAR, cv::BORDER_REFLECT);
        w.write(f);
    }
}

// A generated-video-like clip: the texture panning and slowly zooming.
void writeClip(const std::string& path, int frames)
{
    writeMoving(path, frames, 7, [](int i) {
        const double s = 1.0 + 0.002 * i, x = 100 + 3.0 * i, y = 80 + 20 * std::sin(i * 0.05);
        return cv::Matx23d(s, 0, -x, 0, s, -y);
    });
}

// The texture translated by exactly (dx, dy) px per frame: the flow's known answer at the size
// the bench times (the tests check the same at 160x120).
void writeTranslated(const std::string& path, int frames, double dx, double dy)
{
    writeMoving(path, frames, 11,
                [=](int i) { return cv::Matx23d(1, 0, -(100 + dx * i), 0, 1, -(100 + dy * i)); });
}

double decodeOnly(const std::string& path, int& frames)
{
    const auto t0 = std::chrono::steady_clock::now();
    cv::VideoCapture cap(path, cv::CAP_FFMPEG);
    cv::Mat f;
    frames = 0;
    while (cap.read(f))
        ++frames;
    return seconds(t0);
}

// Decoding plus one DIS flow (the fast preset at the size analyzeVideo measures on) per frame,
// on one thread: what a single-threaded loop of the naive design would cost before the second
// flow, the warp, SSIM and thumbnails.
double decodeOneFlow(const std::string& path)
{
    const int threads = cv::getNumThreads();
    cv::setNumThreads(0);
    const auto t0 = std::chrono::steady_clock::now();
    cv::VideoCapture cap(path, cv::CAP_FFMPEG);
    auto dis = cv::DISOpticalFlow::create(cv::DISOpticalFlow::PRESET_FAST);
    dis->setFinestScale(2);
    cv::Mat f, small, gray, prev, flow;
    while (cap.read(f)) {
        cv::resize(f, small, {640, 360}, 0, 0, cv::INTER_AREA);
        cv::cvtColor(small, gray, cv::COLOR_BGR2GRAY);
        if (!prev.empty()) dis->calc(prev, gray, flow);
        std::swap(prev, gray);
    }
    const double s = seconds(t0);
    cv::setNumThreads(threads);
    return s;
}

} // namespace

int main(int argc, char** argv)
{
    const int frames = argc > 1 ? std::atoi(argv[1]) : 96;
    const int runs = argc > 2 ? std::atoi(argv[2]) : 5;
    const std::string dir = std::filesystem::temp_directory_path() / "fragscope-bench-video";
    std::filesystem::create_directories(dir);
    const std::string clip = dir + "/clip720.mp4";
    writeClip(clip, frames);
    double load[3] = {0, 0, 0};
    if (getloadavg(load, 3) < 0) load[0] = -1;
    std::printf("bench_video: %d-frame 1280x720 H.264 clip, %d runs, %u hardware threads, load "
                "average %.2f\n",
                frames, runs, std::thread::hardware_concurrency(), load[0]);

    std::vector<double> dec, one, full, decCpu, fullCpu;
    int decoded = 0;
    int64_t kept = 0;
    for (int r = 0; r < runs; ++r) {
        double c0 = cpuSeconds();
        dec.push_back(decodeOnly(clip, decoded));
        decCpu.push_back(cpuSeconds() - c0);
        one.push_back(decodeOneFlow(clip));
        const auto t0 = std::chrono::steady_clock::now();
        c0 = cpuSeconds();
        const fs::video::VideoAnalysis a = fs::video::analyzeVideo(clip);
        full.push_back(seconds(t0));
        fullCpu.push_back(cpuSeconds() - c0);
        kept = 0;
        for (const auto& img : a.images)
            kept += static_cast<int64_t>(img.thumbnailJpeg.size() + img.flowPng.size());
        if (a.frames != decoded) {
            std::fprintf(stderr, "analyzeVideo read %lld frames, the decoder %d\n",
                         static_cast<long long>(a.frames), decoded);
            return 1;
        }
    }
    const double f = decoded;
    std::printf("baseline decode only:              median %.3f s = %6.1f frames/s\n", median(dec),
                f / median(dec));
    std::printf("baseline decode + 1 DIS flow, 1 thread: median %.3f s = %6.1f frames/s\n",
                median(one), f / median(one));
    std::printf("metrics compute (analyzeVideo):     median %.3f s = %6.1f frames/s "
                "(min %.3f s, max %.3f s; goal >= 30 frames/s)\n",
                median(full), f / median(full), *std::min_element(full.begin(), full.end()),
                *std::max_element(full.begin(), full.end()));
    // CPU time does not depend on what else runs: 2 cores / CPU time per frame is the rate
    // this work reaches on an idle 2-core machine if it keeps both busy.
    std::printf("CPU per frame (all threads): decode only %.2f ms, metrics compute %.2f ms "
                "(idle 2 cores: at most %.0f frames/s)\n",
                1e3 * median(decCpu) / f, 1e3 * median(fullCpu) / f, 2 * f / median(fullCpu));
    std::printf("thumbnails and flow images: %.1f KiB per frame\n",
                static_cast<double>(kept) / f / 1024);
    // Accuracy at this size: every frame's flow_l2_px against the known displacement.
    for (const auto& [dx, dy] : {std::pair{4.0, 0.0}, std::pair{6.0, 8.0}}) {
        const std::string moved = dir + "/moved.mp4";
        writeTranslated(moved, 24, dx, dy);
        const auto a = fs::video::analyzeVideo(moved);
        const double d = std::hypot(dx, dy);
        std::vector<double> flows;
        double worst = 0;
        for (const auto& sc : a.scores) {
            flows.push_back(sc.values.at("flow_l2_px"));
            worst = std::max(worst, std::abs(flows.back() - d) / d);
        }
        std::printf("accuracy, 1280x720 texture moved %.0f px per frame: flow_l2_px median %.3f, "
                    "worst frame %.2f %% off\n",
                    d, median(flows), 100 * worst);
    }
    if (getloadavg(load, 3) >= 0) std::printf("load average at the end: %.2f\n", load[0]);
    std::filesystem::remove_all(dir);
    if (f / median(full) < 30) {
        std::fprintf(stderr,
                     "bench_video: goal missed: metrics compute %.1f frames/s (goal >= 30)\n",
                     f / median(full));
        return 1;
    }
    return 0;
}
