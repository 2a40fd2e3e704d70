#include "video_frames.h"
#include "stats.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include <fmt/format.h>

namespace fs::analysis {

namespace {

double metricOf(const VideoPair& p, const VideoMetric& m)
{
    // Displacement and flicker grow with the frames between the two compared: per frame.
    const double gap = static_cast<double>(std::max<int64_t>(1, p.frame - p.reference));
    const auto it = p.values.find(m.name);
    const double v = it == p.values.end() ? 0.0 : it->second;
    return m.perFrame ? v / gap : v;
}

double warpError(const VideoPair& p)
{
    const auto it = p.values.find("warp_error");
    return it == p.values.end() ? 0.0 : it->second;
}

RobustScale warpScale(std::span<const VideoPair> pairs)
{
    std::vector<double> w;
    for (const VideoPair& p : pairs)
        w.push_back(warpError(p));
    return videoScale(w, findVideoMetric("warp_error")->scaleFloor);
}

} // namespace

RobustScale videoScale(std::span<const double> values, double floor)
{
    RobustScale r;
    r.median = median(std::vector<double>(values.begin(), values.end()));
    r.mad = medianAbsoluteDeviation(values, r.median);
    r.scale = std::max(1.4826 * r.mad, floor);
    return r;
}

std::vector<int64_t> isolatedBreakCandidates(std::span<const VideoPair> pairs)
{
    std::vector<int64_t> out;
    if (pairs.size() < 3) return out;
    const RobustScale s = warpScale(pairs);
    std::map<int64_t, bool> breaks;
    for (const VideoPair& p : pairs)
        breaks[p.frame] = s.z(warpError(p)) > kVideoBreakZ;
    for (const auto& [frame, broken] : breaks) {
        if (!broken || frame < 1) continue; // frame i - 1 must exist
        auto next = breaks.find(frame + 1);
        if (next != breaks.end() && next->second) out.push_back(frame);
    }
    return out;
}

std::vector<VideoFrameScore> scoreVideo(std::span<const VideoPair> pairs,
                                        std::span<const VideoPair> skips)
{
    std::vector<VideoPair> final(pairs.begin(), pairs.end());
    std::sort(final.begin(), final.end(),
              [](const VideoPair& a, const VideoPair& b) { return a.frame < b.frame; });
    if (!skips.empty()) {
        // Judged against the run as measured: a skip pair that is itself a break leaves frame
        // i + 1's own comparison (two broken frames in a row are two broken frames).
        const RobustScale s = warpScale(pairs);
        for (const VideoPair& skip : skips) {
            if (s.z(warpError(skip)) > kVideoBreakZ) continue;
            for (VideoPair& p : final)
                if (p.frame == skip.frame) p = skip;
        }
    }
    std::vector<VideoFrameScore> out(final.size());
    for (size_t i = 0; i < final.size(); ++i) {
        out[i].frame = final[i].frame;
        out[i].reference = final[i].reference;
    }
    for (const VideoMetric& m : videoMetrics()) {
        std::vector<double> v;
        for (const VideoPair& p : final)
            v.push_back(metricOf(p, m));
        const RobustScale s = videoScale(v, m.scaleFloor);
        for (size_t i = 0; i < final.size(); ++i) {
            out[i].values[m.name] = v[i];
            out[i].values[std::string(m.name) + "_z"] = s.z(v[i]);
        }
    }
    return out;
}

int64_t FrameMap::sessionFrame(int64_t videoFrame) const
{
    return offset + videoFrame / perSessionFrame;
}

std::string FrameMap::text() const
{
    return offset == 0 ? fmt::format("{}", perSessionFrame)
                       : fmt::format("{}:{}", perSessionFrame, offset);
}

std::optional<FrameMap> parseFrameMap(std::string_view s, std::string* error)
{
    auto fail = [&](const std::string& why) -> std::optional<FrameMap> {
        if (error) *error = why;
        return std::nullopt;
    };
    FrameMap m;
    const size_t colon = s.find(':');
    const std::string_view k = s.substr(0, colon);
    auto [p, ec] = std::from_chars(k.data(), k.data() + k.size(), m.perSessionFrame);
    if (ec != std::errc() || p != k.data() + k.size() || m.perSessionFrame < 1 ||
        m.perSessionFrame > 1'000'000)
        return fail(fmt::format("'{}': expected K or K:OFFSET, K a whole number of video frames "
                                "per session frame (1 or more)",
                                s));
    if (colon != std::string_view::npos) {
        const std::string_view o = s.substr(colon + 1);
        auto [q, ec2] = std::from_chars(o.data(), o.data() + o.size(), m.offset);
        if (ec2 != std::errc() || q != o.data() + o.size() || o.empty())
            return fail(fmt::format("'{}': OFFSET must be a whole number (the session frame of "
                                    "video frame 0)",
                                    s));
    }
    return m;
}

MapFit fitFrameMap(int64_t videoFrames, std::span<const int64_t> sessionFrames, const FrameMap& m)
{
    MapFit r;
    std::vector<int64_t> sf(sessionFrames.begin(), sessionFrames.end());
    std::sort(sf.begin(), sf.end());
    sf.erase(std::unique(sf.begin(), sf.end()), sf.end());
    const auto count = static_cast<int64_t>(sf.size());
    const bool consecutive = count > 0 && sf.back() - sf.front() + 1 == count;
    const int64_t chunks = (videoFrames + m.perSessionFrame - 1) / m.perSessionFrame;
    r.fits = count > 0 && videoFrames % m.perSessionFrame == 0 && chunks == count && consecutive &&
             m.offset == sf.front();
    if (r.fits) return r;
    const std::string sessionRange =
        count == 0    ? std::string("none")
        : consecutive ? fmt::format("{}–{}", sf.front(), sf.back())
                      : fmt::format("{}–{}, not consecutive", sf.front(), sf.back());
    const int64_t lastMapped = m.sessionFrame(std::max<int64_t>(0, videoFrames - 1));
    r.problem = fmt::format(
        "the video has {} frames and the session {} (frames {}); --map {} puts them on session "
        "frames {}–{}{}",
        videoFrames, count, sessionRange, m.text(), m.offset, lastMapped,
        videoFrames % m.perSessionFrame
            ? fmt::format(", the last with {} of {} video frames", videoFrames % m.perSessionFrame,
                          m.perSessionFrame)
            : std::string());
    if (consecutive && videoFrames > 0 && videoFrames % count == 0)
        r.suggestion = FrameMap{videoFrames / count, sf.front()};
    return r;
}

std::map<int64_t, std::map<std::string, double>>
sessionFrameValues(std::span<const VideoFrameScore> scores, const FrameMap& m)
{
    std::map<int64_t, std::map<std::string, double>> out;
    for (const VideoFrameScore& s : scores) {
        auto& dst = out[m.sessionFrame(s.frame)];
        for (const auto& [name, v] : s.values) {
            auto [it, added] = dst.try_emplace(name, v);
            if (added) continue;
            it->second =
                videoMetricHigherIsWorse(name) ? std::max(it->second, v) : std::min(it->second, v);
        }
    }
    return out;
}

} // namespace fs::analysis
