// Event-loop stall while fragscope-gui loads a large session on its worker thread.
//   bench_gui_load [ALLOCATIONS=1M] [SESSION]
// Also prints how long a live refresh (a re-read while recording) takes on the same file.
// Writes (when SESSION does not exist yet) a session of ALLOCATIONS allocations (two events each)
// through fs::Ingest (or uses SESSION), then loads it with the GUI's SessionLoader while a 5 ms
// QTimer ticks on the GUI thread, and prints the largest gap between ticks (target: < 50 ms).
// Baseline in the same run: the same load on the GUI thread, where the stall is the whole load.
#include "core/ingest.h"
#include "main_window.h"
#include "session_loader.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QTimer>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace {

void writeSession(const std::string& path, int64_t n)
{
    fs::IngestOptions o;
    o.path = path;
    o.sourceKind = "simulator";
    o.synthetic = true;
    fs::Ingest in(o);
    in.begin();
    in.addDevice({0, "bench GPU", 80ull << 30, "GPU-bench"});
    constexpr int kSegments = 64;
    constexpr uint64_t kSeg = 1ull << 30;
    for (int s = 0; s < kSegments; ++s) {
        fs::Event r;
        r.type = fs::EventType::RegionCreate;
        r.level = fs::Level::Framework;
        r.address = 0x7f0000000000ull + s * (2 * kSeg);
        r.size = kSeg;
        in.add(r);
    }
    // Each segment is a ring of slots; allocation i lives for 50 allocations' time, so about
    // 50 are live at once per segment: realistic churn at any n.
    uint32_t lcg = 1;
    int64_t t = 1000;
    const int64_t frames = std::max<int64_t>(1, n / 20000);
    int64_t frame = -1;
    for (int64_t i = 0; i < n; ++i) {
        t += 1000;
        const int64_t f = i * frames / n;
        if (f != frame) {
            frame = f;
            fs::Event m;
            m.type = fs::EventType::Mark;
            m.time = t;
            m.name = in.intern("frame " + std::to_string(f));
            in.add(m);
            in.addFrameMetric(f, "coherence_score", f % 17 == 16 ? 0.01 : 0.9, "bench");
        }
        lcg = lcg * 1664525u + 1013904223u;
        const int s = static_cast<int>((lcg >> 8) % kSegments);
        const uint64_t slot = static_cast<uint64_t>(i % 4096);
        fs::Event a;
        a.type = fs::EventType::Alloc;
        a.level = fs::Level::Framework;
        a.time = t;
        a.address = 0x7f0000000000ull + s * (2 * kSeg) + slot * (256ull << 10);
        a.size = (4096ull << ((lcg >> 4) % 6));
        in.add(a);
        fs::Event fr;
        fr.type = fs::EventType::Free;
        fr.level = fs::Level::Framework;
        fr.time = t + 500;
        fr.address = a.address;
        in.add(fr);
    }
    in.end();
}

} // namespace

