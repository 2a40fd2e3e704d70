// fragscope metrics compute SESSION VIDEO [--map K[:OFFSET]] [--replace] [--json]: per-frame
// quality from the generated video itself (core/video/add_video.h, the same code as the GUI's
// File › Add video…). Needs OpenCV (FRAGSCOPE_VIDEO).
#include "command.h"
#include "fragscope_version.h"

#if FRAGSCOPE_VIDEO
#include "core/json.h"
#include "core/progress.h"
#include "core/video/module.h"

#include <filesystem>
#include <fmt/format.h>
#endif

using namespace fs;
using namespace fs::cli;

namespace {

#if FRAGSCOPE_VIDEO
void printJson(const video::AddVideoResult& r)
{
    const video::VideoAnalysis& a = r.analysis;
    JsonWriter j;
    j.beginObject();
    j.key("video").beginObject();
    j.field("path", a.path).field("sha256", a.sha256).field("bytes", a.bytes);
    j.field("folder", a.folder).field("width", a.width).field("height", a.height);
    if (a.fps > 0)
        j.field("fps", a.fps);
    else
        j.key("fps").null();
    j.field("frames", a.frames);
    j.endObject();
    j.field("map", r.map.text()).field("source", r.source);
    j.field("session_frames", static_cast<int64_t>(r.sessionMetrics.size()));
    j.field("replaced_video", r.replacedVideo);
    j.key("breaks").beginArray();
    for (int64_t f : r.breaks)
        j.value(f);
    j.endArray();
    j.key("frames").beginArray();
    for (const auto& s : a.scores) {
        j.beginObject();
        j.field("video_frame", s.frame).field("session_frame", r.map.sessionFrame(s.frame));
        j.field("reference", s.reference);
        for (const auto& name : analysis::videoMetricNames())
            j.field(name, s.values.at(name));
        j.endObject();
    }
    j.endArray();
    j.endObject();
    fmt::print("{}\n", j.str());
}

int runCompute(Args& a)
{
    a.expectPositional(2, "SESSION VIDEO");
    video::AddVideoOptions o;
    o.session = a.positional()[0];
    o.video = a.positional()[1];
    if (auto m = a.get("map")) {
        std::string why;
        const auto map = analysis::parseFrameMap(*m, &why);
        if (!map) throw UsageError("--map " + why);
        o.map = *map;
    }
    o.replaceOthers = a.flag("replace");
    const std::string name = std::filesystem::path(o.video).filename().string();
    Progress progress("measuring " + name, 0, "frames");
    o.analyze.progress = [&](int64_t done, int64_t total) { progress.update(done, total); };
    video::AddVideoResult r;
    try {
        r = video::module().addVideo(o);
    } catch (const video::Refused& e) {
        progress.finish();
        throw UsageError(e.what());
    }
    progress.finish();
    if (a.flag("json")) {
        printJson(r);
        return Ok;
    }
    const video::VideoAnalysis& v = r.analysis;
    fmt::print("{}: {} frames, {}x{}{}, sha256 {}\n", v.path, v.frames, v.width, v.height,
               v.fps > 0 ? fmt::format(", {:g} fps", v.fps) : std::string(), v.sha256);
    fmt::print("{}: {} metrics for {} session frames (--map {}), source '{}'{}; thumbnails "
               "kept in the session\n",
               o.session, analysis::videoMetricNames().size(), r.sessionMetrics.size(),
               r.map.text(), r.source, r.replacedVideo ? ", replacing the previous video's" : "");
    if (r.breaks.empty()) {
        fmt::print("no frame breaks warp_error_z > {:g}\n", analysis::kVideoBreakZ);
    } else {
        std::string list;
        for (int64_t f : r.breaks)
            list += (list.empty() ? "" : ", ") + std::to_string(f);
        fmt::print("frames breaking warp_error_z > {:g}: {} (see `fragscope report`)\n",
                   analysis::kVideoBreakZ, list);
    }
    return Ok;
}
#else
int runCompute(Args&)
{
    return Failure; // main() refuses first: needsVideo
}
#endif

} // namespace

FRAGSCOPE_COMMAND({
    .name = "metrics compute",
    .synopsis = "SESSION VIDEO [--map K[:OFFSET]] [--replace] [--json]",
    .summary = "Score every frame of the generated video (optical flow, warp error, flicker, "
               "SSIM) and keep thumbnails",
    .options = {{"map", "K[:OFFSET]",
                 "K video frames per session frame, video frame 0 on session frame\n"
                 "OFFSET (default 1:0: video frame i is session frame i)"},
                {"replace", "",
                 "replace metrics of the same names from another source (NVTX, an import)"},
                {"json", "", "print the video, the map and every frame's metrics as JSON"},
                {"quiet", "", "no progress line on stderr (shown only when stderr is a terminal)"}},
    .details =
        "VIDEO: a file FFmpeg reads (mp4/H.264, webm, mkv, avi, …) or a folder of numbered\n"
        "PNG/JPEG frames. For every frame i >= 1 against frame i-1, with no model weights:\n"
        "flow_l2_px (mean DIS optical-flow magnitude, px), warp_error (mean absolute error of\n"
        "frame i-1 warped onto i where forward and backward flow agree), flicker (mean absolute\n"
        "luma difference), ssim_prev (SSIM), and each one's robust z-score <name>_z (distance\n"
        "from the run's median in MAD-based standard deviations). A frame after an isolated\n"
        "broken frame is measured against the frame before that one. They become frame metrics\n"
        "of source 'video: NAME' (a chunk of K video frames gives its worst value), so rules\n"
        "(default warp_error_z > 6), collapses, precursors, report and the GUI use them; the\n"
        "session keeps every frame's thumbnail and the video's path and SHA-256. Computing\n"
        "again replaces the video's metrics. When the frame counts do not fit the map, nothing\n"
        "is written and the message names the --map that fits (exit status 64).\n"
        "docs/analysis.md \"Video metrics\" defines each metric.",
    .run = runCompute,
    .order = 44,
    .needsVideo = true,
});
