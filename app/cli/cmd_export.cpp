// fragscope export heatmap|memmap|histogram|timeline FILE -o OUT.png|.svg|.pdf: report-ready
// images drawn by fragscope_render (the same code the GUI's export dialog uses).
#include "cli_settings.h"
#include "command.h"
#include "core/progress.h"
#include "export_frames.h"
#include "export_timeline_data.h"
#include "render/render.h"

#include <QApplication>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fmt/format.h>
#include <memory>

using namespace fs;
using namespace fs::cli;

namespace {

// TIME: ns (integer), a number with a unit (ns, us, ms, s, min, h) relative to the session start,
// "begin", "end", or "frame:N" (end of frame N).
int64_t parseTimeArg(const render::Scene& s, const std::string& text, const std::string& opt)
{
    if (text == "begin") return s.timeBegin();
    if (text == "end") return s.timeEnd();
    if (text.rfind("frame:", 0) == 0) {
        const int64_t n = parseCount(text.substr(6), "--" + opt + " frame number");
        const analysis::FrameInfo* f = s.frame(n);
        if (!f) throw UsageError(fmt::format("--{}: the session has no frame {}", opt, n));
        return f->end;
    }
    size_t pos = 0;
    double v = 0;
    try {
        v = std::stod(text, &pos);
    } catch (...) {
        throw UsageError(
            fmt::format("--{}: '{}' is not a time (ns, 12.5s, 300ms, frame:N, end)", opt, text));
    }
    const std::string unit = text.substr(pos);
    if (unit.empty())
        return static_cast<int64_t>(v); // absolute session time in ns (or the ordinal)
    double mul = 0;
    if (unit == "ns")
        mul = 1;
    else if (unit == "us" || unit == "µs")
        mul = 1e3;
    else if (unit == "ms")
        mul = 1e6;
    else if (unit == "s")
        mul = 1e9;
    else if (unit == "min")
        mul = 60e9;
    else if (unit == "h")
        mul = 3600e9;
    else
        throw UsageError(fmt::format("--{}: unknown time unit '{}' in '{}'", opt, unit, text));
    return s.timeBegin() + static_cast<int64_t>(std::llround(v * mul));
}

// The application object Qt's drawing needs (fonts, images, and widgets for the QCustomPlot
// charts), on the offscreen platform when there is no display.
std::unique_ptr<QApplication> guiApplication()
{
    if (!std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY"))
        setenv("QT_QPA_PLATFORM", "offscreen", 0);
    static int argc = 1;
    static char arg0[] = "fragscope";
    static char* argv[] = {arg0, nullptr};
    // Qt warns when XDG_RUNTIME_DIR is unset (a root shell, a container) and then uses a private
    // folder of its own, which is all an offscreen export needs: the warning says nothing to do.
    static const QtMessageHandler previous = qInstallMessageHandler(
        [](QtMsgType type, const QMessageLogContext& ctx, const QString& msg) {
            if (type == QtWarningMsg &&
                msg.startsWith(QLatin1String("QStandardPaths: XDG_RUNTIME_DIR")))
                return;
            if (previous) previous(type, ctx, msg);
        });
    std::unique_ptr<QApplication> app;
    if (!QCoreApplication::instance()) app = std::make_unique<QApplication>(argc, argv);
    return app;
}

int runExport(Args& a)
{
    if (a.positional().size() != 2)
        throw UsageError(
            "expected VIEW FILE (VIEW: heatmap, memmap, histogram, timeline or frames)");
    if (a.positional()[0] == "frames") {
        const auto app = guiApplication();
        return exportFrames(a);
    }
    if (a.get("around") || a.flag("flow"))
        throw UsageError("--around and --flow apply to export frames only");
    render::View view;
    if (!render::parseView(a.positional()[0], view))
        throw UsageError(fmt::format("unknown view '{}' (heatmap, memmap, histogram, timeline, "
                                     "frames)",
                                     a.positional()[0]));
    const auto out = a.get("output");
    if (!out)
        throw UsageError("-o OUT.png|OUT.svg|OUT.pdf (timeline also OUT.csv|OUT.json) is required");
    if (view == render::View::Timeline && isTimelineDataOutput(*out)) return exportTimelineData(a);
    if (const std::string ext = extensionOf(*out); ext != ".png" && ext != ".svg" && ext != ".pdf")
        throw UsageError(
            fmt::format("-o {}: unknown image format '{}' (use .png, .svg or .pdf{})", *out, ext,
                        view == render::View::Timeline ? "; data: .csv or .json" : ""));
    if (a.get("step")) throw UsageError("--step applies to timeline data (.csv, .json) only");
    if (a.get("pool")) throw UsageError("--pool applies to timeline data (.csv, .json) only");
    int w = 1600, h = 900;
    if (auto sz = a.get("size")) {
        if (std::sscanf(sz->c_str(), "%dx%d", &w, &h) != 2 || w < 200 || h < 150 || w > 20000 ||
            h > 20000)
            throw UsageError(
                fmt::format("--size '{}': expected WxH between 200x150 and 20000x20000", *sz));
    }
    const auto app = guiApplication();

    Progress loading("loading " + std::filesystem::path(a.positional()[1]).filename().string(), 100,
                     "%");
    render::LoadProgress lp;
    lp.options = commandSettings(a).loadOptions(); // the collapses `report` shows
    lp.progress = [&](int percent, const std::string&) { loading.update(percent); };
    lp.loadRows = false;    // a query that needs the records reads them
    lp.keepHeatmaps = true; // the same heatmap again comes from the session file
    const auto scene = render::loadScene(a.positional()[1], lp);
    loading.finish();
    render::RenderOptions o;
    const uint32_t device = static_cast<uint32_t>(a.getInt("device", 0));
    Level level = Level::Framework;
    const bool levelGiven = a.get("level").has_value();
    if (levelGiven && !parseLevel(*a.get("level"), level))
        throw UsageError(
            fmt::format("--level '{}': expected driver, pool or framework", *a.get("level")));
    o.track = -1;
    for (size_t i = 0; i < scene->tracks.size(); ++i) {
        const auto& ld = scene->tracks[i];
        if (ld.device != device || (levelGiven && ld.level != level)) continue;
        if (o.track < 0 || ld.level > scene->tracks[static_cast<size_t>(o.track)].level)
            o.track = static_cast<int>(i);
    }
    // Without --level: the track `fragscope state` and the GUI default to (the engine's).
    if (!levelGiven && scene->engine)
        if (const auto t = scene->engine->defaultTrack(device))
            for (size_t i = 0; i < scene->tracks.size(); ++i)
                if (scene->tracks[i].device == t->device && scene->tracks[i].level == t->level)
                    o.track = static_cast<int>(i);
    if (o.track < 0)
        throw UsageError(fmt::format(
            "the session has no {} data on device {}",
            levelGiven ? std::string(levelName(level)) : std::string("allocation"), device));
    if (a.get("frames")) {
        int64_t fa = 0, fb = 0;
        if (std::sscanf(a.get("frames")->c_str(), "%ld-%ld", &fa, &fb) != 2 || fb < fa)
            throw UsageError(
                fmt::format("--frames '{}': expected A-B with A <= B", *a.get("frames")));
        const analysis::FrameInfo* ra = scene->frame(fa);
        const analysis::FrameInfo* rb = scene->frame(fb);
        if (!ra || !rb)
            throw UsageError(fmt::format("--frames {}-{}: the session has frames {}-{}", fa, fb,
                                         scene->frames.empty() ? 0 : scene->frames.front().index,
                                         scene->frames.empty() ? -1 : scene->frames.back().index));
        o.from = ra->start;
        o.to = rb->end;
        if (a.get("from") || a.get("to"))
            throw UsageError("use either --frames or --from/--to, not both");
    } else {
        if (auto f = a.get("from")) o.from = parseTimeArg(*scene, *f, "from");
        if (auto t = a.get("to")) o.to = parseTimeArg(*scene, *t, "to");
        if (o.from != kNoTime && o.to != kNoTime && o.to <= o.from)
            throw UsageError("--to must be after --from");
    }
    if (auto f = a.get("frame")) {
        o.frame = parseCount(*f, "--frame");
        if (!scene->frame(o.frame))
            throw UsageError(fmt::format("--frame {}: no such frame in the session", o.frame));
    } else if ((view == render::View::Histogram || view == render::View::MemMap) &&
               !scene->collapses.empty() && !a.get("at")) {
        o.frame = scene->collapses.front().firstFrame; // the question fragscope answers first
    }
    if (auto t = a.get("at")) o.at = parseTimeArg(*scene, *t, "at");
    if (a.flag("dark")) o.theme = render::Theme::darkTheme();
    if (view == render::View::Timeline && scene->engine) {
        // The replay lane the GUI's timelines show, when the session has graph replays.
        const auto lock = scene->engine->readLock();
        auto graphs = std::make_shared<analysis::GraphsReport>(scene->engine->graphs());
        if (!graphs->replays.empty()) o.graphs = std::move(graphs);
    }
    QString err;
    if (!render::exportView(QString::fromStdString(*out), QSize(w, h), *scene, view, o, &err)) {
        fmt::print(stderr, "fragscope export: {}\n", err.toStdString());
        return Failure;
    }
    fmt::print("wrote {} ({}x{}, {})\n", *out, w, h, render::viewName(view));
    return Ok;
}

} // namespace

FRAGSCOPE_COMMAND({
    .name = "export",
    .synopsis =
        "heatmap|memmap|histogram|timeline FILE -o OUT.png|OUT.svg|OUT.pdf [--size WxH]\n"
        "       [--from T --to T | --frames A-B] [--device D] [--level L] [--frame N | --at T]\n"
        "       timeline FILE -o OUT.csv|OUT.json [--from T --to T | --frames A-B] [--step T]\n"
        "       [--device D] [--level L] [--pool P]\n"
        "       frames FILE -o OUT.png|OUT.svg|OUT.pdf [--frame N] [--around K] [--flow]",
    .summary = "Write a report-ready image of a view or of the video's frames (PNG, SVG or "
               "PDF), or the timeline's data",
    .options = withSettingsOptions(
        {{"output", "OUT",
          "-o OUT: output file; the extension picks the format: .png, .svg or .pdf;\n"
          "timeline also .csv or .json (data: one row per sample and track)"},
         {"size", "WxH", "image size in pixels (default 1600x900)"},
         {"from", "T", "start of the time range (ns, 12.5s, 300ms, frame:N, begin)"},
         {"to", "T", "end of the time range (same forms, or end)"},
         {"frames", "A-B", "time range from the start of frame A to the end of frame B"},
         {"device", "D", "device id (default 0)"},
         {"level", "L", "driver, pool or framework (default: the highest level with data)"},
         {"frame", "N",
          "histogram/memmap at the end of frame N; frames: the frame in the middle\n"
          "(default: first collapsed frame)"},
         {"around", "K", "frames: K frames each side of N (default 2)"},
         {"flow", "", "frames: the flow magnitude over each frame"},
         {"at", "T", "histogram/memmap at time T instead of a frame"},
         {"dark", "", "dark background"},
         {"quiet", "", "no progress line on stderr (shown only when stderr is a terminal)"},
         {"step", "T",
          "timeline data: sample spacing (ns, or 10s, 500ms; default: the settings'\n"
          "timeline_step_ns, else span / 1000)"},
         {"pool", "P",
          "timeline data: one memory pool's figures (default, a PyTorch\n"
          "segment_pool_id 'a,b', or the stored id); event-size entropy stays the track's"}}),
    .details = "Images have a title, labelled axes with units and a legend. Frame boundaries and\n"
               "collapse bands are drawn on the heatmap and the timeline; the histogram overlays\n"
               "frame N-1 for comparison. Runs without a display (Qt's offscreen platform).\n"
               "Timeline data (.csv, .json): columns time_ns, device, level, reserved_bytes,\n"
               "allocated_bytes, free_bytes, fragment_count, largest_free_fragment_bytes,\n"
               "fragmentation_ratio, fragment_entropy_bits, event_size_entropy_bits; every\n"
               "track of the session (or --device/--level), samples from --from to --to every\n"
               "--step, the last one at --to (default: the session end). Each row equals\n"
               "`fragscope state --at TIME_NS` for its track.\n"
               "Frames: the thumbnails `metrics compute` kept of frames N-K to N+K, each with its\n"
               "video metrics (red where a collapse rule breaks) and a red frame when collapsed.\n"
               "FILE may be a `fragscope ab` study folder: frame N (default: the first collapse)\n"
               "in every run side by side, with the verdict (docs/ab.md).",
    .run = runExport,
    .order = 60,
});
