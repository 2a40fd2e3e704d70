// What current PyTorch (2.11-2.13) writes into a snapshot, on current.pickle from
// tests/import/gen_snapshot_fixtures.py (pickle protocol 5). Every expected figure is worked out
// below from what the generator writes (sizes in MiB; times in µs in the pickle, ns in the
// session).
//
// Device 0 (stream 0), final segments:
//   S0 0x10000000, 4 MiB: g1 1 allocated (no alloc entry: a ghost block) | x 1
//      active_awaiting_free | 1 inactive | y 1 allocated (FX frames)
//   S1 0x20000000, 2 MiB, pool (1, 7), small: p 0.5 allocated | 1.5 inactive
//   end: reserved 4 + 2 = 6, allocated g1 1 + y 1 + p 0.5 = 2.5, pending x 1, free 6 - 2.5 - 1
//   = 2.5 in 2 fragments (S0's 1 between x and y, S1's 1.5), largest 1.5 MiB.
// Trace (10 entries, allocator_settings: trace_alloc_overflowed True, max_entries 10):
//   100 segment_alloc S1 (pool_id (1, 7)), 102 segment_alloc S2 0x30000000 2 MiB pool_id (2, 9),
//   104 segment_free S2, 105 annotate "step-begin" (no stage: a mark), 110 alloc x
//   (user_metadata {"big": 2**70, "tag": "kv-cache"}), 120 alloc p, 130 free_requested x
//   (never completed: pending to the end), 140/145 annotate "optimizer" START/END (a range),
//   150 alloc y with the FX frame.
//   g1 is alive at the end and has no alloc entry: allocated before the trace (the state at the
//   first entry, 100 µs): 1 ghost block.
// Host (host_segments / host_traces, device 65535 "host (pinned)"): H 0x7f0000000000, 2 MiB:
//   h1 1 allocated | 1 inactive. Trace: 100 segment_alloc H, 115 alloc h1, 125 alloc h2 at
//   H + 1 MiB, 135/136 its free requested/completed. end: reserved 2, allocated 1, free 1 in 1
//   fragment. No overflow flag applies to it (the settings' scalar is the CUDA devices'), no
//   ghost blocks.
// external_annotations: ProfilerStep#0 100..125, ProfilerStep#1 125..155 and no "frame N":
//   the steps are frames 0 and 1.
#include "core/analysis/engine.h"
#include "core/analysis/explore.h"
#include "core/analysis/history.h"
#include "core/store/debug_query.h"
#include "endstate.h"
#include "importtest.h"

#include <QJsonArray>
#include <QTemporaryDir>

using namespace fstest;

namespace {
constexpr qint64 MiB = 1024 * 1024;
constexpr int kHost = 0xffff;
} // namespace

class TestImportSnapshotCurrent : public QObject
{
    Q_OBJECT
    QTemporaryDir tmp_;
    QString file_; // the imported session

private slots:
    void initTestCase()
    {
        const QString generated = fstest::writeSnapshotFixtures(tmp_.path());
        QVERIFY2(generated.isEmpty(), qPrintable(generated));
        QFile f(tmp_.filePath("current.pickle"));
        QVERIFY(f.open(QIODevice::ReadOnly));
        QCOMPARE(f.read(2), QByteArray("\x80\x05", 2)); // protocol 5, as Python 3.14 writes
        file_ = tmp_.filePath("current.fragscope");
        const CliResult r = runCli({"import", tmp_.filePath("current.pickle"), "-o", file_});
        QVERIFY2(r.exitCode == 0, r.err.constData());
    }

