// Simulated sessions written through Ingest, and `fragscope simulate` itself: the session agrees
// with the simulator's own counters, is identical for the same seed, and `info --json` reads it.
#include "capture/sim/simulator.h"
#include "core/store/debug_query.h"
#include "core/store/ingest.h"
#include "core/store/session.h"
#include "testutil.h"

#include <QDir>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>
#include <algorithm>

using namespace fs;

namespace {

sim::Stats simulateTo(const std::string& path, const sim::Config& cfg)
{
    IngestOptions o;
    o.path = path;
    o.sourceKind = "simulator";
    o.sourcePath = "test";
    o.synthetic = true;
    o.reorderWindowNs = 0;
    Ingest in(o);
    in.begin();
    const sim::Stats st = sim::Simulator(cfg).run(in);
    in.end();
    return st;
}

// Every row of every table as text, sorted, minus the meta keys that name the writing process.
QStringList tableContents(const std::string& path)
{
    Session s = Session::open(path);
    QStringList rows;
    for (const std::string& table : schemaTables()) {
        Stmt st = fs::store::debugQuery(s).prepare("SELECT * FROM " + table);
        QStringList lines;
        while (st.step()) {
            QStringList cols;
            for (int i = 0; i < sqlite3_column_count(st.raw()); ++i)
                cols << (st.isNull(i) ? QStringLiteral("NULL")
                                      : QString::fromStdString(st.text(i)));
            // Per-write values: when and by whom, and the analysis cache's guard (a random nonce,
            // docs/session-format.md "analysis_cache").
            if (table == "meta" && (cols[0] == "created_at" || cols[0] == "writer_pid" ||
                                    cols[0] == "writer_host" || cols[0] == "analysis_guard"))
                continue;
            lines << QString::fromStdString(table) + "|" + cols.join('|');
        }
        lines.sort();
        rows << lines;
    }
    return rows;
}

} // namespace

