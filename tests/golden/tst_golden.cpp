// Golden outputs: the text and JSON of info, state, report, collapse, whatif, compare and export
// timeline on three fixed generated sessions, compared byte for byte with the files under
// tests/golden/ (docs/json.md names every JSON field). A changed output is a reviewed diff:
// scripts/update-golden.sh rewrites the files (FRAGSCOPE_UPDATE_GOLDEN=1), `git diff` shows it.
//
// Sessions: `sim` (`fragscope simulate`, small, fixed seed), `built` (hand-built here: OOMs, a
// private pool, a collapse with a kernel-variant shift), `snap` (the generated PyTorch snapshot
// fixture multi-device.pickle, imported). The commands run in a temporary folder on relative
// names, with a fixed environment (C locale, no user settings), so nothing in an output depends
// on the machine.
#include "builder.h"
#include "testutil.h"

#include "core/json.h"

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QRegularExpression>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>

using namespace fs;
using namespace antest;

namespace {

QString goldenDir()
{
    return QStringLiteral(FRAGSCOPE_SOURCE_DIR) + "/tests/golden";
}

bool updating()
{
    return qEnvironmentVariableIntValue("FRAGSCOPE_UPDATE_GOLDEN") == 1;
}

// The hand-built session: device 0 (64 MiB), a default-pool segment of 8 MiB and a private
// pool (1, 5) segment of 4 MiB; frames 0-5 a second apart, coherence_score 0.9 except frames
// 3 and 4 (one collapse); an OOM in frame 3; gemm kernels that switch variant in frame 3.
void buildSession(const std::string& path)
{
    constexpr int64_t ms = 1'000'000; // times below in ms
    IngestOptions o = options(path);
    Ingest in(o);
    in.begin();
    DeviceInfo d;
    d.id = 0;
    d.name = "golden GPU";
    d.capacityBytes = 64 * MiB;
    in.addDevice(d);
    in.add(ev(EventType::RegionCreate, 0, kBase, 8 * MiB));
    Event priv = ev(EventType::RegionCreate, 0, kBase + 64 * MiB, 4 * MiB);
    priv.aux = uint64_t{1} << 32 | 5;
    in.add(priv);
    const double coherence[] = {0.9, 0.92, 0.91, 0.01, 0.02, 0.9};
    for (int f = 0; f < 6; ++f) {
        const int64_t t = 1000 * (f + 1);
        mark(in, t * ms, "frame " + std::to_string(f));
        mark(in, (t + 900) * ms,
             "metric coherence_score=" + std::to_string(coherence[f]) +
                 " frame=" + std::to_string(f));
        kernel(in, (t + 400) * ms, (t + 500) * ms,
               f == 3 || f == 4 ? "gemm_fallback_kernel" : "gemm_fast_kernel");
    }
    auto alloc = [&](int64_t t, uint64_t off, uint64_t size) {
        in.add(ev(EventType::Alloc, t * ms, kBase + off, size));
    };
    auto release = [&](int64_t t, uint64_t off) {
        in.add(ev(EventType::Free, t * ms, kBase + off));
    };
    alloc(1100, 0, 1 * MiB);
    alloc(1200, 1 * MiB, 2 * MiB);
    alloc(1300, 64 * MiB, 1 * MiB); // private pool
    release(1800, 1 * MiB);
    alloc(2100, 1 * MiB, 1 * MiB);
    alloc(2200, 2 * MiB, 512 * KiB);
    release(2800, 0);
    alloc(3100, 3 * MiB, 2 * MiB);
    release(3200, 1 * MiB);
    Event oom = ev(EventType::Oom, 4100 * ms, 0, 8 * MiB);
    oom.aux = 512 * KiB; // device free as recorded
    in.add(oom);
    alloc(4200, 5 * MiB, 256 * KiB);
    release(5100, 3 * MiB);
    alloc(5200, 0, 256 * KiB);
    release(6100, 2 * MiB);
    alloc(6200, 65 * MiB, 1 * MiB); // private pool
    mark(in, 7000 * ms, "end");
    in.end();
}

// Adds to missing every key of v (recursively) that is not in documented, as "file: path.key".
// Keys under "devices" (device ids), "metrics" (a frame's own metric names) and "anomalies"
// (anomaly kinds) are data, not field names.
void undocumented(const QJsonValue& v, const QString& path, const QSet<QString>& documented,
                  QStringList& missing)
{
    if (v.isArray()) {
        for (const QJsonValue& x : v.toArray())
            undocumented(x, path + "[]", documented, missing);
        return;
    }
    if (!v.isObject()) return;
    const QJsonObject o = v.toObject();
    const bool data =
        path.endsWith(".devices") || path.endsWith(".metrics") || path.endsWith(".anomalies");
    for (auto it = o.begin(); it != o.end(); ++it) {
        if (!data && !documented.contains(it.key())) missing << path + "." + it.key();
        undocumented(it.value(), path + "." + it.key(), documented, missing);
    }
}

} // namespace

