// Live views: the cost of one LiveScene::refresh (analysis::LiveEngine) as a recording grows.
//   bench_gui_live [ALLOCATIONS=2M] [EVERY=20000]
// Writes a session of ALLOCATIONS allocations (two events each) through fs::Ingest, and every
// EVERY allocations (right after a commit) refreshes one LiveScene of the file, as fragscope-gui
// does every MainWindow::kLiveRefreshMs while it records: the default, 40,000 events per refresh,
// is a recording at 100,000 events per second. Prints the refresh time against the events
// recorded so far (ten rows). Baselines in the same run, on the finished file: a
// full re-read (loadScene, what a viewer without increments redoes on every refresh) and a
// LiveScene's first refresh (the whole file at once).
#include "bench_session.h"
#include "main_window.h"
#include "render/live_scene.h"

#include <QElapsedTimer>
#include <QGuiApplication>
#include <QTemporaryDir>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

int main(int argc, char** argv)
{
    setenv("QT_QPA_PLATFORM", "offscreen", 0);
    QGuiApplication app(argc, argv);
    const int64_t n = argc > 1 ? std::atoll(argv[1]) : 2'000'000;
    const int64_t every = std::max<int64_t>(1, argc > 2 ? std::atoll(argv[2]) : 20'000);
    QTemporaryDir dir;
    const std::string path = dir.filePath("live.fragscope").toStdString();
    fs::render::LiveScene live(path);
    std::vector<double> ms;
    int64_t events = 0;
    std::printf("%12s %12s %10s %12s\n", "events", "allocations", "refresh", "scene allocs");
    const int64_t rows = std::max<int64_t>(1, n / every / 10);
    fsbench::writeSession(path, n, every, [&](int64_t i) {
        QElapsedTimer t;
        t.start();
        const auto scene = live.refresh();
        ms.push_back(static_cast<double>(t.nsecsElapsed()) / 1e6);
        events = scene->summary.events;
        int64_t allocs = 0;
        for (const auto& ld : scene->tracks)
            allocs += ld.allocations;
        if (std::ssize(ms) % rows == 0)
            std::printf("%12lld %12lld %8.1f ms %12lld\n", static_cast<long long>(events),
                        static_cast<long long>(i + 1), ms.back(), static_cast<long long>(allocs));
    });
    std::vector<double> last(ms.end() - std::min<std::ptrdiff_t>(5, std::ssize(ms)), ms.end());
    std::sort(last.begin(), last.end());
    const double med = last[last.size() / 2];

    QElapsedTimer t;
    t.start();
    const auto full = fs::render::loadScene(path);
    const double fullMs = static_cast<double>(t.nsecsElapsed()) / 1e6;
    t.restart();
    fs::render::LiveScene fresh(path);
    fresh.refresh();
    const double firstMs = static_cast<double>(t.nsecsElapsed()) / 1e6;
    const int period = fs::gui::MainWindow::kLiveRefreshMs;
    const double interval = period * std::max(1.0, std::ceil(med / period));
    const auto st = live.refresh()->engine->loadInfo();
    std::printf("last 5 refreshes: median %.1f ms at %lld events; %lld allocation rows and %lld "
                "live lookups read over %lld incremental refreshes (%lld re-indexings)\n",
                med, static_cast<long long>(events), static_cast<long long>(st.allocationRowsRead),
                static_cast<long long>(st.liveLookups), static_cast<long long>(st.liveRefreshes),
                static_cast<long long>(st.liveRebuilds));
    std::printf("baselines on the finished file (%lld events): full re-read %.1f ms (ratio "
                "%.1fx the incremental refresh), first LiveScene refresh %.1f ms\n",
                static_cast<long long>(full->summary.events), fullMs, fullMs / med, firstMs);
    std::printf("at %d ms ticks the live views refresh %.2f times per second at the end "
                "(target >= 2)\n",
                period, 1000.0 / interval);
    return 0;
}