class TstSimulateSession : public QObject
{
    Q_OBJECT
private:
    QTemporaryDir dir_;
    std::string file(const char* name) const { return (dir_.path() + "/" + name).toStdString(); }

private slots:
    void sessionMatchesSimulator()
    {
        QVERIFY(dir_.isValid());
        const std::string path = file("default.fragscope");
        const sim::Config cfg; // the demo run: 24 frames x 20 steps, seed 17
        const sim::Stats st = simulateTo(path, cfg);
        Session s = Session::open(path);
        const SessionSummary sum = s.summary();
        QVERIFY(sum.synthetic);
        QCOMPARE(sum.sources.front(), std::string("simulator"));
        QCOMPARE(sum.devices.size(), size_t(1));
        QCOMPARE(sum.devices[0].name, cfg.deviceName);
        QCOMPARE(sum.devices[0].capacityBytes, cfg.capacityBytes);
        QCOMPARE(sum.events, st.events);
        QCOMPARE(sum.allocations, st.allocs);
        QCOMPARE(sum.regions, st.segmentsCreated);
        QCOMPARE(sum.kernels, st.kernels);
        QCOMPARE(sum.graphLaunches, st.graphLaunches);
        QCOMPARE(sum.frames, st.frames);
        QCOMPARE(sum.frames, cfg.frames);
        QCOMPARE(sum.frameMetrics, 3 * st.frames);
        QCOMPARE(sum.ooms, st.ooms);
        QCOMPARE(sum.health.anomalyTotal(),
                 0); // nothing alive at the end, no overlap, no stray free
        QCOMPARE(sum.timeBegin, st.timeBegin);
        QCOMPARE(sum.timeEnd, st.timeEnd);
        QCOMPARE(s.meta("sim.seed"), std::string("17"));
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT COUNT(*) FROM allocations WHERE free_ns IS NULL"),
                 st.liveBlocksAtEnd);
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT COUNT(*) FROM regions WHERE destroy_ns IS NULL"),
                 0);
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT COUNT(*) FROM allocations WHERE region_id IS NULL"),
                 0);
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT MAX(size) FROM regions"),
                 fs::store::debugQuery(s).scalar(
                     "SELECT MAX(size) FROM regions WHERE size % 2097152 = 0"));
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT COUNT(*) FROM kernels k JOIN strings t ON k.name = t.id"
                     " WHERE t.text = 'flash_attn_fwd_splitkv_fallback'"),
                 st.fallbackKernels);
        // Per-frame metrics as the simulator computed them, and collapses on the same frames.
        Stmt m = fs::store::debugQuery(s).prepare(
            "SELECT frame, value FROM frame_metrics WHERE name='coherence_score' ORDER BY frame");
        int64_t collapsed = 0;
        while (m.step()) {
            QCOMPARE(m.f64(1), st.perFrame[static_cast<size_t>(m.i64(0))].coherence);
            collapsed += m.f64(1) < sim::kCollapseThreshold;
        }
        QCOMPARE(collapsed, st.collapsedFrames);
        QVERIFY(collapsed >= 1);
        // Each collapsed frame ran the fallback kernel inside its range.
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT COUNT(*) FROM frames f JOIN frame_metrics m ON m.frame = f.idx"
                     " AND m.name = 'coherence_score' AND m.value < 0.05"
                     " WHERE NOT EXISTS (SELECT 1 FROM kernels k JOIN strings t ON k.name = t.id"
                     "  WHERE t.text = 'flash_attn_fwd_splitkv_fallback'"
                     "  AND k.start_ns >= f.start_ns AND k.end_ns <= f.end_ns)"),
                 0);
    }

    // The ground-truth tables (synthetic sessions only, docs/session-format.md) agree with the
    // simulator's own per-frame view and with the events: per frame, the kernels and OOMs the
    // session holds are the ones the truth counts. A 6 GiB device adds OOMs and the math path.
    void groundTruthMatchesEvents_data()
    {
        QTest::addColumn<qint64>("capacityGiB");
        QTest::newRow("80 GiB demo run") << qint64(80);
        QTest::newRow("6 GiB, OOMs") << qint64(6);
    }
    void groundTruthMatchesEvents()
    {
        QFETCH(qint64, capacityGiB);
        sim::Config cfg;
        cfg.capacityBytes = static_cast<uint64_t>(capacityGiB) << 30;
        if (capacityGiB < 80) {
            cfg.frames = 3;
            cfg.steps = 2;
        }
        const std::string path = file("truth.fragscope");
        const sim::Stats st = simulateTo(path, cfg);
        Session s = Session::open(path);
        const Db& db = fs::store::debugQuery(s);
        QCOMPARE(db.scalar("SELECT COUNT(*) FROM sim_truth_frames"),
                 static_cast<int64_t>(st.perFrame.size()));
        int64_t fallbacks = 0, truthOoms = 0;
        for (size_t f = 0; f < st.perFrame.size(); ++f) {
            const sim::FrameStats& fs = st.perFrame[f];
            Stmt row = db.prepare("SELECT attention_calls, workspace_failures, ooms"
                                  " FROM sim_truth_frames WHERE frame = ?1");
            row.bind(1, static_cast<int64_t>(f));
            QVERIFY(row.step());
            QCOMPARE(row.i64(0), int64_t{fs.attentionCalls});
            QCOMPARE(row.i64(1), int64_t{fs.fallbacks});
            QCOMPARE(row.i64(2), int64_t{fs.ooms});
            fallbacks += fs.fallbacks;
            truthOoms += fs.ooms;
            // Every attention fallback ran one counted kernel: their calls add up to the
            // workspace failures.
            Stmt causal = db.prepare("SELECT COALESCE(SUM(calls), 0) FROM sim_truth_kernels"
                                     " WHERE frame = ?1 AND lowers_coherence");
            causal.bind(1, static_cast<int64_t>(f));
            QVERIFY(causal.step());
            QCOMPARE(causal.i64(0), int64_t{fs.fallbacks});
            // OOM events inside the frame's range.
            Stmt ooms = db.prepare("SELECT COUNT(*) FROM ooms o JOIN frames fr ON fr.idx = ?1"
                                   " WHERE o.time_ns >= fr.start_ns AND o.time_ns < fr.end_ns");
            ooms.bind(1, static_cast<int64_t>(f));
            QVERIFY(ooms.step());
            QCOMPARE(ooms.i64(0), int64_t{fs.ooms});
        }
        QCOMPARE(fallbacks, st.fallbackKernels);
        if (capacityGiB < 80) QVERIFY(truthOoms > 0);
        // Each truth row names a kernel that ran exactly that often in the frame.
        Stmt rows = db.prepare(
            "SELECT t.frame, t.kernel, t.calls, (SELECT COUNT(*) FROM kernels k JOIN strings n"
            " ON n.id = k.name JOIN frames fr ON fr.idx = t.frame WHERE n.text = t.kernel AND"
            " k.start_ns >= fr.start_ns AND k.start_ns < fr.end_ns) FROM sim_truth_kernels t");
        int n = 0;
        while (rows.step()) {
            ++n;
            QVERIFY2(rows.i64(2) == rows.i64(3),
                     qPrintable(QString("frame %1 %2: truth %3, kernels %4")
                                    .arg(rows.i64(0))
                                    .arg(QString::fromStdString(rows.text(1)))
                                    .arg(rows.i64(2))
                                    .arg(rows.i64(3))));
        }
        QVERIFY(n > 0);
    }

    void sameSeedSameTables()
    {
        sim::Config cfg;
        cfg.frames = 4;
        cfg.steps = 3;
        cfg.seed = 99;
        const sim::Stats a = simulateTo(file("a.fragscope"), cfg);
        const sim::Stats b = simulateTo(file("b.fragscope"), cfg);
        QCOMPARE(a.eventHash, b.eventHash);
        const QStringList ta = tableContents(file("a.fragscope"));
        const QStringList tb = tableContents(file("b.fragscope"));
        QVERIFY(ta.size() > 1000);
        QCOMPARE(ta.size(), tb.size());
        QVERIFY(ta == tb);
        cfg.seed = 100;
        const sim::Stats c = simulateTo(file("c.fragscope"), cfg);
        QVERIFY(c.eventHash != a.eventHash);
        QVERIFY(tableContents(file("c.fragscope")) != ta);
    }

    void cliSimulateThenInfo()
    {
        const QString path = dir_.path() + "/cli.fragscope";
        const auto r = fstest::runCli(
            {"simulate", "-o", path, "--frames", "5", "--steps", "4", "--seed", "3"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY(r.out.contains("frames"));
        QVERIFY(r.out.contains("collapsed"));
        QVERIFY(r.out.contains("SYNTHETIC"));
        const auto info = fstest::runCli({"info", "--json", path});
        QCOMPARE(info.exitCode, 0);
        QJsonParseError err{};
        const QJsonObject o = QJsonDocument::fromJson(info.out, &err).object();
        QCOMPARE(err.error, QJsonParseError::NoError);
        QCOMPARE(o["synthetic"].toBool(), true);
        QCOMPARE(o["sources"].toArray().first().toString(), QString("simulator"));
        QVERIFY(o["devices"].toArray().first().toObject()["name"].toString().contains("synthetic"));
        QCOMPARE(o["frames"].toInteger(), 5);
        QCOMPARE(o["graph_launches"].toInteger(), 20);
        for (const char* k : {"events", "regions", "allocations", "kernels", "time_span_ns"})
            QVERIFY2(o[k].toInteger() > 0, k);
        QVERIFY(o["health"].toObject()["anomalies"].toObject().isEmpty());
        QCOMPARE(o["health"].toObject()["ended_abruptly"].toBool(), false);
    }

    void cliSameSeedSameFile()
    {
        const QString a = dir_.path() + "/cli_a.fragscope";
        const QString b = dir_.path() + "/cli_b.fragscope";
        for (const QString& p : {a, b})
            QCOMPARE(
                fstest::runCli({"simulate", "-o", p, "--frames", "3", "--steps", "2"}).exitCode, 0);
        QVERIFY(tableContents(a.toStdString()) == tableContents(b.toStdString()));
    }

    void cliTinyCapacityRecordsOoms()
    {
        const QString path = dir_.path() + "/tiny.fragscope";
        const auto r = fstest::runCli(
            {"simulate", "-o", path, "--frames", "2", "--steps", "2", "--capacity", "4G"});
        QCOMPARE(r.exitCode, 0);
        const auto info = fstest::runCli({"info", "--json", path});
        const QJsonObject o = QJsonDocument::fromJson(info.out).object();
        QVERIFY(o["ooms"].toInteger() > 0);
        QVERIFY(o["health"].toObject()["anomalies"].toObject().isEmpty());
    }

    void cliEventsScalesByVideos()
    {
        const QString path = dir_.path() + "/events.fragscope";
        const auto r = fstest::runCli(
            {"simulate", "-o", path, "--frames", "3", "--steps", "2", "--events", "40k"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        const QJsonObject o =
            QJsonDocument::fromJson(fstest::runCli({"info", "--json", path}).out).object();
        QVERIFY(o["events"].toInteger() >= 40000);
        QVERIFY(o["frames"].toInteger() > 3);
        QCOMPARE(o["frames"].toInteger() % 3, 0); // whole videos of 3 frames
        QCOMPARE(o["graph_launches"].toInteger(), 2 * o["frames"].toInteger());
        QVERIFY(o["health"].toObject()["anomalies"].toObject().isEmpty());
    }

    void cliUsageErrors()
    {
        QCOMPARE(fstest::runCli({"simulate"}).exitCode, 64); // no -o
        QCOMPARE(fstest::runCli({"simulate", "-o", dir_.path() + "/x.fragscope", "--frames", "0"})
                     .exitCode,
                 64);
        QCOMPARE(fstest::runCli({"simulate", "-o", dir_.path() + "/x.fragscope", "--steps", "x"})
                     .exitCode,
                 64);
        QCOMPARE(
            fstest::runCli({"simulate", "-o", dir_.path() + "/x.fragscope", "--capacity", "1k"})
                .exitCode,
            64);
        QCOMPARE(fstest::runCli({"simulate", "-o", dir_.path() + "/x.fragscope", "extra"}).exitCode,
                 64);
        QVERIFY(!QFile::exists(dir_.path() + "/x.fragscope"));
        const auto h = fstest::runCli({"simulate", "--help"});
        QCOMPARE(h.exitCode, 0);
        QVERIFY(h.out.contains("--events"));
        QVERIFY(h.out.contains("synthetic"));
    }

    void cliUnwritableOutputFails()
    {
        const auto r = fstest::runCli({"simulate", "-o", dir_.path() + "/no/such/dir/x.fragscope",
                                       "--frames", "1", "--steps", "1"});
        QVERIFY(r.exitCode == 1 || r.exitCode == 2);
        QVERIFY(r.err.contains("no/such/dir"));
    }
};

QTEST_GUILESS_MAIN(TstSimulateSession)
#include "tst_simulate_session.moc"
