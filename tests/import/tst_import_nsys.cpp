// Nsight Systems SQLite import on nsys-shaped files built here (no real export is in the data
// folder): the tables and column names follow `nsys export --type sqlite`'s schema.
#include "core/store/debug_query.h"
#include "importtest.h"

#include <QTemporaryDir>

#include <fmt/format.h>

using namespace fstest;

namespace {

const char* kSchema[] = {
    "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE TARGET_INFO_GPU (vmId INTEGER NOT NULL, id INTEGER NOT NULL, name TEXT, "
    "busLocation TEXT,"
    " isDiscrete INTEGER, l2CacheSize INTEGER, totalMemory INTEGER, memoryBandwidth INTEGER, "
    "clockRate INTEGER,"
    " smCount INTEGER, uuid TEXT)",
    "CREATE TABLE ENUM_CUDA_DEV_MEM_EVENT_OPER (id INTEGER PRIMARY KEY, name TEXT, label TEXT)",
    "INSERT INTO ENUM_CUDA_DEV_MEM_EVENT_OPER VALUES (0, 'CUDA_DEV_MEM_EVENT_OPR_ALLOCATION', "
    "'Allocation'),"
    " (1, 'CUDA_DEV_MEM_EVENT_OPR_DEALLOCATION', 'Deallocation')",
    "CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (start INTEGER NOT NULL, end INTEGER NOT NULL, "
    "deviceId INTEGER NOT NULL,"
    " contextId INTEGER NOT NULL, streamId INTEGER NOT NULL, correlationId INTEGER, globalPid "
    "INTEGER,"
    " demangledName INTEGER NOT NULL, shortName INTEGER NOT NULL, mangledName INTEGER, launchType "
    "INTEGER,"
    " cacheConfig INTEGER, registersPerThread INTEGER NOT NULL, gridX INTEGER NOT NULL, gridY "
    "INTEGER NOT NULL,"
    " gridZ INTEGER NOT NULL, blockX INTEGER NOT NULL, blockY INTEGER NOT NULL, blockZ INTEGER NOT "
    "NULL,"
    " staticSharedMemory INTEGER NOT NULL, dynamicSharedMemory INTEGER NOT NULL, "
    "localMemoryPerThread INTEGER NOT NULL,"
    " localMemoryTotal INTEGER NOT NULL, gridId INTEGER NOT NULL, sharedMemoryExecuted INTEGER, "
    "graphNodeId INTEGER,"
    " sharedMemoryLimitConfig INTEGER)",
    "CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (start INTEGER NOT NULL, end INTEGER NOT NULL, "
    "deviceId INTEGER,"
    " contextId INTEGER, streamId INTEGER, correlationId INTEGER, globalPid INTEGER, graphId "
    "INTEGER,"
    " graphExecId INTEGER)",
    "CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, "
    "rangeId INTEGER,"
    " category INTEGER, color INTEGER, text TEXT, globalTid INTEGER, endGlobalTid INTEGER, textId "
    "INTEGER,"
    " domainId INTEGER, uint64Value INTEGER, int64Value INTEGER, doubleValue REAL, uint32Value "
    "INTEGER,"
    " int32Value INTEGER, floatValue REAL, jsonTextId INTEGER, jsonText TEXT)",
};

const char* kMemoryTable =
    "CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER NOT NULL, globalPid INTEGER, "
    "deviceId INTEGER NOT NULL,"
    " contextId INTEGER NOT NULL, address INTEGER NOT NULL, pc INTEGER NOT NULL, bytes INTEGER NOT "
    "NULL,"
    " memKind INTEGER NOT NULL, memoryOperationType INTEGER NOT NULL, name TEXT, correlationId "
    "INTEGER,"
    " streamId INTEGER, localMemoryPoolAddress INTEGER, localMemoryPoolReleaseThreshold INTEGER,"
    " localMemoryPoolSize INTEGER, localMemoryPoolUtilizedSize INTEGER, importedMemoryPoolAddress "
    "INTEGER,"
    " importedMemoryPoolProcessId INTEGER)";

void fill(fs::Db& db, bool withMemory, int extraKernels = 0)
{
    db.exec("BEGIN");
    for (const char* s : kSchema)
        db.exec(s);
    db.exec("INSERT INTO StringIds VALUES (1, 'ampere_sgemm_128x64_nn'), (2, 'sgemm'), (3, "
            "'elementwise'),"
            " (4, 'metric coherence_score=0.5 frame=0')");
    db.exec("INSERT INTO TARGET_INFO_GPU (vmId, id, name, totalMemory) VALUES (0, 0, 'NVIDIA "
            "H100', 85899345920)");
    // Kernels (ns): sgemm 100..180 on stream 7, elementwise 260..270 (after frame 0 ends).
    db.exec("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId, "
            "correlationId,"
            " demangledName, shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY, "
            "blockZ,"
            " staticSharedMemory, dynamicSharedMemory, localMemoryPerThread, localMemoryTotal, "
            "gridId, graphNodeId)"
            " VALUES (100, 180, 0, 1, 7, 11, 1, 2, 32, 4, 2, 1, 128, 1, 1, 0, 0, 0, 0, 1, 0),"
            " (260, 270, 0, 1, 7, 12, 3, 3, 16, 1, 1, 1, 64, 1, 1, 0, 0, 0, 0, 2, 0)");
    for (int i = 0; i < extraKernels; ++i)
        db.exec(fmt::format(
            "INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, contextId, streamId,"
            " demangledName, shortName, registersPerThread, gridX, gridY, gridZ, blockX, blockY,"
            " blockZ, staticSharedMemory, dynamicSharedMemory, localMemoryPerThread,"
            " localMemoryTotal, gridId) VALUES ({0}, {1}, 0, 1, 7, 3, 3, 16, 1, 1, 1, 64, 1, 1, 0,"
            " 0, 0, 0, {0})",
            1000 + i, 1001 + i));
    db.exec("INSERT INTO CUPTI_ACTIVITY_KIND_GRAPH_TRACE VALUES (200, 240, 0, 1, 7, 13, 1, 5, 9)");
    // NVTX: push/pop range 'frame 0' 50..250 (eventType 59, text inline), a mark (34) whose
    // text is in StringIds, and a domain-create row (75) that carries no event.
    db.exec("INSERT INTO NVTX_EVENTS (start, end, eventType, text, textId) VALUES (50, 250, 59, "
            "'frame 0', NULL),"
            " (240, NULL, 34, NULL, 4), (10, NULL, 75, 'my domain', NULL)");
    if (withMemory) {
        db.exec(kMemoryTable);
        // cudaMalloc 256 B at 0x1000 (t 90, freed at 300); cudaMallocAsync 512 B at 0x2000 from a
        // pool.
        db.exec("INSERT INTO CUDA_GPU_MEMORY_USAGE_EVENTS (start, deviceId, contextId, address, "
                "pc, bytes, memKind,"
                " memoryOperationType, streamId, localMemoryPoolAddress) VALUES"
                " (90, 0, 1, 4096, 0, 256, 3, 0, 7, 0), (150, 0, 1, 8192, 0, 512, 3, 0, 7, 65536),"
                " (300, 0, 1, 4096, 0, 256, 3, 1, 7, 0)");
    }
    db.exec("COMMIT");
}

} // namespace

