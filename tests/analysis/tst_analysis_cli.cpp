// The state, report, collapse and metrics import commands, run as a user runs them; their JSON
// is parsed and checked against the known answers of a hand-built session.
#include "builder.h"
#include "core/json.h"
#include "core/store/debug_query.h"
#include "core/store/session.h"
#include "testutil.h"

#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>
#include <cmath>

using namespace fs;
using namespace antest;
using fstest::runCli;

class TstAnalysisCli : public QObject
{
    Q_OBJECT
private:
    QTemporaryDir dir_;
    QString session_;

    QString file(const char* name, const QByteArray& content)
    {
        const QString p = dir_.path() + "/" + name;
        QFile f(p);
        f.open(QIODevice::WriteOnly);
        f.write(content);
        return p;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(dir_.isValid());
        // Segment of 1 MiB; frames 0..2; at the end: A [0, 256K) and C [512K, 896K) live, so
        // fragments 256 KiB and 128 KiB, F = 1/3, entropy exactly 1 bit.
        session_ = dir_.path() + "/cli.fragscope";
        Ingest in(options(session_.toStdString()));
        in.begin();
        in.add(ev(EventType::RegionCreate, 0, kBase, MiB));
        mark(in, 1000, "frame 0");
        in.add(ev(EventType::Alloc, 1100, kBase, 256 * KiB));
        mark(in, 2000, "frame 1");
        in.add(ev(EventType::Alloc, 2100, kBase + 256 * KiB, 256 * KiB));
        mark(in, 3000, "frame 2");
        in.add(ev(EventType::Alloc, 3100, kBase + 512 * KiB, 384 * KiB));
        in.add(ev(EventType::Free, 3200, kBase + 256 * KiB));
        mark(in, 4000, "end");
        in.end();
    }

    void stateJson()
    {
        const auto r = runCli({"state", session_, "--at", "end", "--json"});
        QCOMPARE(r.exitCode, 0);
        const QJsonObject o = fstest::cliJson(r);
        const QJsonArray states = o["states"].toArray();
        QCOMPARE(states.size(), 1);
        const QJsonObject s = states[0].toObject();
        QCOMPARE(s["level"].toString(), QString("framework"));
        QCOMPARE(s["reserved_bytes"].toDouble(), double(MiB));
        QCOMPARE(s["allocated_bytes"].toDouble(), double(640 * KiB));
        QCOMPARE(s["free_bytes"].toDouble(), double(384 * KiB));
        QCOMPARE(s["fragment_count"].toInt(), 2);
        QCOMPARE(s["largest_free_bytes"].toDouble(), double(256 * KiB));
        QVERIFY(std::fabs(s["fragmentation_ratio"].toDouble() - 1.0 / 3.0) < 1e-12);
        QCOMPARE(s["fragment_entropy_bits"].toDouble(), 1.0);
        const QJsonArray h = s["histogram"].toArray();
        QCOMPARE(h.size(), 2);
        QCOMPARE(h[0].toObject()["lo_bytes"].toDouble(), double(128 * KiB));
        QCOMPARE(h[0].toObject()["hi_bytes"].toDouble(), double(256 * KiB));
        QCOMPARE(h[0].toObject()["count"].toInt(), 1);
        QCOMPARE(h[0].toObject()["bytes"].toDouble(), double(128 * KiB));

        // frame:0 is the end of frame 0 (t = 2000): only A is live -> one 768 KiB fragment.
        const auto f0 = fstest::cliJson(runCli({"state", session_, "--at", "frame:0", "--json"}));
        QCOMPARE(f0["time_ns"].toInteger(), qint64(2000));
        QCOMPARE(f0["states"].toArray()[0].toObject()["largest_free_bytes"].toDouble(),
                 double(768 * KiB));
        // 1.5us from the beginning (t = 0) = 1500 ns: same state as frame 0's end.
        const auto us = fstest::cliJson(
            runCli({"state", session_, "--at", "1.5us", "--json", "--level", "framework"}));
        QCOMPARE(us["time_ns"].toInteger(), qint64(1500));

        // Text output names the figures.
        const auto text = runCli({"state", session_, "--at", "end"});
        QCOMPARE(text.exitCode, 0);
        QVERIFY(text.out.contains("fragmentation F"));
        QVERIFY(text.out.contains("0.333333"));
    }

    void stateErrors()
    {
        QCOMPARE(runCli({"state", session_}).exitCode, 64);                     // no --at
        QCOMPARE(runCli({"state", session_, "--at", "soon"}).exitCode, 64);     // bad TIME
        QCOMPARE(runCli({"state", session_, "--at", "frame:99"}).exitCode, 64); // no such frame
        QCOMPARE(runCli({"state", session_, "--at", "end", "--level", "x"}).exitCode, 64);
        const QString junk = file("junk.fragscope", QByteArray(200, 'x'));
        const auto r = runCli({"state", junk, "--at", "end"});
        QCOMPARE(r.exitCode, 2);
        QVERIFY(r.err.contains("junk.fragscope"));
        QCOMPARE(runCli({"state", "--help"}).exitCode, 0);
    }

