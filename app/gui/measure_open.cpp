#include "measure_open.h"

#include "main_window.h"
#include "widgets/callsite_table.h"
#include "widgets/heatmap_widget.h"
#include "widgets/time_cursor.h"

#include "core/json.h"

#include <QApplication>
#include <QDir>
#include <QDockWidget>
#include <QElapsedTimer>
#include <QTimer>

#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace fs::gui {

namespace {

double median(std::vector<double> v)
{
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

double peakRssMb()
{
    rusage u{};
    getrusage(RUSAGE_SELF, &u);
    return static_cast<double>(u.ru_maxrss) / 1024.0; // ru_maxrss is in KiB on Linux
}

// FRAGSCOPE_MEASURE_DEBUG=1: which events the GUI thread spent longest on. Installed on the
// application, the filter sees every event just before it is delivered, so the time to the next
// one is (about) what delivering it took, nested events included.
class EventTimer : public QObject
{
public:
    struct Slow
    {
        double ms;
        double at;
        QByteArray what, next;
    };
    EventTimer(const QElapsedTimer& clock, double thresholdMs)
        : clock_(clock), threshold_(thresholdMs)
    {
    }
    bool eventFilter(QObject* o, QEvent* e) override
    {
        const double now = static_cast<double>(clock_.nsecsElapsed()) / 1e6;
        const QByteArray what = QByteArray(o->metaObject()->className()) + " " +
                                QByteArray::number(static_cast<int>(e->type()));
        if (last_ >= 0 && now - last_ > threshold_)
            slow_.push_back({now - last_, last_, lastWhat_, what});
        if (last_ >= 0 && now - last_ > 0.5) all_.push_back({now - last_, last_, lastWhat_, what});
        last_ = now;
        lastWhat_ = what;
        return false;
    }
    // The events delivered inside [from, to] ms, in order: what the largest gap was made of.
    void printWindow(double from, double to) const
    {
        for (const Slow& s : all_)
            if (s.at + s.ms >= from && s.at <= to)
                std::fprintf(stderr, "  %8.1f ms: %5.1f ms %s (next: %s)\n", s.at, s.ms,
                             s.what.constData(), s.next.constData());
    }
    void print() const
    {
        auto v = slow_;
        std::sort(v.begin(), v.end(), [](const Slow& a, const Slow& b) { return a.ms > b.ms; });
        for (size_t i = 0; i < std::min<size_t>(v.size(), 40); ++i)
            std::fprintf(stderr, "  %7.1f ms from %8.1f ms after event %s (next: %s)\n", v[i].ms,
                         v[i].at, v[i].what.constData(), v[i].next.constData());
    }

private:
    const QElapsedTimer& clock_;
    double threshold_;
    double last_ = -1;
    QByteArray lastWhat_;
    std::vector<Slow> slow_, all_;
};

} // namespace

int measureOpen(MainWindow& w, const QString& file)
{
    w.resize(1920, 1080);
    w.show();
    QElapsedTimer clock;
    // The event loop's health: a 5 ms timer on the GUI thread; the largest gap between two
    // ticks is the longest the window could not react.
    // `phaseGap`: the same since the cursor moves began (-1 before).
    qint64 lastTick = 0, maxGap = 0, maxGapAt = 0, phaseGap = -1;
    QTimer tick;
    tick.setInterval(5);
    QObject::connect(&tick, &QTimer::timeout, [&] {
        const qint64 now = clock.elapsed();
        if (now - lastTick > maxGap) {
            maxGap = now - lastTick;
            maxGapAt = now;
        }
        if (phaseGap >= 0) phaseGap = std::max(phaseGap, now - lastTick);
        lastTick = now;
    });
    double summaryMs = -1, readyMs = -1, firstHeatmapMs = -1, exactHeatmapMs = -1;
    QString error;
    QObject::connect(w.loader(), &SessionLoader::summaryRead, [&] {
        if (summaryMs < 0) summaryMs = static_cast<double>(clock.nsecsElapsed()) / 1e6;
    });
    // FRAGSCOPE_MEASURE_SHOTS=DIR: the window as it looks at the first picture, at the first
    // look and at the exact picture (first-heatmap.png, views-ready.png, exact-heatmap.png), to
    // look at what the figures measure.
    const QString shots = qEnvironmentVariable("FRAGSCOPE_MEASURE_SHOTS");
    auto shoot = [&](const QString& name) {
        if (shots.isEmpty()) return;
        QTimer::singleShot(0, &w, [&w, file = QDir(shots).filePath(name)] { w.grab().save(file); });
    };
    QObject::connect(w.loader(), &SessionLoader::loaded, [&] {
        if (readyMs >= 0) return;
        readyMs = static_cast<double>(clock.nsecsElapsed()) / 1e6;
        shoot(QStringLiteral("views-ready.png"));
    });
    double completeMs = -1;
    QObject::connect(w.loader(), &SessionLoader::completed, [&] {
        if (completeMs < 0) completeMs = static_cast<double>(clock.nsecsElapsed()) / 1e6;
    });
    QObject::connect(w.loader(), &SessionLoader::failed,
                     [&](const QString&, const QString& m) { error = m; });
    views::HeatmapWidget* h = w.heatmap();
    bool refined = false;
    QObject::connect(h, &views::HeatmapWidget::rasterShown, [&] {
        if (firstHeatmapMs >= 0) return;
        firstHeatmapMs = static_cast<double>(clock.nsecsElapsed()) / 1e6;
        shoot(QStringLiteral("first-heatmap.png"));
    });
    QObject::connect(h, &views::HeatmapWidget::refinedChanged, [&] {
        refined = true;
        if (exactHeatmapMs >= 0) return;
        exactHeatmapMs = static_cast<double>(clock.nsecsElapsed()) / 1e6;
        shoot(QStringLiteral("exact-heatmap.png"));
    });
    w.setErrorReporter([&](const QString&, const QString& m) { error = m; });
    auto waitFor = [&](const std::function<bool()>& done, qint64 limitMs) {
        QElapsedTimer t;
        t.start();
        // Blocks until an event came (the 5 ms tick wakes it at the latest): the overload with a
        // time limit ignores WaitForMoreEvents and would spin, taking a core from the loader.
        while (!done() && error.isEmpty() && t.elapsed() < limitMs)
            QApplication::processEvents(QEventLoop::WaitForMoreEvents);
    };
    // FRAGSCOPE_MEASURE_DEBUG=1 lists events over 30 ms; a larger number is the threshold.
    const char* debugEnv = std::getenv("FRAGSCOPE_MEASURE_DEBUG");
    const bool debug = debugEnv != nullptr;
    EventTimer events(clock, debug && std::atof(debugEnv) > 1 ? std::atof(debugEnv) : 30);
    if (debug) qApp->installEventFilter(&events);
    clock.start();
    tick.start();
    w.openFile(file);
    waitFor([&] { return exactHeatmapMs >= 0 && completeMs >= 0; }, 600000);
    if (!error.isEmpty() || exactHeatmapMs < 0) {
        std::fprintf(stderr, "fragscope-gui: %s\n",
                     qPrintable(error.isEmpty() ? QStringLiteral("no heatmap was drawn") : error));
        return 2;
    }
    // Ten zooms (halving the time span around its middle, then the address span every other
    // time) and ten pans (a tenth of the span to the right): each timed from the new viewport
    // to its full-resolution raster on screen.
    std::vector<double> zoom, pan, firstImage;
    auto redraw = [&](const render::Viewport& vp) {
        refined = false;
        QElapsedTimer t;
        t.start();
        double shown = -1;
        auto c = QObject::connect(h, &views::HeatmapWidget::rasterShown, [&] {
            if (shown < 0) shown = static_cast<double>(t.nsecsElapsed()) / 1e6;
        });
        h->setViewport(vp);
        waitFor([&] { return refined; }, 60000);
        QObject::disconnect(c);
        firstImage.push_back(shown);
        return static_cast<double>(t.nsecsElapsed()) / 1e6;
    };
    for (int i = 0; i < 10; ++i) {
        render::Viewport vp = h->viewport();
        const int64_t span = vp.t1 - vp.t0, mid = vp.t0 + span / 2;
        if (span >= 4) {
            vp.t0 = mid - span / 4;
            vp.t1 = mid + span / 4;
        }
        if (i % 2) {
            const double ys = vp.y1 - vp.y0, ym = vp.y0 + ys / 2;
            vp.y0 = ym - ys / 4;
            vp.y1 = ym + ys / 4;
        }
        zoom.push_back(redraw(vp));
    }
    for (int i = 0; i < 10; ++i) {
        render::Viewport vp = h->viewport();
        const int64_t step = std::max<int64_t>(1, (vp.t1 - vp.t0) / 10);
        vp.t0 += step;
        vp.t1 += step;
        pan.push_back(redraw(vp));
    }
    // The time cursor across the run: a first move reads the blocks' attributes (tags,
    // streams, call sites: attributes_ms), then 20 instants, each timed from the request to
    // the histogram, memory map, block list and readout showing it, painted (cursorMs), and on
    // to the other panels that follow the cursor being done too (the top call sites up to the
    // cursor, search matches, when shown: allMs).
    int64_t shownAt = kNoTime;
    QObject::connect(&w, &MainWindow::cursorShown, [&](qint64 t) { shownAt = t; });
    // Baseline, same moves: the worker's computation of each snapshot (blocks, memory map,
    // state), what any redraw waits for before it can draw.
    std::vector<double> cursorMs, allMs, computeMs;
    double attributesMs = -1, callSitesMs = -1;
    qint64 cursorMaxGap = -1;
    if (const auto sc = w.scene()) {
        const int64_t b = sc->timeBegin(), span = std::max<int64_t>(1, sc->timeEnd() - b);
        auto move = [&](int64_t t) {
            QElapsedTimer c;
            c.start();
            w.setCursorTime(t);
            waitFor([&] { return shownAt == t; }, 120000);
            QApplication::processEvents(); // the paints the new state posted
            const double shown = static_cast<double>(c.nsecsElapsed()) / 1e6;
            waitFor([&] { return !w.busy(); }, 120000);
            QApplication::processEvents();
            return std::pair{shown, static_cast<double>(c.nsecsElapsed()) / 1e6};
        };
        attributesMs = move(b + span / 40).second;
        QApplication::processEvents();
        phaseGap = 0;
        lastTick = clock.elapsed();
        for (int i = 0; i < 20; ++i) {
            const auto [shown, all] =
                move(b + static_cast<int64_t>(static_cast<double>(span) * (i + 0.5) / 20.0));
            cursorMs.push_back(shown);
            allMs.push_back(all);
            if (const auto snap = w.cursorSnapshot()) computeMs.push_back(snap->computeMs);
        }
        cursorMaxGap = phaseGap;
        phaseGap = -1;
        // The call-site table over the whole run (its first: one replay for the holes).
        if (auto* d = w.findChild<QDockWidget*>(QStringLiteral("callSitesDock"))) {
            d->show();
            d->raise();
        }
        w.callSites()->setRange(views::CallSitesPanel::Range::WholeRun);
        waitFor([&] { return !w.callSites()->busy(); }, 120000);
        callSitesMs = w.callSites()->lastMs();
    }
    tick.stop();
    const auto scene = w.scene();
    std::printf("{\"schema_version\": %d, \"events\": %lld, \"allocations\": %lld, "
                "\"summary_ms\": %.1f, "
                "\"first_heatmap_ms\": %.1f, \"exact_heatmap_ms\": %.1f, \"views_ready_ms\": %.1f, "
                "\"complete_ms\": %.1f, "
                "\"zoom_redraw_ms_median\": %.1f, \"pan_redraw_ms_median\": %.1f, "
                "\"redraw_first_image_ms_median\": %.1f, "
                "\"attributes_ms\": %.1f, \"cursor_redraw_ms_median\": %.1f, "
                "\"cursor_redraw_ms_max\": %.1f, \"cursor_all_panels_ms_median\": %.1f, "
                "\"cursor_compute_ms_median\": %.1f, "
                "\"cursor_max_event_loop_gap_ms\": %lld, \"callsites_whole_run_ms\": %.1f, "
                "\"max_event_loop_gap_ms\": %lld, \"peak_rss_mb\": %.1f}\n",
                kJsonSchemaVersion, static_cast<long long>(scene ? scene->summary.events : 0),
                static_cast<long long>(scene ? scene->summary.allocations : 0), summaryMs,
                firstHeatmapMs, exactHeatmapMs, readyMs, completeMs, median(zoom), median(pan),
                median(firstImage), attributesMs, median(cursorMs),
                cursorMs.empty() ? 0.0 : *std::max_element(cursorMs.begin(), cursorMs.end()),
                median(allMs), median(computeMs), static_cast<long long>(cursorMaxGap), callSitesMs,
                static_cast<long long>(maxGap), peakRssMb());
    std::fflush(stdout);
    if (debug) {
        qApp->removeEventFilter(&events);
        std::fprintf(stderr, "largest event-loop gap ended at %lld ms; events over 0.5 ms in it:\n",
                     static_cast<long long>(maxGapAt));
        events.printWindow(static_cast<double>(maxGapAt - maxGap), static_cast<double>(maxGapAt));
        std::fprintf(stderr, "longest events:\n");
        events.print();
    }
    return 0;
}

} // namespace fs::gui
