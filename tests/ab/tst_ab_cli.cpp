// `fragscope ab` end to end on gen_frames.py, a stand-in generation that reads the allocator
// settings of its environment as PyTorch would: known answers for the three verdicts, every bad
// input (command not found, a failed run, no video, another frame count, a study folder that
// holds something else), user arms, Ctrl-C.
#include "testutil.h"

#include <QDir>
#include <QFile>
#include <QImage>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QTemporaryDir>
#include <QTest>

#include <csignal>

using fstest::runCliIn;

namespace {

QString python()
{
    return QFileInfo::exists("/usr/bin/python3") ? QStringLiteral("/usr/bin/python3")
                                                 : QStringLiteral("python3");
}

QString generator()
{
    return QStringLiteral(FRAGSCOPE_SOURCE_DIR) + "/tests/ab/gen_frames.py";
}

QJsonObject readJson(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

QJsonObject collapseAt(const QJsonObject& study, int frame)
{
    for (const auto& c : study["collapses"].toArray())
        if (c.toObject()["frame"].toInt() == frame) return c.toObject();
    return {};
}

QJsonObject runOf(const QJsonObject& study, const QString& folder)
{
    for (const auto& a : study["arms"].toArray())
        for (const auto& r : a.toObject()["runs"].toArray())
            if (r.toObject()["folder"].toString() == folder) return r.toObject();
    return {};
}

// Ended: no such process, or a zombie nobody reaped yet (PID 1 of a container may not).
bool gone(pid_t pid)
{
    if (::kill(pid, 0) != 0) return true;
    QFile stat(QString("/proc/%1/stat").arg(pid));
    if (!stat.open(QIODevice::ReadOnly)) return true;
    const QByteArray s = stat.readAll();
    const int close = s.lastIndexOf(')');
    return close > 0 && s.mid(close + 2, 1) == "Z";
}

} // namespace

class TstAbCli : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;

