// Pickle to first picture: fragscope-gui given a PyTorch snapshot directly (File > Open, the
// command line) imports it on its worker, loads the session and draws the heatmap.
//   bench_gui_open_trace [MB=153] [SNAPSHOT]
// Writes (unless SNAPSHOT exists) a PyTorch-format snapshot of about MB MiB with
// bench/import/gen_snapshot.py (153 MiB: about 1 M allocations), then times in one window:
// open -> import done -> session loaded -> first full-resolution heatmap, cold (no session yet)
// and again with the session reused (the input unchanged). Baselines in the same run, from
// bench/gui/memory_viz_steps.py: python3's pickle.load of the same file, and the whole Python
// half of memory_viz's trace plot (load, pickle again, base64, JSON, write the page), a lower
// bound of memory_viz's time to its first picture (its browser half is not timed).
#include "main_window.h"
#include "session_loader.h"
#include "widgets/heatmap_widget.h"

#include <QApplication>
#include <QElapsedTimer>
#include <QEventLoop>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTimer>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

struct Timing
{
    double imported = -1, loaded = -1, firstPicture = -1;
    bool reused = false;
    QString error;
};

Timing openOnce(const QString& snapshot)
{
    fs::gui::MainWindow w;
    w.resize(1600, 900);
    w.show();
    Timing t;
    QElapsedTimer clock;
    QObject::connect(w.loader(), &fs::gui::SessionLoader::imported,
                     [&](const QString&, const QString&, bool reused) {
                         t.imported = clock.nsecsElapsed() / 1e9;
                         t.reused = reused;
                     });
    QObject::connect(w.loader(), &fs::gui::SessionLoader::loaded,
                     [&] { t.loaded = clock.nsecsElapsed() / 1e9; });
    // Wait as the application's event loop does: blocked until an event comes, a timer for the
    // time limit. (processEvents(flags, ms) in a loop drops WaitForMoreEvents and spun the GUI
    // thread: it took a core from the import on a 2-core machine, which a user's window never
    // does.)
    QEventLoop loop;
    QObject::connect(w.heatmap(), &fs::views::HeatmapWidget::refinedChanged, [&] {
        if (t.firstPicture < 0) t.firstPicture = clock.nsecsElapsed() / 1e9;
        loop.quit();
    });
    w.setErrorReporter([&](const QString&, const QString& m) {
        t.error = m;
        loop.quit();
    });
    QTimer::singleShot(600000, &loop, &QEventLoop::quit);
    clock.start();
    w.openFile(snapshot);
    if (t.firstPicture < 0 && t.error.isEmpty()) loop.exec();
    return t;
}

} // namespace

int main(int argc, char** argv)
{
    setenv("QT_QPA_PLATFORM", "offscreen", 0);
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("fragscope-bench"));
    const int mb = argc > 1 ? std::atoi(argv[1]) : 153;
    QTemporaryDir dir;
    // Sessions of this run only: the cache and the settings are the bench's own.
    qputenv("XDG_CACHE_HOME", dir.filePath("cache").toLocal8Bit());
    qputenv("FRAGSCOPE_SETTINGS", dir.filePath("settings.json").toLocal8Bit());
    const QString snapshot =
        argc > 2 ? QString::fromLocal8Bit(argv[2]) : dir.filePath("run.pickle");
    if (!QFile::exists(snapshot)) {
        QElapsedTimer g;
        g.start();
        const int rc = QProcess::execute(
            "python3", {FRAGSCOPE_GEN_SNAPSHOT, snapshot, QString::number(qint64(mb) << 20)});
        if (rc != 0) {
            std::fprintf(stderr, "gen_snapshot.py failed (%d)\n", rc);
            return 1;
        }
        std::printf("generated %s (%lld MiB) in %.1f s\n", qPrintable(snapshot),
                    static_cast<long long>(QFile(snapshot).size() >> 20), g.elapsed() / 1000.0);
    }
    // A session left beside a given snapshot by an earlier run would make the cold run a reuse.
    QFile::remove(snapshot + ".fragscope");

    // Baseline first, while the page cache holds the file for both sides alike.
    QProcess py;
    py.start("python3", {FRAGSCOPE_MEMORY_VIZ_STEPS, snapshot, dir.filePath("memory_viz.html")});
    const bool pyDone =
        py.waitForFinished(-1) && py.exitStatus() == QProcess::NormalExit && py.exitCode() == 0;
    const QJsonObject steps = QJsonDocument::fromJson(py.readAllStandardOutput()).object();
    QFile::remove(dir.filePath("memory_viz.html"));
    const double loadSeconds = steps.value("pickle_load_s").toDouble(-1);
    const double halfSeconds = steps.value("total_s").toDouble(-1);

    const Timing cold = openOnce(snapshot);
    const Timing warm = openOnce(snapshot);
    QFile::remove(snapshot + ".fragscope");
    for (const Timing* t : {&cold, &warm})
        if (!t->error.isEmpty() || t->firstPicture < 0) {
            std::fprintf(stderr, "open failed: %s\n", qPrintable(t->error));
            return 1;
        }
    std::printf("pickle to first picture, %s (%lld MiB):\n", qPrintable(snapshot),
                static_cast<long long>(QFile(snapshot).size() >> 20));
    std::printf("  first open:  imported %.3f s, session loaded and views built %.3f s, first full "
                "heatmap %.3f s\n",
                cold.imported, cold.loaded, cold.firstPicture);
    std::printf(
        "  second open (session reused: %s): views built %.3f s, first full heatmap %.3f s\n",
        warm.reused ? "yes" : "NO", warm.loaded, warm.firstPicture);
    if (pyDone && loadSeconds > 0 && halfSeconds > 0) {
        std::printf("  baselines, same run (bench/gui/memory_viz_steps.py):\n");
        std::printf("    python3 pickle.load alone: %.2f s; first open / pickle.load = %.3fx\n",
                    loadSeconds, cold.firstPicture / loadSeconds);
        std::printf("    memory_viz trace_plot, its Python half (load %.2f, pickle.dumps %.2f, "
                    "base64 %.2f, json %.2f, write %.2f): %.2f s; first open / that = %.3fx "
                    "(the browser's half would add to it)\n",
                    loadSeconds, steps.value("pickle_dumps_s").toDouble(),
                    steps.value("base64_s").toDouble(), steps.value("json_s").toDouble(),
                    steps.value("write_html_s").toDouble(), halfSeconds,
                    cold.firstPicture / halfSeconds);
    } else {
        std::printf("  baseline unavailable (memory_viz_steps.py: %s, exit %d: %s)\n",
                    qPrintable(py.errorString()), py.exitCode(),
                    py.readAllStandardError().trimmed().constData());
    }
    return warm.reused ? 0 : 1;
}
