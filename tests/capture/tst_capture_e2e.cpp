// End to end without a GPU: `fragscope record` and `fragscope attach` on `fragscope simulate
// --live`, which serves the agent's control protocol and stream. Every process of a test shares a
// private socket directory (FRAGSCOPE_SOCKET_DIR).
#include "capture/recorder/recorder.h"
#include "core/analysis/engine.h"
#include "core/json.h"
#include "testutil.h"

#include <algorithm>

#include <QElapsedTimer>
#include <QFileInfo>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QScopeGuard>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>
#include <csignal>
#include <thread>

namespace {

QProcessEnvironment testEnv(const QString& sockDir)
{
    auto env = QProcessEnvironment::systemEnvironment();
    env.insert("FRAGSCOPE_NO_PROGRESS", "1");
    env.insert("FRAGSCOPE_SOCKET_DIR", sockDir);
    return env;
}

// The CLI with sockDir as its socket directory (fstest::runCli passes our environment on).
fstest::CliResult run(const QString& sockDir, const QStringList& args, int timeoutMs = 120000)
{
    qputenv("FRAGSCOPE_SOCKET_DIR", sockDir.toLocal8Bit());
    return fstest::runCli(args, timeoutMs);
}

QJsonObject info(const QString& sockDir, const QString& file)
{
    const auto r = run(sockDir, {"info", file, "--json"});
    if (r.exitCode != 0) qWarning("info failed: %s", r.err.constData());
    return QJsonDocument::fromJson(r.out).object();
}

// Waits until `fragscope ps --json` lists a target matching pred; returns it.
QJsonObject waitForTarget(const QString& sockDir,
                          const std::function<bool(const QJsonObject&)>& pred,
                          int timeoutMs = 30000)
{
    QElapsedTimer t;
    t.start();
    while (t.elapsed() < timeoutMs) {
        const auto r = run(sockDir, {"ps", "--json"});
        for (const auto& v : QJsonDocument::fromJson(r.out).object()["processes"].toArray())
            if (!v.toObject()["kind"].toString().isEmpty() && pred(v.toObject()))
                return v.toObject();
        QTest::qWait(100);
    }
    return {};
}

const QStringList kSim = {"simulate", "--live", "--frames", "6", "--steps", "4", "--seed", "5"};

} // namespace

class TestCaptureE2E : public QObject
{
    Q_OBJECT
    QTemporaryDir tmp_;
    QString sockDir() const { return tmp_.path() + "/sockets"; }
    QString file(const QString& n) const { return tmp_.path() + "/" + n; }
    QJsonObject reference_;

    // The live simulator paced at some events/s in the test's socket directory, killed when it
    // goes out of scope.
    struct PacedTarget
    {
        QProcess proc;
        qint64 pid = 0;
        ~PacedTarget()
        {
            proc.kill();
            proc.waitForFinished();
        }
    };
    // Starts t; whether `fragscope ps` lists it.
    bool startPacedTarget(PacedTarget& t, const char* rate)
    {
        t.proc.setProcessEnvironment(testEnv(sockDir()));
        t.proc.start(QStringLiteral(FRAGSCOPE_CLI), QStringList{kSim} << "--live-rate" << rate);
        if (!t.proc.waitForStarted()) return false;
        t.pid = t.proc.processId();
        return !waitForTarget(sockDir(), [&](const QJsonObject& o) {
                    return o["pid"].toInteger() == t.pid;
                }).isEmpty();
    }

private slots:
    void initTestCase()
    {
        // The same run written straight to a file: what the recorded sessions must equal.
        QStringList args = kSim;
        args.removeAll("--live");
        args << "-o" << file("ref.fragscope");
        const auto r = run(sockDir(), args);
        QVERIFY2(r.exitCode == 0, r.err);
        reference_ = info(sockDir(), file("ref.fragscope"));
        QVERIFY(reference_["events"].toInteger() > 1000);
    }