    void endState_data()
    {
        QTest::addColumn<int>("device");
        QTest::addColumn<qint64>("reserved");
        QTest::addColumn<qint64>("allocated");
        QTest::addColumn<qint64>("pending");
        QTest::addColumn<qint64>("fragments");
        QTest::addColumn<qint64>("largest");
        // See the file's comment.
        QTest::newRow("device 0") << 0 << 6 * MiB << 2 * MiB + MiB / 2 << MiB << qint64{2}
                                  << MiB + MiB / 2;
        QTest::newRow("host") << kHost << 2 * MiB << MiB << qint64{0} << qint64{1} << MiB;
    }
    void endState()
    {
        QFETCH(int, device);
        QFETCH(qint64, reserved);
        QFETCH(qint64, allocated);
        QFETCH(qint64, pending);
        QFETCH(qint64, fragments);
        QFETCH(qint64, largest);
        const QJsonObject st = stateAt(file_, "end", device);
        QVERIFY(!st.isEmpty());
        QCOMPARE(st["reserved_bytes"].toInteger(), reserved);
        QCOMPARE(st["allocated_bytes"].toInteger(), allocated);
        QCOMPARE(st["pending_free_bytes"].toInteger(), pending);
        QCOMPARE(st["free_bytes"].toInteger(), reserved - allocated - pending);
        QCOMPARE(st["fragment_count"].toInteger(), fragments);
        QCOMPARE(st["largest_free_bytes"].toInteger(), largest);
        // The replay reached the snapshot's state by itself: nothing corrected.
        fs::Session s = fs::Session::open(file_.toStdString());
        for (const auto& w : s.summary().health.warnings)
            QVERIFY2(w.find("corrected") == std::string::npos, w.c_str());
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM anomalies"), int64_t{0});
    }

