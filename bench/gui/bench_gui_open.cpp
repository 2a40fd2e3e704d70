// Opening a large simulated session in fragscope-gui, as a user does, measured by the GUI itself.
//   bench_gui_open [EVENTS=3M] [SESSION]
// Simulates `fragscope simulate --events EVENTS --seed 1` (unless SESSION exists; the issue's
// figure is EVENTS=30M, about 10 M allocations), then runs `fragscope-gui --measure-open` on it
// twice (first open, reopen) and `fragscope export heatmap` twice, and prints each JSON line and
// wall time. Baselines in the same run: the first open against the reopen, the first export
// against the second (what keeping the engine's index is for). Targets: first open to first
// heatmap <= 2 s, reopen <= 1 s, second export <= 500 ms; exit status 1 when one is missed.
#include <QCoreApplication>
#include <QElapsedTimer>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>

#include <cstdio>
#include <cstdlib>

namespace {

struct Run
{
    int code = -1;
    double ms = 0;
    QByteArray out, err;
};

Run run(const QString& program, const QStringList& args)
{
    Run r;
    QProcess p;
    QElapsedTimer t;
    t.start();
    p.start(program, args);
    p.waitForFinished(-1);
    r.ms = static_cast<double>(t.nsecsElapsed()) / 1e6;
    r.code = p.exitStatus() == QProcess::NormalExit ? p.exitCode() : -1;
    r.out = p.readAllStandardOutput();
    r.err = p.readAllStandardError();
    return r;
}

} // namespace

int main(int argc, char** argv)
{
    QCoreApplication app(argc, argv);
    setenv("QT_QPA_PLATFORM", "offscreen", 0);
    const QString cli = QStringLiteral(FRAGSCOPE_CLI), gui = QStringLiteral(FRAGSCOPE_GUI);
    const QString events = argc > 1 ? QString::fromLocal8Bit(argv[1]) : QStringLiteral("3M");
    QTemporaryDir dir;
    const QString session =
        argc > 2 ? QString::fromLocal8Bit(argv[2]) : dir.filePath(QStringLiteral("open.fragscope"));
    if (!QFile::exists(session)) {
        const Run s = run(cli, {"simulate", "-o", session, "--events", events, "--seed", "1"});
        if (s.code != 0) {
            std::fprintf(stderr, "simulate failed: %s\n", s.err.constData());
            return 1;
        }
        std::printf("simulate --events %s --seed 1: %.1f s\n", qPrintable(events), s.ms / 1000);
    }
    double first = 0, again = 0;
    for (const char* what : {"first open", "reopen"}) {
        const Run r = run(gui, {"--measure-open", session});
        if (r.code != 0) {
            std::fprintf(stderr, "--measure-open failed: %s\n", r.err.constData());
            return 1;
        }
        const QJsonObject j = QJsonDocument::fromJson(r.out.trimmed()).object();
        std::printf("%-10s %s", what, r.out.constData());
        (what[0] == 'f' ? first : again) = j[QStringLiteral("first_heatmap_ms")].toDouble();
    }
    std::printf("reopen / first open to first heatmap: %.2f (targets: first <= 2000 ms, reopen "
                "<= 1000 ms)\n",
                first > 0 ? again / first : 0.0);
    double ex[2] = {0, 0};
    for (int i = 0; i < 2; ++i) {
        const Run r = run(cli, {"export", "heatmap", session, "-o", dir.filePath("h.png")});
        if (r.code != 0) {
            std::fprintf(stderr, "export failed: %s\n", r.err.constData());
            return 1;
        }
        ex[i] = r.ms;
    }
    std::printf("fragscope export heatmap: first %.0f ms, second %.0f ms (ratio %.2f; target "
                "second <= 500 ms)\n",
                ex[0], ex[1], ex[0] > 0 ? ex[1] / ex[0] : 0.0);
    bool missed = false;
    auto goal = [&](bool met, const char* what, double ms, double target) {
        if (met) return;
        std::fprintf(stderr, "bench_gui_open: goal missed: %s %.0f ms (target <= %.0f ms)\n", what,
                     ms, target);
        missed = true;
    };
    goal(first <= 2000, "first open to first heatmap", first, 2000);
    goal(again <= 1000, "reopen to first heatmap", again, 1000);
    goal(ex[1] <= 500, "second export heatmap", ex[1], 500);
    return missed ? 1 : 0;
}
