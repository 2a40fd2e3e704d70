// fragscope-gui [FILE…] | --attach PID [-o OUT] | --screenshots DIR FILE… | --measure-open FILE |
// --version
#include "core/store/session.h"
#include "core/versions.h"
#include "main_window.h"
#include "measure_open.h"
#include "ranks_window.h"
#include "study_window.h"

#include <QApplication>
#include <QCommandLineParser>
#include <QElapsedTimer>
#include <QIcon>
#include <QThread>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace {

// The GUI thread's large buffers (a heatmap's 8 MB base image, the plot-sized images its lines
// are stamped from, QCustomPlot's buffers) come from heap memory that is already mapped and
// touched. Fresh memory costs a mapping call, which waits for the process's memory-map lock
// while the loader's workers fault in hundreds of MB, and a page clear in the kernel: at the
// first paint of a newly opened session that was 60-100 ms of wall time for 10-20 ms of CPU on a
// loaded 2-core machine. So: blocks up to 32 MiB from the heap (glibc maps larger ones apart),
// freed memory kept, and 64 MiB touched once now, while nothing else runs.
void keepGuiHeapWarm()
{
#if defined(__GLIBC__)
    constexpr size_t kBlock = 16u << 20;
    mallopt(M_MMAP_THRESHOLD, 32 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    std::vector<void*> blocks;
    for (int i = 0; i < 4; ++i)
        if (void* b = std::malloc(kBlock)) {
            std::memset(b, 0, kBlock);
            blocks.push_back(b);
        }
    for (void* b : blocks)
        std::free(b);
#endif
}

} // namespace