    QString study(const QString& name) const { return dir_.filePath(name); }
    // fragscope ab -o STUDY [options] -- python3 gen_frames.py --out {run} [gen]
    fstest::CliResult ab(const QString& name, const QStringList& options, const QStringList& gen,
                         const QProcessEnvironment& env = {})
    {
        QStringList args{"ab", "-o", study(name)};
        args << options << "--" << python() << generator() << "--out"
             << "{run}" << gen;
        return runCliIn({}, args, env);
    }

private slots:
    // One study, two collapses: frame 7 breaks only with the caching allocator on and expandable
    // segments off, frame 12 breaks in every arm.
    void followsAllocatorAndNotAllocator()
    {
        const auto r = ab("known", {}, {"--alloc-break", "7", "--content-break", "12"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QJsonObject s = readJson(study("known") + "/study.json");
        QCOMPARE(s["format"].toString(), QString("fragscope-study"));
        QCOMPARE(s["schema_version"].toInt(), 1);
        QStringList arms;
        for (const auto& a : s["arms"].toArray())
            arms << a.toObject()["name"].toString();
        QCOMPARE(arms, QStringList({"baseline", "repeat", "no-caching", "expandable"}));
        QCOMPARE(s["collapses"].toArray().size(), 2);
        const QJsonObject c7 = collapseAt(s, 7), c12 = collapseAt(s, 12);
        QCOMPARE(c7["verdict"].toString(), QString("follows_allocator"));
        QCOMPARE(c12["verdict"].toString(), QString("not_allocator"));
        // The figures behind them: the repeat reproduces frame 7 exactly (PSNR null: identical),
        // the allocator arms are far from it and not broken.
        const QJsonObject a7 = c7["arms"].toObject();
        QVERIFY(a7["repeat"].toObject()["bad"].toBool());
        QVERIFY(a7["repeat"].toObject()["psnr_db"].isNull());
        for (const char* arm : {"no-caching", "expandable"}) {
            const QJsonObject o = a7[arm].toObject();
            QVERIFY2(!o["bad"].toBool() && o["normal"].toBool(), arm);
            QVERIFY(o["psnr_db"].toDouble() < 20);
            QVERIFY(o["ssim"].toDouble() < 0.5);
        }
        for (const char* arm : {"repeat", "no-caching", "expandable"})
            QVERIFY2(c12["arms"].toObject()[arm].toObject()["bad"].toBool(), arm);
        QVERIFY(s["noise_floor"].toObject()["identical"].toBool());
        const QJsonObject base = runOf(s, "baseline-1");
        QCOMPARE(base["exit_status"].toInt(), 0);
        QCOMPARE(base["frames"].toInt(), 16);
        QCOMPARE(base["metrics"].toArray().size(), 15); // frames 1-15 (frame 0 has no pair)
        QCOMPARE(runOf(s, "expandable-1")["vs_baseline"].toArray().size(), 16);
        // Thumbnails of every frame, for the GUI.
        QVERIFY(QFileInfo::exists(study("known") + "/fragscope/thumbs/expandable-1/0007.jpg"));
        // The environment of each arm as it was set.
        QCOMPARE(s["arms"]
                     .toArray()[2]
                     .toObject()["env"]
                     .toObject()["PYTORCH_NO_CUDA_MEMORY_CACHING"]
                     .toString(),
                 QString("1"));
        QVERIFY2(r.out.contains("frame 7: follows_allocator") &&
                     r.out.contains("frame 12: not_allocator"),
                 r.out.constData());

        // export frames draws frame 7 of every run for a report.
        const QString strip = study("known") + "-frame7.png";
        const auto ex = runCliIn({}, {"export", "frames", study("known"), "-o", strip});
        QVERIFY2(ex.exitCode == 0, ex.err.constData());
        QVERIFY2(ex.out.contains("frame 7 of the study's runs"), ex.out.constData());
        QVERIFY(QImage(strip).width() >= 4 * 64);
        const auto noFrame =
            runCliIn({}, {"export", "frames", study("known"), "--frame", "99", "-o", strip});
        QCOMPARE(noFrame.exitCode, 64);

        // --report prints the same summary again.
        const auto rep = runCliIn({}, {"ab", "--report", study("known")});
        QCOMPARE(rep.exitCode, 0);
        QVERIFY(r.out.startsWith(rep.out));
        QVERIFY(!rep.out.isEmpty());
    }

    // Seeded noise: every run breaks at another frame and no two runs are equal.
    void notReproducible()
    {
        const auto r = ab("noise", {}, {"--nondeterministic"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QJsonObject s = readJson(study("noise") + "/study.json");
        const QJsonArray cs = s["collapses"].toArray();
        QCOMPARE(cs.size(), 1);
        QCOMPARE(cs[0].toObject()["verdict"].toString(), QString("not_reproducible"));
        QVERIFY(!cs[0].toObject()["arms"].toObject()["repeat"].toObject()["bad"].toBool());
        QVERIFY(cs[0].toObject()["reason"].toString().contains("cannot tell"));
        const QJsonObject noise = s["noise_floor"].toObject();
        QVERIFY(!noise["identical"].toBool());
        QVERIFY(noise["psnr_min_db"].toDouble() > 30); // +-1 grey level of noise
    }

    void commandNotFound()
    {
        const auto r = runCliIn({}, {"ab", "-o", study("notfound"), "--arms", "expandable", "--",
                                     "fragscope-no-such-command", "{run}"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("baseline-1: command not found: fragscope-no-such-command (exit "
                                "status 127)"),
                 r.err.constData());
        const QJsonObject s = readJson(study("notfound") + "/study.json");
        QCOMPARE(runOf(s, "baseline-1")["exit_status"].toInt(), 127);
        QVERIFY(s["problem"].toString().contains("baseline-1"));
        QVERIFY(s["collapses"].toArray().isEmpty());
    }

    // A run that fails is marked with its exit status and last stderr lines; the study goes on
    // and judges with the arms that worked.
    void failedRun()
    {
        const auto r = ab("failed", {}, {"--alloc-break", "7", "--no-caching", "fail"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("no-caching-1: the command failed: exit status 3"),
                 r.err.constData());
        const QJsonObject s = readJson(study("failed") + "/study.json");
        const QJsonObject run = runOf(s, "no-caching-1");
        QCOMPARE(run["exit_status"].toInt(), 3);
        QVERIFY(run["stderr_tail"].toArray().last().toString().contains("out of memory"));
        QCOMPARE(collapseAt(s, 7)["verdict"].toString(), QString("follows_allocator"));
        QVERIFY(collapseAt(s, 7)["arms"]
                    .toObject()["no-caching"]
                    .toObject()["runs"]
                    .toArray()
                    .isEmpty());
    }

    void runWritesNoVideo()
    {
        const auto r = ab("novideo", {"--arms", "no-caching"}, {"--no-caching", "nothing"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("no-caching-1: wrote no video in"), r.err.constData());
        const QJsonObject s = readJson(study("novideo") + "/study.json");
        QVERIFY(runOf(s, "no-caching-1")["error"].toString().contains("wrote no video"));
        QCOMPARE(runOf(s, "repeat-1")["frames"].toInt(), 16);
    }

    void otherFrameCount()
    {
        const auto r = ab("short", {"--arms", "no-caching"}, {"--no-caching", "short"});
        QCOMPARE(r.exitCode, 1);
        QVERIFY2(r.err.contains("no-caching-1: 14 frames, the baseline's video has 16"),
                 r.err.constData());
        QVERIFY(QFileInfo::exists(study("short") + "/study.json"));
    }

    // A folder with other files is refused before anything runs, and left as it was.
    void studyFolderHoldsSomethingElse()
    {
        QDir().mkpath(study("busy"));
        QFile f(study("busy") + "/notes.txt");
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write("mine");
        f.close();
        const auto r = ab("busy", {}, {});
        QCOMPARE(r.exitCode, 64);
        QVERIFY2(r.err.contains("holds other files (notes.txt"), r.err.constData());
        QCOMPARE(QDir(study("busy")).entryList(QDir::NoDotAndDotDot | QDir::AllEntries),
                 QStringList({"notes.txt"}));
        // A study folder is refused too, and --report reads it.
        const auto again = ab("known2", {"--arms", "expandable"}, {"--frames", "12"});
        QCOMPARE(again.exitCode, 0);
        const auto twice = ab("known2", {"--arms", "expandable"}, {"--frames", "12"});
        QCOMPARE(twice.exitCode, 64);
        QVERIFY(twice.err.contains("holds a study already"));
        const auto notStudy = runCliIn({}, {"ab", "--report", study("busy")});
        QCOMPARE(notStudy.exitCode, 2);
        QVERIFY2(notStudy.err.contains("holds no study.json"), notStudy.err.constData());
    }

    // --arm with a comma inside a value, --arms choosing it alone; expandable keeps the
    // environment's own allocator settings.
    void userArmsAndEnvironment()
    {
        QProcessEnvironment env;
        env.insert("PYTORCH_CUDA_ALLOC_CONF", "max_split_size_mb:64");
        env.insert("PYTORCH_ALLOC_CONF", "");
        const auto r = ab("user",
                          {"--arm",
                           "big:PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:128,expandable_"
                           "segments:True,CUBLAS_WORKSPACE_CONFIG=:4096:8",
                           "--arms", "big,expandable"},
                          {"--alloc-break", "5", "--frames", "12"}, env);
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QJsonObject s = readJson(study("user") + "/study.json");
        QStringList arms;
        QJsonObject big, expandable;
        for (const auto& a : s["arms"].toArray()) {
            arms << a.toObject()["name"].toString();
            if (arms.last() == "big") big = a.toObject()["env"].toObject();
            if (arms.last() == "expandable") expandable = a.toObject()["env"].toObject();
        }
        QCOMPARE(arms, QStringList({"baseline", "repeat", "expandable", "big"}));
        QCOMPARE(big["PYTORCH_CUDA_ALLOC_CONF"].toString(),
                 QString("max_split_size_mb:128,expandable_segments:True"));
        QCOMPARE(big["CUBLAS_WORKSPACE_CONFIG"].toString(), QString(":4096:8"));
        QCOMPARE(expandable["PYTORCH_CUDA_ALLOC_CONF"].toString(),
                 QString("max_split_size_mb:64,expandable_segments:True"));
        QCOMPARE(expandable["PYTORCH_ALLOC_CONF"].toString(),
                 QString("max_split_size_mb:64,expandable_segments:True"));
        QCOMPARE(collapseAt(s, 5)["verdict"].toString(), QString("follows_allocator"));
        QVERIFY(collapseAt(s, 5)["arms"].toObject()["big"].toObject()["normal"].toBool());

        const auto bad =
            runCliIn({}, {"ab", "-o", study("bad-arm"), "--arms", "nope", "--", "true"});
        QCOMPARE(bad.exitCode, 64);
        QVERIFY(bad.err.contains("no arm 'nope'"));
    }

    // --repeat 2: every arm twice; the second baseline run counts as a repeat, and the noise
    // floor pools every unchanged run's healthy frames (3 runs x 11 frames).
    void repeatTwice()
    {
        const auto r = ab("twice", {"--repeat", "2", "--arms", "expandable"},
                          {"--frames", "12", "--alloc-break", "5"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QJsonObject s = readJson(study("twice") + "/study.json");
        for (const char* run : {"baseline-2", "repeat-2", "expandable-2"})
            QVERIFY2(runOf(s, run)["frames"].toInt() == 12, run);
        QCOMPARE(s["noise_floor"].toObject()["samples"].toInt(), 33);
        const QJsonObject c = collapseAt(s, 5);
        QCOMPARE(c["verdict"].toString(), QString("follows_allocator"));
        QCOMPARE(c["arms"].toObject()["expandable"].toObject()["runs"].toArray().size(), 2);
        QCOMPARE(c["arms"].toObject()["baseline"].toObject()["runs"].toArray().size(), 1);
    }

    // Ctrl-C during the repeat: its whole process group is stopped, the study is written with
    // the baseline that finished.
    void interrupted()
    {
        const QString script =
            QString("if [ \"$FRAGSCOPE_AB_ARM\" = repeat ]; then sleep 60 & echo $! > "
                    "\"$FRAGSCOPE_RUN_DIR/sleeper\"; wait; else %1 %2 --frames 12 --alloc-break "
                    "5; fi")
                .arg(python(), generator());
        QProcess p;
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert("FRAGSCOPE_NO_PROGRESS", "1");
        p.setProcessEnvironment(env);
        p.start(FRAGSCOPE_CLI, {"ab", "-o", study("stop"), "--", "sh", "-c", script});
        const QString sleeper = study("stop") + "/repeat-1/sleeper";
        for (int i = 0; i < 300 && !QFileInfo::exists(sleeper); ++i)
            QTest::qWait(50);
        QTest::qWait(100);
        QVERIFY(QFileInfo::exists(sleeper));
        QFile f(sleeper);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const pid_t sleepPid = f.readAll().trimmed().toInt();
        QVERIFY(sleepPid > 0);
        ::kill(static_cast<pid_t>(p.processId()), SIGINT);
        QVERIFY(p.waitForFinished(20000));
        QCOMPARE(p.exitCode(), 130);
        QTest::qWait(100);
        QVERIFY2(gone(sleepPid), "the command's process group was not stopped");
        const QJsonObject s = readJson(study("stop") + "/study.json");
        QVERIFY(s["interrupted"].toBool());
        QCOMPARE(runOf(s, "baseline-1")["frames"].toInt(), 12);
        QVERIFY(!runOf(s, "repeat-1")["ran"].toBool());
        QVERIFY(runOf(s, "no-caching-1").isEmpty()); // never started
        QCOMPARE(collapseAt(s, 5)["verdict"].toString(), QString("undetermined"));
    }
};

QTEST_GUILESS_MAIN(TstAbCli)
#include "tst_ab_cli.moc"