    void hostIsADeviceOfItsOwn()
    {
        fs::Session s = fs::Session::open(file_.toStdString());
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM devices"), int64_t{2});
        QCOMPARE(QString::fromStdString(fs::store::debugQuery(s).scalarText(
                     "SELECT name FROM devices WHERE id=65535")),
                 QString("host (pinned)"));
        // h1 and h2: two host allocations; h2 freed at 135 µs.
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM allocations WHERE "
                                                 "device=65535 AND free_ns=135000"),
                 int64_t{1});
    }

    void poolIdOfTraceEntries()
    {
        fs::Session s = fs::Session::open(file_.toStdString());
        // S2 lives only in the trace: its pool is the entries' pool_id (2, 9) = 2 << 32 | 9.
        QCOMPARE(
            fs::store::debugQuery(s).scalar("SELECT pool_id FROM regions WHERE address=0x30000000"),
            (int64_t{2} << 32) | 9);
        // S1's from its final segment (1, 7).
        QCOMPARE(
            fs::store::debugQuery(s).scalar("SELECT pool_id FROM regions WHERE address=0x20000000"),
            (int64_t{1} << 32) | 7);
    }

    void awaitingFreeIsPending()
    {
        fs::Session s = fs::Session::open(file_.toStdString());
        // x: its free was requested at 130 µs and never completed (active_awaiting_free).
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT request_ns FROM pending_frees WHERE "
                                                 "address=0x10100000 AND complete_ns IS NULL"),
                 int64_t{130000});
    }

    void userMetadataWithAWideInteger()
    {
        fs::Session s = fs::Session::open(file_.toStdString());
        // 2**70 = 1180591620717411303424 (LONG1 of 9 bytes), kept exactly.
        QCOMPARE(QString::fromStdString(fs::store::debugQuery(s).scalarText(
                     "SELECT t.text FROM allocations a JOIN strings t ON t.id=a.user_metadata "
                     "WHERE a.address=0x10100000")),
                 QString("{\"big\": 1180591620717411303424, \"tag\": \"kv-cache\"}"));
        // Searchable: "meta:kv-cache" matches x alone (one allocation over the run).
        const auto e = fs::analysis::Engine::open(file_.toStdString());
        const fs::analysis::Explorer x(e);
        const auto r = x.search(0, fs::Level::Framework, "meta:KV-cache", 115000);
        QCOMPARE(r.matches, int64_t{1});
        QCOMPARE(r.liveMatches, int64_t{1});
        QCOMPARE(r.rows.size(), size_t{1});
        QCOMPARE(r.rows[0].address, uint64_t{0x10100000});
        QVERIFY(r.rows[0].userMetadata.find("kv-cache") != std::string::npos);
        QCOMPARE(x.search(0, fs::Level::Framework, "meta:nothing", 115000).matches, int64_t{0});
    }

    void ghostBlocks()
    {
        const auto e = fs::analysis::Engine::open(file_.toStdString());
        const fs::analysis::Explorer x(e);
        // At 115 µs: g1 (ghost, placed at 100 µs) and x (allocated at 110) are live on S0.
        const auto b = x.blocksAt(0, fs::Level::Framework, 115000);
        int ghosts = 0, others = 0;
        for (const auto& row : b.rows)
            if (!row.free && !row.pending) (row.ghost ? ghosts : others)++;
        QCOMPARE(ghosts, 1);
        QCOMPARE(others, 1);
    }

    void historyInInfo()
    {
        const CliResult r = runCli({"info", file_, "--json"});
        QCOMPARE(r.exitCode, 0);
        const QJsonArray h = QJsonDocument::fromJson(r.out).object()["history"].toArray();
        QCOMPARE(h.size(), qsizetype{2});
        // Device 0: overflowed, 10 entries at most, g1 the one ghost block.
        QCOMPARE(h[0].toObject()["device"].toInt(), 0);
        QCOMPARE(h[0].toObject()["truncated"].toBool(), true);
        QCOMPARE(h[0].toObject()["max_entries"].toInteger(), qint64{10});
        QCOMPARE(h[0].toObject()["ghost_blocks"].toInteger(), qint64{1});
        // The host: not said to overflow, no ring-buffer size, no ghost block.
        QCOMPARE(h[1].toObject()["device"].toInt(), kHost);
        QCOMPARE(h[1].toObject()["truncated"].toBool(), false);
        QVERIFY(h[1].toObject()["max_entries"].isNull());
        QCOMPARE(h[1].toObject()["ghost_blocks"].toInteger(), qint64{0});
        const CliResult text = runCli({"info", file_});
        QVERIFY(text.out.contains("history       device 0: TRUNCATED"));
        // The GUI's status line: the same history, in a few words (and nothing for the host).
        const auto hist =
            fs::analysis::traceHistory(fs::Session::open(file_.toStdString()).summary().meta);
        QCOMPARE(hist.size(), size_t{2});
        QCOMPARE(fs::analysis::historyBadge(hist[0]),
                 std::string("device 0: history TRUNCATED, 1 ghost block"));
        QVERIFY(fs::analysis::historyBadge(hist[1]).empty());
        const CliResult rep = runCli({"report", file_});
        QVERIFY(rep.out.contains("note: device 0: the allocator history is truncated (the "
                                 "trace's ring buffer of 10 entries overflowed)"));
        // The what-if's fidelity verdict says so, and leaves the host device out (its allocator
        // is not the CUDA caching allocator the model follows).
        const CliResult w = runCli({"whatif", file_});
        QCOMPARE(w.exitCode, 0);
        QVERIFY(w.out.contains("verdict: not a replay of the whole run: the allocator history is "
                               "truncated"));
        QVERIFY(w.out.contains("fidelity, device 0:"));
        QVERIFY(!w.out.contains("fidelity, device 65535"));
    }

    void markersAndSteps()
    {
        fs::Session s = fs::Session::open(file_.toStdString());
        const auto& q = fs::store::debugQuery(s);
        // annotate "step-begin": a mark at 105 µs; "optimizer": a range 140..145 µs.
        QCOMPARE(q.scalar("SELECT m.time_ns FROM markers m JOIN strings t ON t.id=m.message "
                          "WHERE t.text='step-begin' AND m.end_ns IS NULL"),
                 int64_t{105000});
        QCOMPARE(q.scalar("SELECT m.time_ns*1000000+m.end_ns FROM markers m JOIN strings t"
                          " ON t.id=m.message WHERE t.text='optimizer'"),
                 int64_t{140000} * 1000000 + 145000);
        // ProfilerStep#0/1 are frames 0 and 1 (no "frame N" annotation).
        QCOMPARE(q.scalar("SELECT count(*) FROM frames"), int64_t{2});
        QCOMPARE(q.scalar("SELECT start_ns*1000000+end_ns FROM frames WHERE idx=1"),
                 int64_t{125000} * 1000000 + 155000);
    }

    void fxFramesShowTheModelLineFirst()
    {
        fs::Session s = fs::Session::open(file_.toStdString());
        auto q = fs::store::debugQuery(s).prepare(
            "SELECT t.text FROM allocations a JOIN stacks k ON k.id=a.stack JOIN strings t ON "
            "t.id=k.frame WHERE a.address=0x10300000 ORDER BY k.depth");
        QStringList frames;
        while (q.step())
            frames << QString::fromStdString(q.text(0));
        QCOMPARE(frames, QStringList({"forward (model.py:12)",
                                      "call [fx node=addmm, op=call_function, "
                                      "target=aten.addmm.default] (/tmp/torchinductor/cxy.py:88)",
                                      "<module> (train.py:7)"}));
    }
};

QTEST_GUILESS_MAIN(TestImportSnapshotCurrent)
#include "tst_import_snapshot_current.moc"
