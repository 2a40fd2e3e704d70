// Event-loop stall while fragscope-gui loads a large session on its worker thread.
//   bench_gui_load [ALLOCATIONS=1M] [SESSION]
// Writes (when SESSION does not exist yet) a session of ALLOCATIONS allocations (two events each)
// through fs::Ingest (or uses SESSION), then loads it with the GUI's SessionLoader while a 5 ms
// QTimer ticks on the GUI thread, and prints the largest gap between ticks (target: < 50 ms).
// Baseline in the same run: the same load on the GUI thread, where the stall is the whole load.
#include "bench_session.h"
#include "main_window.h"
#include "session_loader.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QTemporaryDir>
#include <QTimer>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>

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
        fsbench::writeSession(path, n);
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
    // The replay's figures must stay exact: compare a few samples of every level with the free
    // fragments recomputed from scratch (fragmentsAt). A mismatch fails the benchmark.
    int checked = 0, wrong = 0;
    for (const auto& ld : scene->levels) {
        for (size_t k = 0; k < 16 && !ld.samples.empty(); ++k) {
            const fs::render::StateSample& smp = ld.samples[k * (ld.samples.size() - 1) / 15];
            const auto frags = fs::render::fragmentsAt(ld, smp.t);
            double freeTotal = 0, largest = 0;
            for (const auto& [addr, size] : frags) {
                freeTotal += static_cast<double>(size);
                largest = std::max(largest, static_cast<double>(size));
            }
            // Event-size entropy from scratch: alloc and free events in (last - 300 s, last],
            // last being the latest event at or before the sample.
            int64_t lastEv = std::numeric_limits<int64_t>::min();
            for (const auto& a : ld.allocs) {
                if (a.allocNs <= smp.t) lastEv = std::max(lastEv, a.allocNs);
                if (a.freed && a.freeNs <= smp.t) lastEv = std::max(lastEv, a.freeNs);
            }
            std::array<double, 11> cls{};
            const auto add = [&](int64_t t, uint64_t bytes) {
                if (t > smp.t || t <= lastEv - 300'000'000'000) return;
                const int c = bytes <= 4096 ? 2 : static_cast<int>(std::bit_width(bytes)) - 11;
                cls[static_cast<size_t>(std::clamp(c, 2, 12) - 2)] += 1;
            };
            for (const auto& a : ld.allocs) {
                add(a.allocNs, a.size);
                if (a.freed) add(a.freeNs, a.size);
            }
            double events = 0, h = 0;
            for (double c : cls)
                events += c;
            for (double c : cls)
                if (c > 0) h -= c / events * std::log2(c / events);
            ++checked;
            if (std::fabs(h - smp.eventEntropy) > 1e-9) {
                ++wrong;
                std::fprintf(stderr, "sample at %lld: event entropy %.12g, from scratch %.12g\n",
                             static_cast<long long>(smp.t), smp.eventEntropy, h);
            } else if (static_cast<double>(frags.size()) != smp.fragmentCount ||
                       largest != smp.largestFragment || freeTotal != smp.freeInRegions) {
                ++wrong;
                std::fprintf(stderr,
                             "sample at %lld: replay %g fragments, largest %g, free %g; from "
                             "scratch %zu, %g, %g\n",
                             static_cast<long long>(smp.t), smp.fragmentCount, smp.largestFragment,
                             smp.freeInRegions, frags.size(), largest, freeTotal);
            }
        }
    }
    std::printf("exactness: %d of %d samples match a from-scratch recomputation\n", checked - wrong,
                checked);
    if (wrong > 0) return 1;
    // First heatmap raster at 1920x1080 once loaded (the "first heatmap" figure).
    QElapsedTimer r;
    r.start();
    const int li = scene->defaultLevel();
    const QImage img = fs::render::heatmapRaster(scene->levels[static_cast<size_t>(li)],
                                                 fs::render::fullViewport(*scene, li), 1920, 1080);
    std::printf("full heatmap raster 1920x1080: %.1f ms\n", r.nsecsElapsed() / 1e6);

    return img.isNull() ? 1 : 0;
}
