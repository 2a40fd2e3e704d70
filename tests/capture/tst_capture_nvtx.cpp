// The agent as an NVTX tool, end to end without a GPU: `fragscope record` runs nvtx_workload (a
// sub-allocator reporting through the NVTX memory extension, frames as ranges, metric marks) with
// the agent loaded through NVTX_INJECTION64_PATH only, and the session must hold exactly what the
// program did.
#include "core/store/sqlite.h"
#include "testutil.h"

#include <QProcess>
#include <QTemporaryDir>
#include <QTest>
#include <sqlite3.h>

namespace {

int64_t q(const fs::Db& db, const char* sql)
{
    return db.scalar(sql, -1);
}

} // namespace

class TestCaptureNvtx : public QObject
{
    Q_OBJECT
    QTemporaryDir tmp_;

private slots:
    void initTestCase()
    {
        QVERIFY(tmp_.isValid());
        // Every process of this test shares a private socket directory.
        qputenv("FRAGSCOPE_SOCKET_DIR", (tmp_.path() + "/sockets").toLocal8Bit());
    }

    void recordedSessionEqualsWhatTheProgramDid_data()
    {
        QTest::addColumn<QStringList>("args");
        QTest::addColumn<bool>("cudaAfterNvtx");
        QTest::newRow("NVTX only") << QStringList{} << false;
        // The driver's InitializeInjection after NVTX started the agent: without a driver its
        // CUPTI part fails (one line) and the NVTX recording goes on unharmed.
        QTest::newRow("CUDA injection after NVTX, no driver")
            << QStringList{"--cuda-init-after-nvtx"} << true;
    }