class TestImportNsys : public QObject
{
    Q_OBJECT
    QTemporaryDir tmp_;

    QString make(const QString& name, bool withMemory, int extraKernels = 0)
    {
        const QString p = tmp_.filePath(name + ".sqlite");
        fs::Db db(p.toStdString(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
        fill(db, withMemory, extraKernels);
        return p;
    }
    QString out(const QString& name) { return tmp_.filePath(name + ".fragscope"); }

private slots:
    void fullExport()
    {
        const QString in = make("full", true);
        const QString o = out("full");
        const CliResult r = runCli({"import", in, "-o", o});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        fs::Session s = fs::Session::open(o.toStdString());
        QCOMPARE(
            QString::fromStdString(fs::store::debugQuery(s).scalarText("SELECT kind FROM sources")),
            QString("nsys-sqlite"));
        QCOMPARE(QString::fromStdString(
                     fs::store::debugQuery(s).scalarText("SELECT name FROM devices WHERE id=0")),
                 QString("NVIDIA H100"));
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT capacity_bytes FROM devices WHERE id=0"),
                 int64_t{85899345920});
        // Memory: cudaMalloc at driver level (0), the pool block at pool level (1).
        QCOMPARE(
            fs::store::debugQuery(s).scalar("SELECT level FROM allocations WHERE address=4096"),
            int64_t{0});
        QCOMPARE(
            fs::store::debugQuery(s).scalar("SELECT free_ns FROM allocations WHERE address=4096"),
            int64_t{300});
        QCOMPARE(
            fs::store::debugQuery(s).scalar("SELECT level FROM allocations WHERE address=8192"),
            int64_t{1});
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT count(*) FROM allocations WHERE free_ns IS NULL"),
                 int64_t{1});
        // Kernels with their demangled names, grid and correlation.
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM kernels"), int64_t{2});
        QCOMPARE(
            QString::fromStdString(fs::store::debugQuery(s).scalarText(
                "SELECT s.text FROM kernels k JOIN strings s ON s.id=k.name WHERE k.start_ns=100")),
            QString("ampere_sgemm_128x64_nn"));
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT grid_x*10+grid_y FROM kernels WHERE start_ns=100"),
                 int64_t{42});
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT correlation_id FROM kernels WHERE start_ns=260"),
                 int64_t{12});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT graph_id*10+exec_id FROM graph_launches"),
                 int64_t{59});
        // NVTX: the 'frame 0' range is frame 0 [50, 250]; the mark gives it a metric.
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM frames"), int64_t{1});
        QCOMPARE(
            fs::store::debugQuery(s).scalar("SELECT start_ns*1000+end_ns FROM frames WHERE idx=0"),
            int64_t{50250});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM markers"), int64_t{2});
        QCOMPARE(
            fs::store::debugQuery(s).scalar("SELECT count(*) FROM frame_metrics WHERE frame=0 AND "
                                            "name='coherence_score' AND value=0.5"),
            int64_t{1});
        QVERIFY(s.summary().health.warnings.empty());
    }

    void withoutMemoryEvents()
    {
        const QString in = make("nomem", false);
        const QString o = out("nomem");
        const CliResult r = runCli({"import", in, "-o", o, "--format", "nsys-sqlite"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        fs::Session s = fs::Session::open(o.toStdString());
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM kernels"), int64_t{2});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM allocations"), int64_t{0});
        const auto warnings = s.summary().health.warnings;
        QCOMPARE(warnings.size(), size_t{1});
        QVERIFY(warnings[0].find("memory usage events were not captured") != std::string::npos);
        QVERIFY(warnings[0].find("--cuda-memory-usage=true") != std::string::npos);
    }

    void missingColumn()
    {
        const QString in = tmp_.filePath("badcol.sqlite");
        {
            fs::Db db(in.toStdString(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
            db.exec("CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT NOT NULL)");
            db.exec("CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (start INTEGER, address INTEGER, "
                    "memoryOperationType INTEGER)");
        }
        const QString o = out("badcol");
        const CliResult r = runCli({"import", in, "-o", o});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("table CUDA_GPU_MEMORY_USAGE_EVENTS: column 'bytes' is missing"),
                 r.err.constData());
        QVERIFY(!QFile::exists(o));
    }

    void truncatedExport()
    {
        // Enough kernels for many pages; cut the file in half: SQLite reports the damage when
        // the importer reads the cut pages, and no output is left.
        const QString in = make("big", true, 5000);
        QFile f(in);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray all = f.readAll();
        QVERIFY(all.size() > 100000);
        const QString cut = tmp_.filePath("cut.sqlite");
        QVERIFY(writeFile(cut, all.left(all.size() / 2)));
        const QString o = out("cut");
        const CliResult r = runCli({"import", cut, "-o", o});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(cut.toUtf8() + ": "), r.err.constData());
        QVERIFY2(r.err.contains("table ") || r.err.contains("malformed") ||
                     r.err.contains("corrupt"),
                 r.err.constData());
        QVERIFY(!QFile::exists(o));
    }

    void notAnExport()
    {
        const QString in = tmp_.filePath("other.sqlite");
        {
            fs::Db db(in.toStdString(), SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
            db.exec("CREATE TABLE t (x INTEGER)");
        }
        const CliResult r = runCli({"import", in, "-o", out("other")});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("not an nsys SQLite export"), r.err.constData());
    }
};

QTEST_GUILESS_MAIN(TestImportNsys)
#include "tst_import_nsys.moc"