    void recordEqualsTheSimulatorsOwnRun()
    {
        const auto r = run(sockDir(), QStringList{"record", "-o", file("rec.fragscope"), "--",
                                                  QStringLiteral(FRAGSCOPE_CLI)} +
                                          kSim);
        QVERIFY2(r.exitCode == 0, r.err + r.out);
        // The simulator's own log of what it emitted.
        const QRegularExpressionMatch m =
            QRegularExpression("Simulated (\\d+) events live").match(QString(r.out));
        QVERIFY2(m.hasMatch(), r.out);
        const qint64 emitted = m.captured(1).toLongLong();
        const QJsonObject s = info(sockDir(), file("rec.fragscope"));
        QCOMPARE(s["events"].toInteger(), emitted);
        for (const char* k : {"events", "regions", "allocations", "kernels", "graph_launches",
                              "frames", "frame_metrics", "ooms", "time_begin_ns", "time_end_ns"})
            QVERIFY2(s[k].toInteger() == reference_[k].toInteger(),
                     qPrintable(QString("%1: recorded %2, simulated %3")
                                    .arg(k)
                                    .arg(s[k].toInteger())
                                    .arg(reference_[k].toInteger())));
        QCOMPARE(s["synthetic"].toBool(), true);
        QCOMPARE(s["health"].toObject()["ended_abruptly"].toBool(), false);
        QCOMPARE(s["health"].toObject()["anomaly_total"].toInteger(),
                 reference_["health"].toObject()["anomaly_total"].toInteger());
        QVERIFY(s["sources"].toArray().first().toString().contains("simulator-live"));
    }

    void attachToALiveTarget()
    {
        QProcess target;
        target.setProcessEnvironment(testEnv(sockDir()));
        target.start(QStringLiteral(FRAGSCOPE_CLI), kSim);
        QVERIFY(target.waitForStarted());
        auto reap = qScopeGuard([&] {
            target.kill();
            target.waitForFinished();
        });
        const qint64 pid = target.processId();
        const QJsonObject t = waitForTarget(
            sockDir(), [&](const QJsonObject& o) { return o["pid"].toInteger() == pid; });
        QVERIFY2(!t.isEmpty(), "simulate --live never showed up in fragscope ps");
        QCOMPARE(t["kind"].toString(), QStringLiteral("simulator"));
        QCOMPARE(t["state"].toString(), QStringLiteral("idle"));
        const auto r =
            run(sockDir(), {"attach", QString::number(pid), "-o", file("att.fragscope")});
        QVERIFY2(r.exitCode == 0, r.err);
        QVERIFY(target.waitForFinished(60000));
        QCOMPARE(target.exitCode(), 0);
        const QJsonObject s = info(sockDir(), file("att.fragscope"));
        for (const char* k : {"events", "allocations", "kernels", "frames", "frame_metrics"})
            QCOMPARE(s[k].toInteger(), reference_[k].toInteger());
        QCOMPARE(s["health"].toObject()["ended_abruptly"].toBool(), false);
    }

    void recorderApiForTheGui()
    {
        // What File > Attach… uses: list, attach(pid, out), events() while running, wait().
        ::setenv("FRAGSCOPE_SOCKET_DIR", sockDir().toLocal8Bit().constData(), 1);
        QProcess target;
        target.setProcessEnvironment(testEnv(sockDir()));
        target.start(QStringLiteral(FRAGSCOPE_CLI), QStringList{kSim} << "--live-rate"
                                                                      << "20000"); // runs ~1 s
        QVERIFY(target.waitForStarted());
        auto reap = qScopeGuard([&] {
            target.kill();
            target.waitForFinished();
        });
        const pid_t pid = static_cast<pid_t>(target.processId());
        QVERIFY(!waitForTarget(sockDir(), [&](const QJsonObject& o) {
                     return o["pid"].toInteger() == pid;
                 }).isEmpty());
        const auto list = fs::capture::listTargets();
        QVERIFY(std::any_of(list.begin(), list.end(),
                            [&](const auto& t) { return t.pid == pid && t.kind == "simulator"; }));
        std::string err;
        auto rec = fs::capture::Recording::attach(pid, file("api.fragscope").toStdString(), err);
        QVERIFY2(rec, err.c_str());
        // A second attach while it records is refused with a reason.
        std::string err2;
        QVERIFY(!fs::capture::Recording::attach(pid, file("api2.fragscope").toStdString(), err2));
        QVERIFY2(err2.find("already recording") != std::string::npos, err2.c_str());
        const fs::capture::RecordResult res = rec->wait();
        QVERIFY2(res.ok, res.error.c_str());
        QVERIFY(!rec->running());
        QCOMPARE(rec->events(), reference_["events"].toInteger());
        QCOMPARE(info(sockDir(), file("api.fragscope"))["events"].toInteger(),
                 reference_["events"].toInteger());
    }