int main(int argc, char** argv)
{
    setenv("QT_QPA_PLATFORM", "offscreen", 0);
    setenv("FRAGSCOPE_NO_PROGRESS", "1", 0);
    QApplication app(argc, argv);
    const int64_t n = argc > 1 ? std::atoll(argv[1]) : 1'000'000;
    QTemporaryDir dir;
    std::string path = argc > 2 ? argv[2] : dir.filePath("bench.fragscope").toStdString();
    if (argc <= 2 || !std::ifstream(path).good()) { // SESSION is written when it does not exist
        QElapsedTimer w;
        w.start();
        writeSession(path, n);
        std::printf("wrote %lld allocations (%lld events) in %.2f s\n", static_cast<long long>(n),
                    static_cast<long long>(2 * n), w.elapsed() / 1000.0);
    }
    fs::gui::SessionLoader loader;
    QElapsedTimer clock;
    qint64 last = 0, maxGap = 0, ticks = 0, maxAt = 0;
    QTimer timer;
    timer.setInterval(5);
    QObject::connect(&timer, &QTimer::timeout, [&] {
        const qint64 now = clock.elapsed();
        if (now - last > maxGap) {
            maxGap = now - last;
            maxAt = now;
        }
        last = now;
        ++ticks;
    });
    bool done = false;
    QString error;
    // Keep the scene: the GUI releases a replaced scene on a worker, never on its own thread.
    std::shared_ptr<const fs::render::Scene> kept;
    QObject::connect(&loader, &fs::gui::SessionLoader::loaded,
                     [&](const QString&, std::shared_ptr<const fs::render::Scene> s) {
                         kept = std::move(s);
                         done = true;
                     });
    QObject::connect(&loader, &fs::gui::SessionLoader::failed,
                     [&](const QString&, const QString& m) {
                         error = m;
                         done = true;
                     });
    clock.start();
    timer.start();
    loader.load(QString::fromStdString(path));
    while (!done)
        app.processEvents(QEventLoop::WaitForMoreEvents, 100);
    const qint64 total = clock.elapsed();
    timer.stop();
    if (!error.isEmpty()) {
        std::fprintf(stderr, "load failed: %s\n", qPrintable(error));
        return 1;
    }
    std::printf(
        "worker-thread load: %.3f s, %lld timer ticks (5 ms), max event-loop gap %lld ms at %.3f s "
        "(target < 50 ms)\n",
        total / 1000.0, static_cast<long long>(ticks), static_cast<long long>(maxGap),
        maxAt / 1000.0);
    std::printf("machine load average while measuring: see `uptime`; gaps include time the GUI "
                "thread waited "
                "for a CPU\n");
    kept.reset();
    // Baseline: the same load on the GUI thread (what a naive viewer does): the stall is the load.
    QElapsedTimer b;
    b.start();
    auto scene = fs::render::loadScene(path);
    std::printf("baseline, same load on the GUI thread: stall %.3f s (%zu frames, %zu levels)\n",
                b.elapsed() / 1000.0, scene->frames.size(), scene->levels.size());
    // First heatmap raster at 1920x1080 once loaded (the "first heatmap" figure).
    QElapsedTimer r;
    r.start();
    const int li = scene->defaultLevel();
    const QImage img = fs::render::heatmapRaster(scene->levels[static_cast<size_t>(li)],
                                                 fs::render::fullViewport(*scene, li), 1920, 1080);
    std::printf("full heatmap raster 1920x1080: %.1f ms\n", r.nsecsElapsed() / 1e6);

    // Live views: while a recording runs the GUI re-reads the file every kLiveRefreshMs, one
    // refresh at a time (LoadProgress::live: no integrity check, no analysis engine). A refresh
    // that takes L ms lands every kLiveRefreshMs * ceil(L / kLiveRefreshMs) ms.
    std::vector<double> liveMs, fullMs;
    for (int i = 0; i < 5; ++i) {
        fs::render::LoadProgress lp;
        lp.live = true;
        QElapsedTimer t;
        t.start();
        auto live = fs::render::loadScene(path, lp);
        liveMs.push_back(t.nsecsElapsed() / 1e6);
        t.restart();
        auto full = fs::render::loadScene(path);
        fullMs.push_back(t.nsecsElapsed() / 1e6);
        if (live->summary.events != full->summary.events) return 1;
    }
    auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
    };
    const double lm = median(liveMs), fm = median(fullMs);
    const int period = fs::gui::MainWindow::kLiveRefreshMs;
    const double every = period * std::max(1.0, std::ceil(lm / period));
    std::printf("live refresh read: median %.1f ms of 5 (full load, baseline: %.1f ms; ratio "
                "%.2f); at %d ms ticks the views refresh %.2f times per second (target >= 2)\n",
                lm, fm, lm / fm, period, 1000.0 / every);
    return img.isNull() ? 1 : 0;
}
