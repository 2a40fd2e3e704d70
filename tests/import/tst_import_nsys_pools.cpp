// Nsight Systems CUDA_GPU_MEMORY_POOL_EVENTS: memory pools become pool-level regions holding the
// cudaMallocAsync blocks, with known answers worked out below, on nsys-shaped files built here
// (the export's table and column names; the enum ids deliberately differ from the defaults so the
// ENUM_CUDA_MEMPOOL_OPER labels are what the importer goes by).
#include "core/store/debug_query.h"
#include "importtest.h"

#include "core/analysis/engine.h"

#include <QTemporaryDir>

#include <cmath>
#include <fmt/format.h>

using namespace fstest;
using namespace fs;

namespace {

constexpr uint64_t KiB = 1024, MiB = 1024 * 1024;
constexpr uint64_t kPoolA = 0x7f0010000000ull; // device 0, created, trimmed, destroyed
constexpr uint64_t kPoolB = 0x7f0020000000ull; // device 1, created before the capture

void fill(Db& db, bool withOperationColumn = true)
{
    db.exec("BEGIN");
    db.exec("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)");
    db.exec("CREATE TABLE ENUM_CUDA_MEMPOOL_OPER (id INTEGER PRIMARY KEY, name TEXT, label TEXT)");
    db.exec("INSERT INTO ENUM_CUDA_MEMPOOL_OPER VALUES (5, 'CUDA_MEMPOOL_OPER_CREATE', "
            "'Memory pool created'), (6, 'CUDA_MEMPOOL_OPER_DESTROY', 'Memory pool destroyed'), "
            "(7, 'CUDA_MEMPOOL_OPER_TRIM', 'Memory pool trimmed')");
    db.exec(
        std::string("CREATE TABLE CUDA_GPU_MEMORY_POOL_EVENTS (start INTEGER NOT NULL, "
                    "globalPid INTEGER, deviceId INTEGER NOT NULL, address INTEGER NOT NULL, ") +
        (withOperationColumn ? "operationType INTEGER NOT NULL, " : "") +
        "poolType INTEGER NOT NULL, correlationId INTEGER, minBytesToKeep INTEGER NOT NULL, "
        "localMemoryPoolReleaseThreshold INTEGER, localMemoryPoolSize INTEGER, "
        "localMemoryPoolUtilizedSize INTEGER)");
    if (withOperationColumn)
        db.exec(fmt::format(
            "INSERT INTO CUDA_GPU_MEMORY_POOL_EVENTS VALUES"
            " (100, 1, 0, {0}, 5, 1, 1, 0, {1}, {2}, 0)," // A created: 2 MiB, threshold 1 MiB
            " (800, 1, 0, {0}, 7, 1, 2, 0, {1}, {2}, 0)," // A trimmed, keep 0
            " (900, 1, 0, {0}, 6, 1, 3, 0, {1}, 0, 0)",   // A destroyed
            kPoolA, MiB, 2 * MiB));
    db.exec("CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER PRIMARY KEY, name TEXT, "
            "label TEXT)");
    db.exec("INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES (0, "
            "'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION', 'Allocation'), (1, "
            "'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION', 'Deallocation')");
    db.exec("CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER,"
            " deviceId INTEGER NOT NULL, contextId INTEGER NOT NULL, address INTEGER NOT NULL,"
            " pc INTEGER NOT NULL, bytes INTEGER NOT NULL, memKind INTEGER NOT NULL,"
            " memoryOperationType INTEGER NOT NULL, name TEXT, correlationId INTEGER,"
            " streamId INTEGER, localMemoryPoolAddress INTEGER,"
            " localMemoryPoolReleaseThreshold INTEGER, localMemoryPoolSize INTEGER,"
            " localMemoryPoolUtilizedSize INTEGER)");
    // a1: 512 KiB at A+0 (t 100, the pool's creation instant; freed 400); a2: 256 KiB at A+1 MiB
    // (t 300, freed 850); b1: 1 MiB at B+0 on device 1 (t 250, pool size 4 MiB, never freed);
    // a plain cudaMalloc of 256 B at 0x1000 (t 90): driver level, no pool.
    db.exec(fmt::format(
        "INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, deviceId, contextId, address, pc, bytes,"
        " memKind, memoryOperationType, streamId, localMemoryPoolAddress, localMemoryPoolSize)"
        " VALUES (90, 0, 1, 4096, 0, 256, 3, 0, 7, 0, 0),"
        " (100, 0, 1, {0}, 0, {2}, 3, 0, 7, {0}, {5}),"
        " (300, 0, 1, {1}, 0, {3}, 3, 0, 7, {0}, {5}),"
        " (400, 0, 1, {0}, 0, {2}, 3, 1, 7, {0}, {5}),"
        " (850, 0, 1, {1}, 0, {3}, 3, 1, 7, {0}, {5}),"
        " (250, 1, 1, {4}, 0, {6}, 3, 0, 9, {4}, {7})",
        kPoolA, kPoolA + MiB, 512 * KiB, 256 * KiB, kPoolB, 2 * MiB, MiB, 4 * MiB));
    db.exec("COMMIT");
}

} // namespace