    void attachWithDurationStopsCleanly()
    {
        PacedTarget target; // paced so that a 1 s recording sees only part of the run
        QVERIFY(startPacedTarget(target, "4000"));
        const qint64 pid = target.pid;
        const auto r = run(sockDir(), {"attach", QString::number(pid), "-o", file("dur.fragscope"),
                                       "--duration", "1s"});
        QVERIFY2(r.exitCode == 0, r.err);
        const QJsonObject s = info(sockDir(), file("dur.fragscope"));
        QVERIFY(s["events"].toInteger() > 0);
        QVERIFY(s["events"].toInteger() < reference_["events"].toInteger());
        QCOMPARE(s["health"].toObject()["ended_abruptly"].toBool(), false); // stopped, not cut
    }

    // attach --keep: nothing is written until `fragscope mark`; then one window, from the start
    // of what was held to the mark, exact as far as it goes.
    void attachWithKeepWritesAWindowAroundAMark()
    {
        PacedTarget target; // paced so that the mark comes in the middle of the run
        QVERIFY(startPacedTarget(target, "1000"));
        QVERIFY(reference_["events"].toInteger() > 3000); // at least 3 s at 1000 events/s
        const QString pid = QString::number(target.pid);
        QProcess rec;
        rec.setProcessEnvironment(testEnv(sockDir()));
        rec.start(QStringLiteral(FRAGSCOPE_CLI), {"attach", pid, "-o", file("keep.fragscope"),
                                                  "--keep", "1h", "--after", "0s", "--no-index"});
        QVERIFY(rec.waitForStarted());
        QTest::qWait(1000);
        const auto m = run(sockDir(), {"mark", pid, "checkpoint A"});
        QVERIFY2(m.exitCode == 0, m.err);
        QVERIFY(rec.waitForFinished(120000));
        const QString err = QString::fromUtf8(rec.readAllStandardError());
        QVERIFY2(rec.exitCode() == 0, qPrintable(err));
        QVERIFY2(err.contains("1 window(s)"), qPrintable(err));
        const QJsonObject s = info(sockDir(), file("keep.fragscope"));
        const QJsonArray w = s["windows"].toArray();
        QCOMPARE(w.size(), 1);
        const QJsonObject w0 = w.first().toObject();
        QCOMPARE(w0["trigger"].toString(), QStringLiteral("mark: checkpoint A"));
        QVERIFY(w0["events"].toInteger() > 0);
        QVERIFY(w0["events"].toInteger() < reference_["events"].toInteger());
        QVERIFY(w0["begin_ns"].toInteger() < w0["end_ns"].toInteger());
        // Whole recordings list no windows.
        QVERIFY(reference_["windows"].toArray().isEmpty());
    }

    // simulate --live --live-clock N: the simulated clock stretched to N events a second (the
    // flight recorder's bench runs hours that way); the events are the same, their span is
    // events / N seconds (within the probe's estimate of the simulator's own clock: 10 %).
    void liveClockStretchesTheSimulatedTime()
    {
        const auto r = run(sockDir(), QStringList{"record", "-o", file("clock.fragscope"), "--",
                                                  QStringLiteral(FRAGSCOPE_CLI)} +
                                          kSim + QStringList{"--live-clock", "20"});
        QVERIFY2(r.exitCode == 0, r.err + r.out);
        const QJsonObject s = info(sockDir(), file("clock.fragscope"));
        QCOMPARE(s["events"].toInteger(), reference_["events"].toInteger());
        const double span = static_cast<double>(s["time_span_ns"].toInteger()) / 1e9;
        const double want = static_cast<double>(s["events"].toInteger()) / 20;
        QVERIFY2(std::abs(span / want - 1) < 0.1,
                 qPrintable(QString("span %1 s, expected about %2 s").arg(span).arg(want)));
        // Unstretched, the same run spans far less (its own clock runs at about 400 events/s).
        QVERIFY(reference_["time_span_ns"].toInteger() < s["time_span_ns"].toInteger() / 10);
    }

