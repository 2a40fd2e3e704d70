#include "export_frames.h"

#include "cli_settings.h"
#include "core/progress.h"
#include "core/store/sqlite.h"
#include "export_timeline_data.h"
#include "render/frame_strip.h"
#include "render/study_strip.h"

#include <cstdio>
#include <filesystem>
#include <fmt/format.h>

namespace fs::cli {

namespace {

// A `fragscope ab` study folder: frame N in every run (render/study_strip.h).
int exportStudyFrames(Args& a, const std::string& folder, const std::string& out)
{
    const study::Study s = study::readStudy(folder);
    render::StudyStripOptions o;
    if (a.get("around") || a.flag("flow"))
        throw UsageError("--around and --flow do not apply to a study's frames");
    if (a.flag("dark")) o.theme = render::Theme::darkTheme();
    if (auto f = a.get("frame"))
        o.frame = parseCount(*f, "--frame");
    else if (!s.collapses.empty())
        o.frame = s.collapses.front().firstFrame;
    else
        throw UsageError("--frame N is required (the study has no collapse to default to)");
    const study::Run* base = s.baseline();
    if (!base || o.frame < 0 || o.frame >= base->frames)
        throw UsageError(fmt::format("--frame {}: no such frame in the study's baseline", o.frame));
    const QString dir = QString::fromStdString(folder);
    const QSize size = render::studyStripSize(s, dir, o);
    QString err;
    if (!render::exportStudyStrip(QString::fromStdString(out), size, s, dir, o, &err)) {
        fmt::print(stderr, "fragscope export: {}\n", err.toStdString());
        return Failure;
    }
    fmt::print("wrote {} ({}x{}, frame {} of the study's runs)\n", out, size.width(), size.height(),
               o.frame);
    return Ok;
}

} // namespace

int exportFrames(Args& a)
{
    const std::string session = a.positional()[1];
    const auto out = a.get("output");
    if (!out) throw UsageError("-o OUT.png|OUT.svg|OUT.pdf is required");
    if (const std::string ext = extensionOf(*out); ext != ".png" && ext != ".svg" && ext != ".pdf")
        throw UsageError(
            fmt::format("-o {}: unknown image format '{}' (use .png, .svg or .pdf)", *out, ext));
    for (const char* opt : {"from", "to", "frames", "at", "step", "pool", "device", "level"})
        if (a.get(opt)) throw UsageError(fmt::format("--{} does not apply to export frames", opt));
    if (std::filesystem::is_directory(session) &&
        std::filesystem::exists(std::filesystem::path(session) / study::kStudyFile))
        return exportStudyFrames(a, session, *out);
    render::FrameStripOptions o;
    o.around = static_cast<int>(a.getInt("around", 2));
    if (o.around < 0 || o.around > 12) throw UsageError("--around must be between 0 and 12");
    o.flowOverlay = a.flag("flow");
    if (a.flag("dark")) o.theme = render::Theme::darkTheme();

    Progress loading("loading " + std::filesystem::path(session).filename().string(), 100, "%");
    render::LoadProgress lp;
    lp.options = commandSettings(a).loadOptions(); // the collapses `report` shows
    lp.progress = [&](int percent, const std::string&) { loading.update(percent); };
    lp.loadRows = false; // the strip needs no allocation record
    const auto scene = render::loadScene(session, lp);
    loading.finish();
    if (!scene->video)
        throw SessionError(session, "holds no video frames: add the video first with "
                                    "`fragscope metrics compute SESSION VIDEO`");
    if (auto f = a.get("frame")) {
        o.frame = parseCount(*f, "--frame");
    } else if (!scene->collapses.empty()) {
        o.frame = scene->collapses.front().firstFrame; // the question fragscope answers first
    } else {
        throw UsageError("--frame N is required (the session has no collapse to default to)");
    }
    if (!scene->frame(o.frame))
        throw UsageError(fmt::format("--frame {}: no such frame in the session", o.frame));
    QSize size = render::frameStripSize(*scene, o);
    if (auto sz = a.get("size")) {
        int w = 0, h = 0;
        if (std::sscanf(sz->c_str(), "%dx%d", &w, &h) != 2 || w < 200 || h < 150 || w > 20000 ||
            h > 20000)
            throw UsageError(
                fmt::format("--size '{}': expected WxH between 200x150 and 20000x20000", *sz));
        size = QSize(w, h);
    }
    QString err;
    if (!render::exportFrameStrip(QString::fromStdString(*out), size, *scene, o, &err)) {
        fmt::print(stderr, "fragscope export: {}\n", err.toStdString());
        return Failure;
    }
    const auto panels =
        render::layoutFrameStrip(QRectF(0, 0, size.width(), size.height()), *scene, o);
    fmt::print("wrote {} ({}x{}, frames {}-{} of {})\n", *out, size.width(), size.height(),
               panels.front().frame, panels.back().frame, scene->video->video().source);
    return Ok;
}

} // namespace fs::cli