    void metricsImportAndCollapse()
    {
        // Copy the session: imports write into it.
        const QString s = dir_.path() + "/metrics.fragscope";
        QVERIFY(QFile::copy(session_, s));

        // A bad row: reported with its line number, nothing written.
        const QString bad =
            file("bad.csv", "frame,metric,value\n0,coherence_score,0.9\n1,coherence_score,abc\n");
        auto r = runCli({"metrics", "import", s, bad});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("line 3"), r.err.constData());
        {
            Session sess = Session::open(s.toStdString());
            QCOMPARE(fs::store::debugQuery(sess).scalar("SELECT COUNT(*) FROM frame_metrics"),
                     int64_t{0});
        }
        // Wide CSV: frame plus one column per metric, an empty cell skipped.
        const QString wide =
            file("wide.csv", "frame,coherence_score,flow_l2_px\n0,0.9,1.0\n1,0.8,\n");
        r = runCli({"metrics", "import", s, wide});
        QCOMPARE(r.exitCode, 0);
        // JSON {"frames": [...]}: the position is the frame; frame 2 collapses (0.009 < 0.05).
        const QString js =
            file("m.json", R"({"frames": [{"coherence_score": 0.9}, {"coherence_score": 0.124},
                                              {"coherence_score": 0.009}]})");
        r = runCli({"metrics", "import", s, js});
        QCOMPARE(r.exitCode, 0);
        {
            Session sess = Session::open(s.toStdString());
            QCOMPARE(fs::store::debugQuery(sess).scalar("SELECT COUNT(*) FROM frame_metrics"),
                     int64_t{4});
            QCOMPARE(fs::store::debugQuery(sess).scalarText(
                         "SELECT source FROM frame_metrics WHERE name='flow_l2_px'"),
                     std::string("wide.csv"));
            QCOMPARE(
                fs::store::debugQuery(sess).scalarText(
                    "SELECT value FROM frame_metrics WHERE frame=1 AND name='coherence_score'"),
                std::string("0.124"));
        }
        // Bad JSON: the line of the problem is named.
        const QString badJson =
            file("bad.json", "[\n {\"coherence_score\": 0.5},\n {\"coherence_score\": \"x\"}\n]\n");
        r = runCli({"metrics", "import", s, badJson});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("line 3"), r.err.constData());

        // collapse --frame 2: frame 2 breaks coherence_score < 0.05. Its window starts at frame 0
        // (1000) and ends at the end of frame 2 (4000). The precursors are the allocations that
        // cut the largest fragment, ranked by evidence.
        r = runCli({"collapse", s, "--frame", "2", "--json"});
        QCOMPARE(r.exitCode, 0);
        const QJsonObject c = fstest::cliJson(r);
        QCOMPARE(c["collapse"].toObject()["first_frame"].toInt(), 2);
        QCOMPARE(c["schema_version"].toInt(), fs::kJsonSchemaVersion);
        QCOMPARE(c["window_begin_ns"].toInteger(), qint64(1000));
        QCOMPARE(c["window_end_ns"].toInteger(), qint64(4000));
        const QJsonArray p = c["precursors"].toArray();
        // A, B and C (at 1100, 2100, 3100) are untagged blocks of the same size class (2^18 B):
        // one signature, folded into one row with count 3, shown as its member closest to the
        // onset that cut the largest block most: C (512K -> 128K, largest effect 0.75). No
        // healthy frame precedes the window, so nothing is measured against a healthy spread
        // (docs/analysis.md "Verdict"): score 0, and the verdict says so.
        QCOMPARE(p.size(), 1);
        QCOMPARE(p[0].toObject()["kind"].toString(), QString("split_largest_fragment"));
        QCOMPARE(p[0].toObject()["role"].toString(), QString("condition"));
        QCOMPARE(p[0].toObject()["mechanism"].toString(), QString("fragmentation"));
        QCOMPARE(p[0].toObject()["time_ns"].toInteger(), qint64(3100));
        QCOMPARE(p[0].toObject()["score"].toDouble(), 0.0);
        QCOMPARE(p[0].toObject()["count"].toInt(), 3);
        const QJsonObject ev = p[0].toObject()["evidence"].toObject();
        QCOMPARE(ev["largest_effect"].toDouble(), 0.75);
        QCOMPARE(ev["largest_drop_bytes"].toDouble(), double(384 * KiB));
        QCOMPARE(ev["closeness"].toDouble(), 1.0);
        QCOMPARE(ev["novelty"].toDouble(), 1.0);
        QCOMPARE(ev["healthy_frames"].toInt(), 0);
        QCOMPARE(ev["feature"].toString(), QString("largest_free_min_bytes"));
        QCOMPARE(ev["stands_out"].toBool(), false);
        const QJsonObject verdict = c["verdict"].toObject();
        QCOMPARE(verdict["allocator_related"].toBool(), false);
        QVERIFY(verdict["mechanism"].isNull());
        QVERIFY(verdict["headline"].toString().startsWith("no allocator precursor stands out"));
        QCOMPARE(verdict["evidence"].toArray().size(), 0);
        const QJsonObject diff = c["state_diff"].toArray()[0].toObject();
        QCOMPARE(diff["before"].toObject()["largest_free_bytes"].toDouble(), double(512 * KiB));
        QCOMPARE(diff["after"].toObject()["largest_free_bytes"].toDouble(), double(256 * KiB));
        // Frame 1 is not in a collapse: exit 1 without --any, 0 with it.
        QCOMPARE(runCli({"collapse", s, "--frame", "1"}).exitCode, 1);
        QCOMPARE(runCli({"collapse", s, "--frame", "1", "--any", "--json"}).exitCode, 0);
        QCOMPARE(runCli({"collapse", s, "--frame", "42"}).exitCode, 1);

        // report --json: health, tracks, frames with metrics, the collapse, correlations with n.
        r = runCli({"report", s, "--json"});
        QCOMPARE(r.exitCode, 0);
        const QJsonObject rep = fstest::cliJson(r);
        QCOMPARE(rep["tracks"].toArray().size(), 1);
        QCOMPARE(rep["frames"].toArray().size(), 3);
        QCOMPARE(rep["collapses"].toArray().size(), 1);
        QCOMPARE(rep["schema_version"].toInt(), fs::kJsonSchemaVersion);
        QCOMPARE(rep["time_begin_ns"].toInteger(), qint64(0));
        QCOMPARE(rep["time_end_ns"].toInteger(), qint64(4000));
        const QJsonObject track = rep["tracks"].toArray()[0].toObject();
        QCOMPARE(track["end_state"].toObject()["fragment_count"].toInt(), 2);
        // The summary (docs/analysis.md "Summary"), over the instants 0, 1100, 2100, 3100, 3200
        // and on to the end at 4000: F is 0 until B's free at 3200 (fragments 256K + 128K, F =
        // 1/3 for 800 of the 4000 ns with memory reserved): mean F = 1/15. Peak allocated A + B
        // + C = 896K at 3100, when the largest free fragment is smallest (128K).
        QCOMPARE(track["peak_reserved_bytes"].toInteger(), qint64(MiB));
        QCOMPARE(track["peak_reserved_at_ns"].toInteger(), qint64(0));
        QCOMPARE(track["peak_allocated_bytes"].toInteger(), qint64(896 * KiB));
        QCOMPARE(track["peak_allocated_at_ns"].toInteger(), qint64(3100));
        QVERIFY(std::fabs(track["mean_fragmentation_ratio"].toDouble() - 1.0 / 15) < 1e-15);
        QCOMPARE(track["max_fragmentation_ratio"].toDouble(), 1.0 - 256.0 / 384.0);
        QCOMPARE(track["max_fragmentation_ratio_at_ns"].toInteger(), qint64(3200));
        QCOMPARE(track["min_largest_free_bytes"].toInteger(), qint64(128 * KiB));
        QCOMPARE(track["min_largest_free_at_ns"].toInteger(), qint64(3100));
        QCOMPARE(track["max_fragment_count"].toInt(), 2);
        QCOMPARE(track["max_fragment_count_at_ns"].toInteger(), qint64(3200));
        QCOMPARE(track["reserved_ns"].toInteger(), qint64(4000));
        QVERIFY(track["peak_allocated_outside_regions_at_ns"].isNull());
        // Frames: frame 2 is in the collapse, frame 0 in none (null).
        const QJsonArray frames = rep["frames"].toArray();
        QCOMPARE(frames[2].toObject()["collapse"].toInt(), 0);
        QVERIFY(frames[0].toObject()["collapse"].isNull());
        QCOMPARE(frames[2].toObject()["frame"].toInt(), 2);
        const QJsonArray corr = rep["correlations"].toArray();
        QVERIFY(!corr.isEmpty());
        for (const auto& v : corr) {
            QVERIFY(v.toObject()["n"].toInt() >= 3);
            // Benjamini-Hochberg never lowers a p-value; significance follows q only; the test
            // is named and its effective sample size never exceeds the changes it had.
            const QJsonObject o = v.toObject();
            QCOMPARE(o["test"].toString(),
                     QStringLiteral("changes, Bartlett n_eff, Pearson+Spearman, lag 0-1"));
            if (o["p"].isNull()) {
                QVERIFY(o["q"].isNull());
                QVERIFY(!o["significant"].toBool());
                continue;
            }
            QVERIFY(o["q"].toDouble() >= o["p"].toDouble());
            QVERIFY(o["n_eff"].toDouble() <= o["n"].toDouble());
            QVERIFY(o["lag"].toInt() == 0 || o["lag"].toInt() == 1);
            QCOMPARE(o["significant"].toBool(), o["q"].toDouble() < 0.05);
        }
        QVERIFY(rep.contains("health"));
        const auto text = runCli({"report", s});
        QCOMPARE(text.exitCode, 0);
        QVERIFY(text.out.contains("COLLAPSE"));
    }
};

QTEST_GUILESS_MAIN(TstAnalysisCli)
#include "tst_analysis_cli.moc"