    void recordedSessionsOpenAsAReopen()
    {
        // record and attach store the analysis index when the recording ends, as simulate and
        // import do, for a session of 2 M allocations or more, or always with --index: the first
        // open of such a session reads no allocation row. The attach stopped with SIGTERM is
        // what the GUI's Stop recording does. rec.fragscope (written by a test above, QtTest
        // runs slots in order) is far smaller and got no index: its first open reads the rows.
        {
            PacedTarget target;
            QVERIFY(startPacedTarget(target, "2000")); // longer than the wait below
            const qint64 pid = target.pid;
            QProcess att;
            att.setProcessEnvironment(testEnv(sockDir()));
            att.start(QStringLiteral(FRAGSCOPE_CLI),
                      {"attach", QString::number(pid), "--index", "-o", file("stop.fragscope")});
            QVERIFY(att.waitForStarted());
            // The session file appears once attach is connected and its stop handler is in
            // place; a fixed wait sent SIGTERM before that to a slow (ASan, loaded) start.
            QTRY_VERIFY_WITH_TIMEOUT(QFileInfo::exists(file("stop.fragscope")), 60000);
            QTest::qWait(1000);                       // then a second of events, as before
            QCOMPARE(att.state(), QProcess::Running); // still recording: stopped below
            att.terminate();                          // MainWindow::stopRecording
            QVERIFY(att.waitForFinished(60000));
            QVERIFY2(att.exitCode() == 0, att.readAllStandardError().constData());
        } // the target ends here
        const auto r = run(sockDir(), QStringList{"record", "--index", "-o", file("idx.fragscope"),
                                                  "--", QStringLiteral(FRAGSCOPE_CLI)} +
                                          kSim);
        QVERIFY2(r.exitCode == 0, r.err + r.out);
        for (const char* name : {"idx.fragscope", "stop.fragscope"}) {
            const std::string path = file(name).toStdString();
            const auto e = fs::analysis::Engine::open(path);
            QVERIFY2(e->loadInfo().rowsDeferred, name);
            QCOMPARE(e->loadInfo().allocationRowsRead, int64_t(0));
            // The stored index answers like a fresh replay of the same file.
            fs::analysis::LoadOptions fresh;
            fresh.useCache = false;
            const auto eager = fs::analysis::Engine::open(path, fresh);
            QVERIFY(eager->loadInfo().allocationRowsRead > 0);
            QCOMPARE(e->tracks().size(), eager->tracks().size());
            for (size_t i = 0; i < e->tracks().size(); ++i)
                QCOMPARE(e->tracks()[i].allocations, eager->tracks()[i].allocations);
        }
        // Without --index a small recording is left for its first open to index.
        const auto e = fs::analysis::Engine::open(file("rec.fragscope").toStdString());
        QVERIFY(!e->loadInfo().rowsDeferred);
        QVERIFY(e->loadInfo().allocationRowsRead > 0);
    }

    void sigkillOfTheTargetLeavesAnOpenableSession()
    {
        QProcess rec;
        rec.setProcessEnvironment(testEnv(sockDir()));
        rec.start(
            QStringLiteral(FRAGSCOPE_CLI),
            QStringList{"record", "-o", file("kill.fragscope"), "--", QStringLiteral(FRAGSCOPE_CLI)}
                << "simulate"
                << "--live"
                << "--frames"
                << "200"
                << "--steps"
                << "4"
                << "--live-rate"
                << "5000");
        QVERIFY(rec.waitForStarted());
        auto reap = qScopeGuard([&] {
            rec.kill();
            rec.waitForFinished();
        });
        const qint64 recPid = rec.processId();
        const QJsonObject t = waitForTarget(sockDir(), [&](const QJsonObject& o) {
            return o["launched_by_pid"].toInteger() == recPid;
        });
        QVERIFY2(!t.isEmpty(), "the recorded simulator never showed up");
        QTest::qWait(2500); // > 2 commits (at least one per second)
        QCOMPARE(::kill(static_cast<pid_t>(t["pid"].toInteger()), SIGKILL), 0);
        QVERIFY(rec.waitForFinished(30000));
        QCOMPARE(rec.exitCode(), 128 + SIGKILL); // the target's fate is passed on
        const QJsonObject s = info(sockDir(), file("kill.fragscope"));
        // About 2.5 s at 5000 events/s were committed; the 200-frame run is far longer.
        QVERIFY2(s["events"].toInteger() > 1000,
                 qPrintable(QString::number(s["events"].toInteger())));
        QCOMPARE(s["health"].toObject()["ended_abruptly"].toBool(), true);
        QCOMPARE(s["health"].toObject()["recording"].toBool(), false);
    }

