// Test videos made by the tests themselves (never checked in): a smooth random texture moved
// across the frame, written with OpenCV's VideoWriter in real codecs (H.264 in mp4, VP8 in webm,
// Motion JPEG in avi) or as numbered PNG frames.
#pragma once

#include <QDir>
#include <QString>

#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <opencv2/videoio.hpp>

#include <cmath>
#include <functional>
#include <stdexcept>
#include <string>

namespace fstest::clips {

constexpr int kWidth = 160, kHeight = 120;

// Uniform noise at a sixth of the size, enlarged and blurred: structure at every position, no
// repeating pattern for the flow to lock on to the wrong copy.
inline cv::Mat texture(int w, int h, unsigned seed)
{
    cv::RNG rng(seed);
    cv::Mat small(h / 6, w / 6, CV_32FC3), big;
    rng.fill(small, cv::RNG::UNIFORM, 0.0, 1.0);
    cv::resize(small, big, {w, h}, 0, 0, cv::INTER_CUBIC);
    cv::GaussianBlur(big, big, {0, 0}, 1.5);
    cv::normalize(big, big, 0, 255, cv::NORM_MINMAX);
    cv::Mat out;
    big.convertTo(out, CV_8UC3);
    return out;
}

// The window of `tex` whose top-left corner is at (x, y), rendered as a camera would: sampled at
// four times the resolution and averaged down, so that a sub-pixel position does not blur the
// frame more or less than its neighbours (bilinear sampling alone would).
inline cv::Mat window(const cv::Mat& tex, double x, double y, int w = kWidth, int h = kHeight)
{
    constexpr int k = 4;
    cv::Mat big, up, out;
    cv::resize(tex, up, {}, k, k, cv::INTER_CUBIC);
    const cv::Matx23d m(1, 0, -x * k, 0, 1, -y * k);
    cv::warpAffine(up, big, m, {w * k, h * k}, cv::INTER_LINEAR, cv::BORDER_REFLECT);
    cv::resize(big, out, {w, h}, 0, 0, cv::INTER_AREA);
    return out;
}

// Writes frames(i) for i < n. The codec follows the extension: .mp4 H.264, .webm VP8, .avi
// Motion JPEG; a path without extension becomes a folder of frame_NNNN.png.
inline void write(const QString& path, int n, const std::function<cv::Mat(int)>& frames,
                  double fps = 24)
{
    if (!path.contains('.')) {
        QDir().mkpath(path);
        for (int i = 0; i < n; ++i)
            cv::imwrite(QStringLiteral("%1/frame_%2.png")
                            .arg(path)
                            .arg(i, 4, 10, QLatin1Char('0'))
                            .toStdString(),
                        frames(i));
        return;
    }
    const cv::Mat first = frames(0);
    const int fourcc = path.endsWith(".webm")  ? cv::VideoWriter::fourcc('V', 'P', '8', '0')
                       : path.endsWith(".avi") ? cv::VideoWriter::fourcc('M', 'J', 'P', 'G')
                                               : cv::VideoWriter::fourcc('a', 'v', 'c', '1');
    // (WebM has no codec tags: OpenCV warns that it ignores 'VP80', then writes VP8 anyway.)
    cv::VideoWriter w(path.toStdString(), cv::CAP_FFMPEG, fourcc, fps, first.size());
    if (!w.isOpened()) throw std::runtime_error("cannot write " + path.toStdString());
    for (int i = 0; i < n; ++i)
        w.write(i == 0 ? first : frames(i));
}

// A texture moving right by `dx` px per frame (and down by dy).
inline void translated(const QString& path, int n, double dx, double dy = 0, unsigned seed = 1)
{
    const cv::Mat tex = texture(kWidth + 40 + static_cast<int>(std::ceil(std::abs(dx) * n)),
                                kHeight + 40 + static_cast<int>(std::ceil(std::abs(dy) * n)), seed);
    write(path, n, [&](int i) { return window(tex, 20 + dx * i, 20 + dy * i); });
}

// A clean, smoothly moving clip: a pan whose speed swings between 1 and 3 px per frame, with a
// slow vertical drift. `replace`: that frame shows another scene; `jump`: from that frame on
// the pan is 20 px further along.
inline void smooth(const QString& path, int n, int replace = -1, int jump = -1)
{
    const cv::Mat tex = texture(kWidth + 120 + 3 * n, kHeight + 80, 1);
    const cv::Mat other = texture(kWidth + 120 + 3 * n, kHeight + 80, 7);
    write(path, n, [&](int i) {
        double x = 30;
        for (int k = 1; k <= i; ++k)
            x += 2.0 + std::sin(k * 0.35);
        if (jump >= 0 && i >= jump) x += 20;
        const double y = 30 + 6 * std::sin(i * 0.08);
        return window(i == replace ? other : tex, x, y);
    });
}

// The colour of frame i's centre square in numbered(): blue up, green down by 9 per frame.
inline cv::Vec3b frameColour(int i)
{
    return {static_cast<uchar>(20 + 9 * i), static_cast<uchar>(230 - 9 * i), 40};
}

// The smooth clip with a square in the middle whose colour says the frame number (up to 23).
inline void numbered(const QString& path, int n)
{
    const cv::Mat tex = texture(kWidth + 120 + 3 * n, kHeight + 80, 1);
    write(path, n, [&](int i) {
        cv::Mat f = window(tex, 30 + 2.0 * i, 30);
        cv::rectangle(f, cv::Rect(kWidth / 2 - 30, kHeight / 2 - 24, 60, 48),
                      cv::Scalar(frameColour(i)[0], frameColour(i)[1], frameColour(i)[2]),
                      cv::FILLED);
        return f;
    });
}

} // namespace fstest::clips