    void recordedSessionEqualsWhatTheProgramDid()
    {
        QFETCH(QStringList, args);
        QFETCH(bool, cudaAfterNvtx);
        const QString out = tmp_.path() + "/nvtx-" + QString::number(cudaAfterNvtx) + ".fragscope";
        const auto r =
            fstest::runCli(QStringList{"record", "-o", out, "--", FRAGSCOPE_NVTX_WORKLOAD} + args);
        // Exit 0 also says the program got region handles from the tool (it exits 3 without).
        QVERIFY2(r.exitCode == 0, r.err + r.out);
        QVERIFY2(r.out.contains("nvtx workload done"), r.out);
        QCOMPARE(r.err.count("fragscope-agent["), cudaAfterNvtx ? 2 : 1); // ready (+ CUPTI line)
        QCOMPARE(r.err.count("GPU activity is not recorded, NVTX still is"), cudaAfterNvtx ? 1 : 0);
        QVERIFY(!r.err.contains("agent disabled"));
        fs::Db db(out.toStdString(), SQLITE_OPEN_READONLY);

        // Framework-level allocations (nvtx_workload.cpp):
        //   frames 0-3: 4 regions each of 4+8+12+16 KiB = 40960 B -> 16 regions, 163840 B
        //   after the reset: 3 regions of 8 KiB                    ->  3 regions,  24576 B
        //   heap B: 1000 B + 2000 B                                ->  2 regions,   3000 B
        //   total 21 allocations, 191416 B.
        QCOMPARE(q(db, "SELECT COUNT(*) FROM allocations WHERE level=2"), 21);
        QCOMPARE(q(db, "SELECT SUM(size) FROM allocations WHERE level=2"), 191416);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM allocations WHERE level<>2"), 0);
        // Frees: 2 per frame by pointer (8), the reset (the 8 KiB and 16 KiB of each frame: 8),
        // the heap unregister (3), one by handle in heap B (1) = 20; the 2000 B region of heap B
        // is still registered at exit.
        QCOMPARE(q(db, "SELECT COUNT(*) FROM allocations WHERE level=2 AND free_ns IS NOT NULL"),
                 20);
        QCOMPARE(q(db, "SELECT size FROM allocations WHERE free_ns IS NULL"), 2000);
        // Freed inside frames by pointer: 4 KiB + 12 KiB per frame = 4 * 16384 B.
        QCOMPARE(q(db, "SELECT COUNT(*) FROM allocations WHERE size IN (4096, 12288)"), 8);
        QCOMPARE(q(db, "SELECT SUM(size) FROM allocations WHERE size IN (4096, 12288)"), 65536);
        // The reset freed the 8 + 16 KiB regions of frames 0-3 all at one instant.
        QCOMPARE(q(db, "SELECT COUNT(*) FROM (SELECT free_ns FROM allocations WHERE size=16384 "
                       "GROUP BY free_ns)"),
                 1);
        // Every region sits in its heap (no outside_region), nothing double or unknown.
        QCOMPARE(q(db, "SELECT COUNT(*) FROM allocations WHERE region_id IS NULL"), 0);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM anomalies WHERE kind<>'alive_at_end'"), 0);

        // Heaps: A (sub-allocator: kind pool=1, 1 MiB, unregistered), B (layout: kind
        // segment=0, 64 KiB, still registered); both framework level.
        QCOMPARE(q(db, "SELECT COUNT(*) FROM regions"), 2);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM regions WHERE level=2"), 2);
        QCOMPARE(q(db, "SELECT size FROM regions WHERE kind=1 AND destroy_ns IS NOT NULL"),
                 1048576);
        QCOMPARE(q(db, "SELECT size FROM regions WHERE kind=0 AND destroy_ns IS NULL"), 65536);
        QCOMPARE(
            QString::fromStdString(db.scalarText(
                "SELECT s.text FROM regions r JOIN strings s ON s.id=r.segment_type WHERE kind=1")),
            QString("pool A"));

        // Frames 0-3 (push/pop) and 4 (start/end), each closed by its range end.
        QCOMPARE(q(db, "SELECT COUNT(*) FROM frames"), 5);
        QCOMPARE(q(db, "SELECT SUM(idx) FROM frames"), 0 + 1 + 2 + 3 + 4);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM frames WHERE end_ns IS NULL OR end_ns < start_ns"), 0);
        // Metrics: coherence_score 0.9/0.8/0.7/0.6 (current frame) and flow_l2_px=1.5 (frame=N)
        // for frames 0-3, coherence_score=0.01 for frame 4: 9 rows.
        QCOMPARE(q(db, "SELECT COUNT(*) FROM frame_metrics"), 9);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM frame_metrics WHERE name='flow_l2_px' AND value=1.5"),
                 4);
        for (int f = 0; f < 4; ++f) {
            auto st = db.prepare(
                "SELECT value FROM frame_metrics WHERE name='coherence_score' AND frame=?");
            st.bind(1, f);
            QVERIFY(st.step());
            QCOMPARE(st.f64(0), 0.9 - 0.1 * f);
        }
        QCOMPARE(q(db, "SELECT CAST(value*100 AS INTEGER) FROM frame_metrics WHERE frame=4"), 1);
        // The regions of frame f were registered inside frame f's range.
        QCOMPARE(q(db, "SELECT COUNT(*) FROM allocations a JOIN frames f ON a.alloc_ns BETWEEN "
                       "f.start_ns AND f.end_ns WHERE a.size=4096"),
                 4);
    }

    void idleAgentStillHandsOutRegionHandles()
    {
        // Under `fragscope launch` the agent is idle until an attach: NVTX calls cost next to
        // nothing and record nothing, but the program still gets its region handles (it exits 3
        // without them).
        const auto r = fstest::runCli({"launch", "--", FRAGSCOPE_NVTX_WORKLOAD});
        QVERIFY2(r.exitCode == 0, r.err + r.out);
        QVERIFY2(r.out.contains("nvtx workload done"), r.out);
        QVERIFY2(r.err.contains("recording agent ready"), r.err);
    }

    void disabledAgentMakesNvtxANoOp()
    {
        // FRAGSCOPE_AGENT_DISABLE=1: InitializeInjectionNvtx2 returns 0, NVTX calls become
        // no-ops (no region handles: the program exits 3), no socket, no output from the agent.
        QProcess p;
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert("NVTX_INJECTION64_PATH", FRAGSCOPE_AGENT_PATH);
        env.insert("FRAGSCOPE_AGENT_DISABLE", "1");
        env.insert("FRAGSCOPE_SOCKET_DIR", tmp_.path() + "/disabled");
        p.setProcessEnvironment(env);
        p.start(FRAGSCOPE_NVTX_WORKLOAD, QStringList{});
        QVERIFY(p.waitForFinished(30000));
        QCOMPARE(p.exitStatus(), QProcess::NormalExit);
        QCOMPARE(p.exitCode(), 3);
        QVERIFY2(!p.readAllStandardError().contains("fragscope-agent"), "the agent spoke");
        QVERIFY(!QDir(tmp_.path() + "/disabled").exists() ||
                QDir(tmp_.path() + "/disabled").isEmpty());
    }
};

QTEST_GUILESS_MAIN(TestCaptureNvtx)
#include "tst_capture_nvtx.moc"