class TestImportNsysPools : public QObject
{
    Q_OBJECT
    QTemporaryDir tmp_;
    QString session_;

private slots:
    void initTestCase()
    {
        QVERIFY(tmp_.isValid());
        const QString in = tmp_.filePath("pools.sqlite");
        {
            Db db(in.toStdString(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
            fill(db);
        }
        session_ = tmp_.filePath("pools.fragscope");
        const CliResult r = runCli({"import", in, "-o", session_});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        QVERIFY2(!r.err.contains("not imported"), r.err.constData()); // the old warning is gone
    }

    void regions()
    {
        Session s = Session::open(session_.toStdString());
        // Two pool regions (level pool, kind pool, pool id = the pool's address); A spans its
        // 2 MiB from creation (100) to destruction (900); B, created before the capture, appears
        // at its first allocation (250) with the 4 MiB the export reports and is never released.
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM regions"), int64_t(2));
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     fmt::format("SELECT count(*) FROM regions WHERE level={} AND "
                                 "kind={} AND pool_id=address",
                                 static_cast<int>(Level::Pool), static_cast<int>(RegionKind::Pool))
                         .c_str()),
                 int64_t(2));
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     fmt::format("SELECT size*10000000+create_ns*1000+destroy_ns FROM "
                                 "regions WHERE address={}",
                                 kPoolA)
                         .c_str()),
                 int64_t(2 * MiB * 10000000 + 100 * 1000 + 900));
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     fmt::format("SELECT size FROM regions WHERE address={} AND device=1 "
                                 "AND create_ns=250 AND destroy_ns IS NULL",
                                 kPoolB)
                         .c_str()),
                 int64_t(4 * MiB));
        // Every pool block sits in its pool's region; the cudaMalloc stays at the driver level.
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     fmt::format("SELECT count(*) FROM allocations WHERE level={} AND "
                                 "region_id IS NOT NULL",
                                 static_cast<int>(Level::Pool))
                         .c_str()),
                 int64_t(3));
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     fmt::format("SELECT count(*) FROM allocations WHERE level={}",
                                 static_cast<int>(Level::Driver))
                         .c_str()),
                 int64_t(1));
        // The trim is a marker, spelt as the CUPTI agent spells it.
        QCOMPARE(QString::fromStdString(fs::store::debugQuery(s).scalarText(
                     "SELECT s.text FROM markers m JOIN strings s ON s.id = m.message")),
                 QString("cuda pool trim pool=0x7f0010000000 size=2097152 keep=0"));
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM anomalies"), int64_t(0));
    }

    void statesOverTime()
    {
        const auto e = analysis::Engine::open(session_.toStdString());
        // t=100: A created and a1 placed at its start in the same instant: inside the region.
        auto st = e->stateAt(0, Level::Pool, 100);
        QCOMPARE(st.reservedBytes, 2 * MiB);
        QCOMPARE(st.allocatedBytes, 512 * KiB);
        QCOMPARE(st.allocatedOutsideBytes, uint64_t(0));
        // t=350: a1 [0, 512K) and a2 [1M, 1.25M) live: fragments 512 KiB and 768 KiB, free
        // 1.25 MiB, F = 1 - 768/1280 = 0.4.
        st = e->stateAt(0, Level::Pool, 350);
        QCOMPARE(st.allocatedBytes, 768 * KiB);
        QCOMPARE(st.fragmentCount, int64_t(2));
        QCOMPARE(st.largestFreeFragmentBytes, 768 * KiB);
        QCOMPARE(st.freeBytes, 1280 * KiB);
        QVERIFY(std::fabs(st.fragmentationRatio - 0.4) < 1e-12);
        // t=500: a1 freed: fragments 1 MiB and 768 KiB, F = 1 - 1024/1792 = 3/7.
        st = e->stateAt(0, Level::Pool, 500);
        QCOMPARE(st.largestFreeFragmentBytes, MiB);
        QVERIFY(std::fabs(st.fragmentationRatio - 3.0 / 7.0) < 1e-12);
        // t=900: A destroyed after its last block went (850): nothing reserved.
        st = e->stateAt(0, Level::Pool, 900);
        QCOMPARE(st.reservedBytes, uint64_t(0));
        QCOMPARE(st.regionCount, 0);
        // Device 1 at the end: 4 MiB reserved, b1's 1 MiB allocated, one 3 MiB fragment, F = 0.
        st = e->stateAt(1, Level::Pool, e->timeEnd());
        QCOMPARE(st.reservedBytes, 4 * MiB);
        QCOMPARE(st.allocatedBytes, MiB);
        QCOMPARE(st.fragmentCount, int64_t(1));
        QCOMPARE(st.largestFreeFragmentBytes, 3 * MiB);
        QCOMPARE(st.fragmentationRatio, 0.0);
    }

    void missingOperationColumnIsAnError()
    {
        const QString in = tmp_.filePath("noop.sqlite");
        {
            Db db(in.toStdString(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
            fill(db, false);
        }
        const QString out = tmp_.filePath("noop.fragscope");
        const CliResult r = runCli({"import", in, "-o", out});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("noop.sqlite") && r.err.contains("CUDA_GPU_MEMORY_POOL_EVENTS"),
                 r.err.constData());
        QVERIFY(!QFile::exists(out));
    }
};

QTEST_GUILESS_MAIN(TestImportNsysPools)
#include "tst_import_nsys_pools.moc"