    void attachInjectsIntoAProcessWithoutTheAgent()
    {
        // `sleep` never loaded the agent: attach injects it with gdb. Without a GPU driver the
        // agent disables itself; either way the target must survive and the reason be given.
#ifdef __SANITIZE_ADDRESS__
        QSKIP("an ASan-built agent aborts a process that was not started under ASan (its runtime "
              "must load first), so injection into a foreign process is tested in the release "
              "build only");
#endif
        QProcess target;
        target.start("sleep", {"60"});
        QVERIFY(target.waitForStarted());
        auto reap = qScopeGuard([&] {
            target.kill();
            target.waitForFinished();
        });
        const auto r = run(sockDir(), {"attach", QString::number(target.processId()), "-o",
                                       file("inj.fragscope")});
        QCOMPARE(r.exitCode, 1);
        // Or gdb cannot make calls on this machine (gdb 13 on a CPU with AMX), found on a
        // process of fragscope's own before the target is touched.
        QVERIFY2(r.err.contains("disabled itself") || r.err.contains("refused to let gdb attach") ||
                     r.err.contains("gdb is not installed") ||
                     r.err.contains("gdb cannot call a function"),
                 r.err);
        QCOMPARE(target.state(), QProcess::Running); // unharmed
        QVERIFY(!QFile::exists(file("inj.fragscope")));
        // --no-inject refuses instead.
        const auto r2 = run(sockDir(), {"attach", QString::number(target.processId()), "-o",
                                        file("inj.fragscope"), "--no-inject"});
        QCOMPARE(r2.exitCode, 1);
        QVERIFY2(r2.err.contains("--no-inject"), r2.err);
    }

    void recordOfAMissingCommandFails()
    {
        const auto r =
            run(sockDir(), {"record", "-o", file("none.fragscope"), "--", "/nonexistent/prog"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("/nonexistent/prog"), r.err);
        QVERIFY(!QFile::exists(file("none.fragscope")));
    }

    void recordOfACommandWithoutCudaExplains()
    {
        // `true` never initialises CUDA, so the agent never starts: no session, a clear reason.
        const auto r = run(sockDir(), {"record", "-o", file("nocuda.fragscope"), "--", "true"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("did the command use CUDA"), r.err);
    }

    void usageErrors()
    {
        QCOMPARE(run(sockDir(), {"record", "--", "true"}).exitCode, 64);
        QCOMPARE(run(sockDir(), {"record", "-o", "x.fragscope"}).exitCode, 64);
        QCOMPARE(run(sockDir(), {"attach", "notapid", "-o", "x"}).exitCode, 64);
        QCOMPARE(run(sockDir(), {"attach", "1", "-o", "x", "--duration", "soon"}).exitCode, 64);
        QCOMPARE(run(sockDir(), {"launch"}).exitCode, 64);
        QCOMPARE(run(sockDir(), {"attach", "1", "-o", "x", "--keep", "soon"}).exitCode, 64);
        QCOMPARE(run(sockDir(), {"attach", "1", "-o", "x", "--after", "1s"}).exitCode, 64);
        QCOMPARE(
            run(sockDir(), {"attach", "1", "-o", "x", "--keep", "1s", "--before", "2s"}).exitCode,
            64);
        QCOMPARE(run(sockDir(), {"mark"}).exitCode, 64);
        QCOMPARE(run(sockDir(), {"mark", "notapid"}).exitCode, 64);
        for (const char* c : {"record", "attach", "launch", "ps", "mark"}) {
            const auto r = run(sockDir(), {c, "--help"});
            QCOMPARE(r.exitCode, 0);
            QVERIFY(r.out.contains(c));
        }
    }

    void psListsNothingInAnEmptyDirectory()
    {
        QTemporaryDir empty;
        const auto r = run(empty.path() + "/s", {"ps", "--json"});
        QCOMPARE(r.exitCode, 0);
        const QJsonObject o = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(o["schema_version"].toInt(), fs::kJsonSchemaVersion);
        QVERIFY(o["processes"].isArray());
        QCOMPARE(o["processes"].toArray().size(), 0);
    }
};

QTEST_GUILESS_MAIN(TestCaptureE2E)
#include "tst_capture_e2e.moc"