int main(int argc, char** argv)
{
    for (int i = 1; i < argc; ++i) {
        if (std::strcmp(argv[i], "--version") == 0) {
            std::printf("fragscope-gui %s\nsession format %d\nQt %s\nSQLite %s\nfmt %s\nCUPTI %s\n",
                        fs::fragscopeVersion().c_str(), fs::kFormatVersion, qVersion(),
                        fs::sqliteVersion().c_str(), fs::fmtVersion().c_str(),
                        fs::cuptiVersion().c_str());
            return 0;
        }
        // Headless runs, and --help anywhere (a terminal without a display must read it).
        if ((std::strcmp(argv[i], "--screenshots") == 0 ||
             std::strcmp(argv[i], "--measure-open") == 0 || std::strcmp(argv[i], "--help") == 0 ||
             std::strcmp(argv[i], "-h") == 0 || std::strcmp(argv[i], "--help-all") == 0) &&
            !std::getenv("DISPLAY") && !std::getenv("WAYLAND_DISPLAY"))
            setenv("QT_QPA_PLATFORM", "offscreen", 0);
    }
    QApplication::setHighDpiScaleFactorRoundingPolicy(
        Qt::HighDpiScaleFactorRoundingPolicy::PassThrough);
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("fragscope"));
    QApplication::setApplicationName(QStringLiteral("fragscope"));
    QApplication::setApplicationVersion(QString::fromStdString(fs::fragscopeVersion()));
    QApplication::setDesktopFileName(QStringLiteral("org.fragscope.Fragscope"));
    QIcon icon;
    for (int size : {16, 32, 48, 64, 128, 256})
        icon.addFile(QStringLiteral(":/icons/fragscope-%1.png").arg(size), QSize(size, size));
    QApplication::setWindowIcon(icon);

    QCommandLineParser cli;
    cli.setApplicationDescription(
        QStringLiteral("fragscope: GPU memory fragmentation and frame collapses"));
    cli.addHelpOption();
    cli.addOption({QStringLiteral("version"), QStringLiteral("Print versions and exit.")});
    cli.addOption(
        {QStringLiteral("screenshots"),
         QStringLiteral("Render the window in several states into DIR as PNG files, then exit "
                        "(several FILEs: the ranks view)."),
         QStringLiteral("DIR")});
    cli.addOption(
        {QStringLiteral("measure-open"),
         QStringLiteral("Open FILE, draw the first heatmap, zoom 10 times and pan 10 times, move "
                        "the time cursor across the run, print one JSON line of timings "
                        "(docs/gui.md), then exit."),
         QStringLiteral("FILE")});
    cli.addOption({QStringLiteral("attach"),
                   QStringLiteral("Record process PID (as File › Attach… does) and follow it live; "
                                  "File › Stop recording finishes and opens the session."),
                   QStringLiteral("PID")});
    cli.addOption({{QStringLiteral("o"), QStringLiteral("output")},
                   QStringLiteral("With --attach: the session file to record into (default: "
                                  "attach-PID.fragscope in the current directory)."),
                   QStringLiteral("OUT")});
    cli.addPositionalArgument(QStringLiteral("FILE"),
                              QStringLiteral("Session (.fragscope) or trace to open: a PyTorch "
                                             "snapshot, Kineto trace or nsys SQLite export is "
                                             "imported first (beside it, else in the cache "
                                             "directory) and reused while unchanged. Several "
                                             "files: the ranks of one job, as one view "
                                             "(docs/ranks.md). A `fragscope ab` study folder "
                                             "(or its study.json): the study view (docs/ab.md)."),
                              QStringLiteral("FILE…"));
    cli.process(app); // --help and bad options exit here
    const QStringList files = cli.positionalArguments();
    keepGuiHeapWarm(); // a window follows

    if (files.size() >= 2 && !cli.isSet(QStringLiteral("screenshots")) &&
        !cli.isSet(QStringLiteral("measure-open")) && !cli.isSet(QStringLiteral("attach"))) {
        fs::gui::RanksWindow ranks(files); // several files: one job's ranks (ranks_window.h)
        ranks.show();
        return app.exec();
    }
    // A `fragscope ab` study folder (or its study.json): the study view (study_window.h).
    if (files.size() == 1 && !fs::gui::StudyWindow::studyFolder(files.front()).isEmpty() &&
        !cli.isSet(QStringLiteral("measure-open")) && !cli.isSet(QStringLiteral("attach"))) {
        fs::gui::StudyWindow study(fs::gui::StudyWindow::studyFolder(files.front()));
        study.resize(1200, 820);
        if (cli.isSet(QStringLiteral("screenshots"))) {
            const QStringList shots =
                study.writeScreenshots(cli.value(QStringLiteral("screenshots")));
            for (const QString& s : shots)
                std::printf("wrote %s\n", qPrintable(s));
            if (!study.ok()) std::fprintf(stderr, "fragscope-gui: %s\n", qPrintable(study.error()));
            return !study.ok() ? 2 : shots.isEmpty() ? 1 : 0;
        }
        study.show();
        return app.exec();
    }
    if (files.size() >= 2 && cli.isSet(QStringLiteral("screenshots"))) {
        fs::gui::RanksWindow ranks(files); // the ranks view, offscreen
        QString error;
        const QStringList shots =
            ranks.writeScreenshots(cli.value(QStringLiteral("screenshots")), error);
        for (const QString& s : shots)
            std::printf("wrote %s\n", qPrintable(s));
        if (!error.isEmpty()) std::fprintf(stderr, "fragscope-gui: %s\n", qPrintable(error));
        return !error.isEmpty() ? 2 : shots.isEmpty() ? 1 : 0;
    }
    fs::gui::MainWindow w;
    if (cli.isSet(QStringLiteral("measure-open")))
        return fs::gui::measureOpen(w, cli.value(QStringLiteral("measure-open")));
    if (cli.isSet(QStringLiteral("screenshots"))) {
        if (files.isEmpty()) {
            std::fprintf(stderr, "fragscope-gui: --screenshots DIR needs a session FILE\n");
            return 64;
        }
        int status = 0;
        QString error;
        w.setErrorReporter([&](const QString&, const QString& text) {
            error = text;
            status = 2;
        });
        w.openFile(files.front());
        QElapsedTimer t;
        t.start();
        while (w.busy() && t.elapsed() < 600000) {
            QApplication::processEvents(QEventLoop::AllEvents, 50);
            QThread::msleep(5);
        }
        QApplication::processEvents();
        if (status != 0) {
            std::fprintf(stderr, "fragscope-gui: %s\n", qPrintable(error));
            return status;
        }
        const QStringList shots = w.writeScreenshots(cli.value(QStringLiteral("screenshots")));
        for (const QString& s : shots)
            std::printf("wrote %s\n", qPrintable(s));
        return shots.isEmpty() ? 1 : 0;
    }
    w.show();
    if (cli.isSet(QStringLiteral("attach"))) {
        bool ok = false;
        const qint64 pid = cli.value(QStringLiteral("attach")).toLongLong(&ok);
        if (!ok || pid <= 0) {
            std::fprintf(stderr, "fragscope-gui: --attach needs a process id, not '%s'\n",
                         qPrintable(cli.value(QStringLiteral("attach"))));
            return 64;
        }
        if (!fs::captureBuilt()) {
            std::fprintf(stderr, "fragscope-gui: --attach is unavailable: %s.\n",
                         fs::noCaptureReason());
            return 1;
        }
        const QString out = cli.isSet(QStringLiteral("o"))
                                ? cli.value(QStringLiteral("o"))
                                : QStringLiteral("attach-%1.fragscope").arg(pid);
        w.startRecording(pid, out);
    } else if (!files.isEmpty()) {
        w.openFile(files.front());
    }
    return app.exec();
}
