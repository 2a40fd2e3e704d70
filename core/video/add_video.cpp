#include "add_video.h"

#include "core/format.h"
#include "core/store/sqlite.h"
#include "core/store/videos.h"
#include "core/versions.h"

#include <filesystem>

#include <fmt/format.h>

namespace fs::video {

namespace {

[[noreturn]] void refuseMap(const AddVideoOptions& o, const analysis::MapFit& fit)
{
    std::string what =
        fmt::format("{}: {}", std::filesystem::path(o.video).filename().string(), fit.problem);
    if (fit.suggestion)
        what += fmt::format(
            "; --map {} fits ({} video frame{} per session frame{})", fit.suggestion->text(),
            fit.suggestion->perSessionFrame, fit.suggestion->perSessionFrame == 1 ? "" : "s",
            fit.suggestion->offset
                ? fmt::format(", video frame 0 on session frame {}", fit.suggestion->offset)
                : std::string());
    else
        what += "; no --map fits (a truncated video, or frames missing from the session?)";
    throw Refused(Refused::Kind::MapMismatch, what, fit.suggestion);
}

} // namespace

AddVideoResult addVideo(const AddVideoOptions& o)
{
    const store::VideoTarget target = store::videoTarget(o.session, analysis::videoMetricNames());
    if (target.frames.empty())
        throw SessionError(o.session, "the session has no frames ('frame N' markers or "
                                      "record_function annotations), so video frames have "
                                      "nothing to map to; nothing was written");
    if (!target.conflicts.empty() && !o.replaceOthers)
        throw Refused(Refused::Kind::Conflict,
                      fmt::format("{}: the session already holds {} from '{}'; the video's "
                                  "values would replace them: pass --replace to allow it",
                                  o.session, target.conflicts.begin()->first,
                                  target.conflicts.begin()->second));
    // The map checked against the count the container declares before the long work; as some
    // containers only estimate it, a count one frame off is left to the check after decoding.
    // (A video of one frame is refused as such by analyzeVideo, not as a map that misfits.)
    if (const int64_t declared = declaredFrames(o.video); declared > 1) {
        const analysis::MapFit fit = analysis::fitFrameMap(declared, target.frames, o.map);
        if (!fit.fits && !analysis::fitFrameMap(declared - 1, target.frames, o.map).fits &&
            !analysis::fitFrameMap(declared + 1, target.frames, o.map).fits)
            refuseMap(o, fit);
    }

    AddVideoResult r;
    r.analysis = analyzeVideo(o.video, o.analyze);
    const VideoAnalysis& a = r.analysis;
    const analysis::MapFit fit = analysis::fitFrameMap(a.frames, target.frames, o.map);
    if (!fit.fits) refuseMap(o, fit);
    r.map = o.map;
    r.source = "video: " + std::filesystem::path(o.video).filename().string();
    if (std::filesystem::path(o.video).filename().empty()) // "frames/": the folder's name
        r.source = "video: " + std::filesystem::path(o.video).parent_path().filename().string();
    r.sessionMetrics = analysis::sessionFrameValues(a.scores, o.map);
    r.replacedVideo = target.current.has_value();
    for (const auto& [frame, values] : r.sessionMetrics)
        if (auto it = values.find("warp_error_z");
            it != values.end() && it->second > analysis::kVideoBreakZ)
            r.breaks.push_back(frame);

    store::VideoWrite w;
    store::VideoRow& v = w.video;
    std::error_code ec;
    const auto abs = std::filesystem::absolute(o.video, ec);
    v.path = ec ? o.video : abs.lexically_normal().string();
    v.source = r.source;
    v.sha256 = a.sha256;
    v.bytes = a.bytes;
    v.folder = a.folder;
    v.width = a.width;
    v.height = a.height;
    v.fps = a.fps;
    v.frames = a.frames;
    v.perSessionFrame = o.map.perSessionFrame;
    v.sessionFrameOffset = o.map.offset;
    v.workWidth = a.workWidth;
    v.workHeight = a.workHeight;
    v.ssimWidth = a.ssimWidth;
    v.ssimHeight = a.ssimHeight;
    v.thumbWidth = a.thumbWidth;
    v.thumbHeight = a.thumbHeight;
    v.computedAt = utcNowIso();
    v.computedBy = fmt::format("fragscope {} (OpenCV {})", fragscopeVersion(), opencvVersion());
    std::map<int64_t, const analysis::VideoFrameScore*> scoreOf;
    for (const auto& s : a.scores)
        scoreOf[s.frame] = &s;
    for (int64_t i = 0; i < a.frames; ++i) {
        store::VideoFrameRow f;
        f.index = i;
        f.sessionFrame = o.map.sessionFrame(i);
        const auto& img = a.images[static_cast<size_t>(i)];
        f.thumbnail = img.thumbnailJpeg;
        f.flow = img.flowPng;
        if (auto it = scoreOf.find(i); it != scoreOf.end()) {
            f.reference = it->second->reference;
            f.metrics = it->second->values;
        }
        w.frames.push_back(std::move(f));
    }
    w.sessionMetrics = r.sessionMetrics;
    store::writeVideo(o.session, w, o.replaceOthers);
    return r;
}

} // namespace fs::video