class TstGolden : public QObject
{
    Q_OBJECT
private:
    QTemporaryDir dir_;
    bool snapshot_ = false; // python3 made the snapshot fixture

    // The CLI in the session folder, in the C locale, without user settings.
    fstest::CliResult run(const QStringList& args)
    {
        QProcessEnvironment env;
        env.insert("LC_ALL", "C");
        env.insert("TZ", "UTC");
        env.insert("FRAGSCOPE_SETTINGS", dir_.filePath("no-user-settings.json"));
        return fstest::runCliIn(dir_.path(), args, env, 300000);
    }

    // Compares actual with tests/golden/name (or writes it when updating); on a difference,
    // prints `diff -u expected actual` and fails.
    void check(const QString& name, const QByteArray& actual)
    {
        const QString expected = goldenDir() + "/" + name;
        if (updating()) {
            QDir().mkpath(QFileInfo(expected).path());
            QFile f(expected);
            QVERIFY2(f.open(QIODevice::WriteOnly) && f.write(actual) == actual.size(),
                     qPrintable(expected));
            return;
        }
        QFile f(expected);
        QVERIFY2(f.open(QIODevice::ReadOnly),
                 qPrintable(expected + " is missing: run scripts/update-golden.sh"));
        if (f.readAll() == actual) return;
        const QString got = dir_.filePath(QString(name).replace('/', '_') + ".actual");
        QFile out(got);
        QVERIFY(out.open(QIODevice::WriteOnly));
        out.write(actual);
        out.close();
        QProcess diff;
        diff.start("diff", {"-u", expected, got});
        diff.waitForFinished(30000);
        QByteArray text = diff.readAllStandardOutput();
        if (text.isEmpty()) text = "(diff not available) got:\n" + actual.left(4000);
        if (text.size() > 20000) text = text.left(20000) + "\n... (diff cut)\n";
        qWarning().noquote() << "\n" << text;
        QFAIL(qPrintable(name +
                         " differs from its golden file (diff above). If the change is meant, "
                         "run scripts/update-golden.sh and review `git diff tests/golden`."));
    }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        auto ok = [](const fstest::CliResult& r) {
            return r.exitCode == 0 ? QByteArray() : r.err + r.out;
        };
        QByteArray err = ok(run({"simulate", "-o", "sim.fragscope", "--frames", "6", "--steps", "3",
                                 "--seed", "7", "--capacity", "40G"}));
        QVERIFY2(err.isEmpty(), err.constData());
        buildSession(dir_.filePath("built.fragscope").toStdString());
        const QString python = QStandardPaths::findExecutable("python3");
        if (!python.isEmpty()) {
            QProcess py;
            py.start(python, {QStringLiteral(FRAGSCOPE_SOURCE_DIR) +
                                  "/tests/import/gen_snapshot_fixtures.py",
                              dir_.path()});
            QVERIFY2(py.waitForFinished(60000) && py.exitCode() == 0,
                     py.readAllStandardError().constData());
            err = ok(run({"import", "multi-device.pickle", "-o", "snap.fragscope"}));
            QVERIFY2(err.isEmpty(), err.constData());
            snapshot_ = true;
        }
    }

    // Every field of every golden JSON output is named in docs/json.md (in backquotes), so the
    // one page that documents them cannot fall behind an output.
    void everyFieldDocumented()
    {
        QFile doc(QStringLiteral(FRAGSCOPE_SOURCE_DIR) + "/docs/json.md");
        QVERIFY(doc.open(QIODevice::ReadOnly));
        QSet<QString> documented;
        const QString text = QString::fromUtf8(doc.readAll());
        static const QRegularExpression quoted("`([^`]*)`"), word("[a-z_][a-z_0-9]*");
        for (auto q = quoted.globalMatch(text); q.hasNext();)
            for (auto w = word.globalMatch(q.next().captured(1)); w.hasNext();)
                documented.insert(w.next().captured(0));
        QVERIFY(documented.contains("schema_version"));
        QStringList missing;
        int files = 0;
        for (QDirIterator it(goldenDir(), {"*.json"}, QDir::Files, QDirIterator::Subdirectories);
             it.hasNext();) {
            QFile f(it.next());
            QVERIFY(f.open(QIODevice::ReadOnly));
            QJsonParseError err;
            const QJsonDocument d = QJsonDocument::fromJson(f.readAll(), &err);
            QVERIFY2(err.error == QJsonParseError::NoError, qPrintable(f.fileName()));
            QVERIFY2(d.object()["schema_version"].toInt() == kJsonSchemaVersion,
                     qPrintable(f.fileName()));
            undocumented(d.object(), QDir(goldenDir()).relativeFilePath(f.fileName()) + ":",
                         documented, missing);
            ++files;
        }
        QVERIFY(files >= 10);
        QVERIFY2(missing.isEmpty(), qPrintable("not in docs/json.md: " + missing.join(", ")));
    }

    void outputs_data()
    {
        QTest::addColumn<QString>("name");     // golden file, under tests/golden/
        QTest::addColumn<QStringList>("args"); // the command
        QTest::addColumn<QString>("file");     // the output to compare: stdout when empty
        auto row = [](const QString& name, const QStringList& args, const QString& file = {}) {
            QTest::newRow(qPrintable(name)) << name << args << file;
        };
        for (const char* c : {"sim", "built", "snap"}) {
            const QString s = QString("%1.fragscope").arg(c);
            const QString dir = QString(c) + "/";
            row(dir + "info.txt", {"info", s});
            row(dir + "info.json", {"info", s, "--json"});
            row(dir + "state.txt", {"state", s, "--at", "end", "--pools"});
            row(dir + "state.json", {"state", s, "--at", "end", "--pools", "--json"});
            row(dir + "report.txt", {"report", s});
            row(dir + "report.json", {"report", s, "--json"});
            row(dir + "timeline.csv", {"export", "timeline", s, "-o", "tl.csv", "--step", "1/25"},
                "tl.csv");
            row(dir + "timeline.json", {"export", "timeline", s, "-o", "tl.json", "--step", "1/25"},
                "tl.json");
        }
        // collapse: the built session's collapse (frames 3-4), the simulated run's (frames 2-5),
        // and a frame of the snapshot (no collapse there: --any).
        row("built/collapse.txt", {"collapse", "built.fragscope", "--frame", "3"});
        row("built/collapse.json", {"collapse", "built.fragscope", "--frame", "3", "--json"});
        row("sim/collapse.txt", {"collapse", "sim.fragscope", "--frame", "2"});
        row("sim/collapse.json", {"collapse", "sim.fragscope", "--frame", "2", "--json"});
        row("snap/collapse.txt", {"collapse", "snap.fragscope", "--frame", "1", "--any"});
        // whatif (the last run kept for compare), then compare the run with its replay.
        row("sim/whatif.txt", {"whatif", "sim.fragscope", "--alloc-conf",
                               "expandable_segments:True", "-o", "sim-whatif.fragscope"});
        row("sim/whatif.json",
            {"whatif", "sim.fragscope", "--alloc-conf", "max_split_size_mb:64", "--json"});
        row("snap/whatif.json", {"whatif", "snap.fragscope", "--json"});
        row("sim/compare.txt", {"compare", "sim.fragscope", "sim-whatif.fragscope"});
        row("sim/compare.json", {"compare", "sim.fragscope", "sim-whatif.fragscope", "--json"});
        row("built/compare.json",
            {"compare", "built.fragscope", "snap.fragscope", "--samples", "8", "--json"});
    }

    void outputs()
    {
        QFETCH(QString, name);
        QFETCH(QStringList, args);
        QFETCH(QString, file);
        if (!snapshot_ && args.join(' ').contains("snap."))
            QSKIP("python3 not found: the snapshot fixture cannot be generated");
        // --step 1/25: a 25th of the session's span (the sessions' spans differ by orders).
        const int step = static_cast<int>(args.indexOf("1/25"));
        if (step >= 0) {
            const fstest::CliResult info = run({"info", args[2], "--json"});
            const QByteArray span = info.out.mid(info.out.indexOf("\"time_span_ns\": ") + 16);
            args[step] = QString::number(span.left(span.indexOf(',')).toLongLong() / 25) + "ns";
        }
        const fstest::CliResult r = run(args);
        QVERIFY2(r.exitCode == 0, (r.err + r.out).constData());
        if (file.isEmpty()) {
            check(name, r.out);
            return;
        }
        QFile f(dir_.filePath(file));
        QVERIFY(f.open(QIODevice::ReadOnly));
        check(name, f.readAll());
    }
};

QTEST_GUILESS_MAIN(TstGolden)
#include "tst_golden.moc"
