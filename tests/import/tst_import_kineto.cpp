// Kineto / torch.profiler trace import: the real traces against the catalogue's counts, a
// hand-made trace for frames, kernels, baseline and fractional timestamps, and bad input.
#include "core/store/debug_query.h"
#include "endstate.h"
#include "importtest.h"

#include <QDirIterator>
#include <QJsonArray>
#include <QTemporaryDir>

#include <zlib.h>

using namespace fstest;

class TestImportKineto : public QObject
{
    Q_OBJECT
    QTemporaryDir tmp_;
    QJsonObject ref_;

    QString out(const QString& name) { return tmp_.filePath(name + ".fragscope"); }

private slots:
    void initTestCase()
    {
        ref_ = reference();
        if (missingData("reference.json").isEmpty())
            QVERIFY2(ref_.contains("kineto"), "reference.json without kineto");
    }

    void realTraces_data()
    {
        FSTEST_REQUIRE_DATA("kineto");
        QTest::addColumn<QString>("rel");
        QDirIterator it(dataDir() + "/kineto", {"*.json.gz", "*.json"}, QDir::Files);
        QStringList files;
        while (it.hasNext())
            files << QDir(dataDir()).relativeFilePath(it.next());
        files.sort();
        if (files.isEmpty()) QTest::newRow("no data") << QString();
        for (const QString& f : files)
            QTest::newRow(qPrintable(f)) << f;
    }
    void realTraces()
    {
        QFETCH(QString, rel);
        QVERIFY(QDir(dataDir() + "/kineto").entryList(QDir::Files).size() >= 3);
        const QJsonObject want = ref_["kineto"].toObject()[rel].toObject();
        QVERIFY2(!want.isEmpty(), qPrintable("no reference for " + rel));
        const QString o = out(QFileInfo(rel).baseName());
        const CliResult r =
            runCli({"import", dataDir() + "/" + rel, "-o", o, "--format", "kineto"});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        fs::Session s = fs::Session::open(o.toStdString());
        const QJsonObject sum =
            QJsonDocument::fromJson(QByteArray::fromStdString(s.meta("kineto.summary"))).object();
        QCOMPARE(sum["memory_events"].toInteger(), want["memory_events"].toInteger());
        QCOMPARE(sum["kernels"].toInteger(), want["kernels"].toInteger());
        QCOMPARE(sum["cpu_allocs"].toInteger(), want["cpu_allocs"].toInteger());
        QCOMPARE(sum["cpu_frees"].toInteger(), want["cpu_frees"].toInteger());
        const QString dev = QString::number(want["cuda_device"].toInteger());
        const QJsonObject cuda = sum["cuda"].toObject()[dev].toObject();
        QCOMPARE(cuda["allocs"].toInteger(), want["cuda_allocs"].toInteger());
        QCOMPARE(cuda["frees"].toInteger(), want["cuda_frees"].toInteger());
        // Every kernel lands in the kernels table, every CUDA alloc in allocations.
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM kernels"),
                 static_cast<int64_t>(want["kernels"].toInteger()));
        QCOMPARE(
            fs::store::debugQuery(s).scalar(
                ("SELECT count(*) FROM allocations WHERE device=" + dev.toStdString()).c_str()),
            static_cast<int64_t>(want["cuda_allocs"].toInteger()));
        const bool hasAddr = want["has_addr"].toBool();
        QCOMPARE(s.summary().addressViewAvailable, hasAddr);
        if (hasAddr) {
            QCOMPARE(cuda["last_total_allocated"].toInteger(),
                     want["last_total_allocated"].toInteger());
            QCOMPARE(cuda["peak_total_allocated"].toInteger(),
                     want["peak_total_allocated"].toInteger());
            // Baseline: the earliest [memory] event (ts 1669783687…, a 25165824 B alloc) reports
            // Total Allocated 4121780224, so 4121780224 - 25165824 = 4096614400 B existed before.
            QCOMPARE(fs::store::debugQuery(s).scalar(
                         "SELECT value FROM capture_health WHERE kind='preexisting_baseline'"),
                     int64_t{4096614400});
            // Allocations alive at the end + baseline = the last Total Allocated (4096614400):
            // here every allocation of the trace is freed again.
            QCOMPARE(fs::store::debugQuery(s).scalar(
                         "SELECT coalesce(sum(size),0) FROM allocations WHERE free_ns IS NULL"),
                     int64_t{0});
        } else {
            QVERIFY(!s.summary().health.warnings.empty());
        }
    }

    void memoryTimeline()
    {
        FSTEST_REQUIRE_DATA("torch-memory-timeline/hta-memory-timeline.raw.gz");
        // torch-memory-timeline/hta-memory-timeline.raw.gz: the catalogue gives 16845 rows
        // [time_us, action, bytes, category], 645 of them at time -1 (PREEXISTING). CREATE (2)
        // rows become allocations, DESTROY (4) rows frees, INCREMENT_VERSION (3) pairs only
        // move bytes between categories; the pre-existing bytes are the baseline.
        const QString o = out("timeline");
        const CliResult r = runCli(
            {"import", dataDir() + "/torch-memory-timeline/hta-memory-timeline.raw.gz", "-o", o});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        fs::Session s = fs::Session::open(o.toStdString());
        const QJsonObject t =
            QJsonDocument::fromJson(QByteArray::fromStdString(s.meta("kineto.timeline"))).object();
        QCOMPARE(t["rows"].toInteger(), qint64{16845});
        QCOMPARE(t["preexisting"].toInteger(), qint64{645});
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT value FROM capture_health WHERE kind='preexisting_baseline'"),
                 static_cast<int64_t>(t["preexisting_bytes"].toInteger()));
        QVERIFY(!s.summary().addressViewAvailable);
        QVERIFY(fs::store::debugQuery(s).scalar("SELECT count(*) FROM allocations") > 0);
        // Row times are ns since the epoch (1696966047096289294 is in October 2023): kept as is.
        QVERIFY(fs::store::debugQuery(s).scalar("SELECT min(alloc_ns) FROM allocations") >
                int64_t{1600000000000000000});
        QVERIFY(fs::store::debugQuery(s).scalar("SELECT max(alloc_ns) FROM allocations") <=
                int64_t{1696966048083248105});
    }

    void truncatedRealFiles_data()
    {
        FSTEST_REQUIRE_DATA("kineto");
        QTest::addColumn<QString>("rel");
        QDirIterator it(dataDir() + "/kineto", {"*.json.gz"}, QDir::Files);
        int rows = 0;
        while (it.hasNext()) {
            const QString f = QDir(dataDir()).relativeFilePath(it.next());
            QTest::newRow(qPrintable(f)) << f;
            ++rows;
        }
        if (rows == 0) QTest::newRow("no data") << QString();
    }
    void truncatedRealFiles()
    {
        QFETCH(QString, rel);
        QFile f(dataDir() + "/" + rel);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray all = f.readAll();
        const QString in = tmp_.filePath("cut.json.gz");
        QVERIFY(writeFile(in, all.left(all.size() / 2)));
        const QString o = out("cut");
        const CliResult r = runCli({"import", in, "-o", o});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(in.toUtf8() + ": offset "), r.err.constData());
        QCOMPARE(r.err.count('\n'), 1);
        QVERIFY(!QFile::exists(o));
    }

    void handMadeTrace()
    {
        // Times in µs: frame 0 = [100, 200), frame 1 = [200.5, 300) (fractional µs -> 200500 ns);
        // one kernel in frame 1; memory on device 0: alloc A (64 B, Total Allocated 1064, so the
        // baseline is 1000 B), free of B (allocated before the trace), alloc C, free A.
        const QByteArray json =
            R"({"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "GPU X", "totalGlobalMem": 1024}],
 "traceEvents": [
  {"ph": "X", "cat": "user_annotation", "name": "frame 1", "ts": 200.5, "dur": 99.5},
  {"ph": "X", "cat": "user_annotation", "name": "frame 0", "ts": 100, "dur": 100},
  {"ph": "X", "cat": "kernel", "name": "gemm_\u00e9", "ts": 250, "dur": 10,
   "args": {"device": 0, "stream": 7, "correlation": 42, "grid": [2, 3, 4], "block": [32, 1, 1]}},
  {"ph": "i", "name": "[memory]", "ts": 110, "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096, "Bytes": 64, "Total Allocated": 1064}},
  {"ph": "i", "name": "[memory]", "ts": 120, "args": {"Device Type": 1, "Device Id": 0, "Addr": 8192, "Bytes": -16, "Total Allocated": 1048}},
  {"ph": "i", "name": "[memory]", "ts": 210, "args": {"Device Type": 1, "Device Id": 0, "Addr": 12288, "Bytes": 32, "Total Allocated": 1080}},
  {"ph": "i", "name": "[memory]", "ts": 220, "args": {"Device Type": 1, "Device Id": 0, "Addr": 4096, "Bytes": -64, "Total Allocated": 1016}},
  {"ph": "M", "name": "process_name", "args": {"name": "python"}}
 ]})";
        const QString in = tmp_.filePath("hand.json");
        QVERIFY(writeFile(in, json));
        const QString o = out("hand");
        const CliResult r = runCli({"import", in, "-o", o});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        fs::Session s = fs::Session::open(o.toStdString());
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM frames"), int64_t{2});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT start_ns FROM frames WHERE idx=1"),
                 int64_t{200500});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT end_ns FROM frames WHERE idx=1"),
                 int64_t{300000});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT end_ns FROM frames WHERE idx=0"),
                 int64_t{200000});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT stream FROM kernels"), int64_t{7});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT correlation_id FROM kernels"),
                 int64_t{42});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT grid_x*100+grid_y*10+grid_z FROM kernels"),
                 int64_t{234});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT end_ns-start_ns FROM kernels"),
                 int64_t{10000});
        QCOMPARE(QString::fromStdString(fs::store::debugQuery(s).scalarText(
                     "SELECT s.text FROM kernels k JOIN strings s ON s.id=k.name")),
                 QString::fromUtf8("gemm_\xc3\xa9"));
        // A (4096) lives 110..220 µs, C (12288) stays; B's free is part of the baseline, not an
        // event.
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM allocations"), int64_t{2});
        QCOMPARE(
            fs::store::debugQuery(s).scalar("SELECT free_ns FROM allocations WHERE address=4096"),
            int64_t{220000});
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT count(*) FROM allocations WHERE free_ns IS NULL AND address=12288"),
                 int64_t{1});
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT value FROM capture_health WHERE kind='preexisting_baseline'"),
                 int64_t{1000});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM anomalies"), int64_t{0});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT capacity_bytes FROM devices WHERE id=0"),
                 int64_t{1024});
        QVERIFY(s.summary().addressViewAvailable);
        bool warned = false;
        for (const auto& w : s.summary().health.warnings)
            warned = warned || w.find("1 frees (16 B) release memory allocated before the trace") !=
                                   std::string::npos;
        QVERIFY(warned);
    }

    void gzipAndBareArray()
    {
        // The bare-array form of the Chrome trace format, gzip-compressed; no Addr: the
        // address view is unavailable and the frees pair with same-size allocations.
        const QByteArray json = R"([
 {"ph": "i", "name": "[memory]", "ts": 1, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 100}},
 {"ph": "i", "name": "[memory]", "ts": 2, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 200}},
 {"ph": "i", "name": "[memory]", "ts": 3, "args": {"Device Type": 1, "Device Id": 0, "Bytes": -100}}
])";
        const QString in = tmp_.filePath("bare.json.gz");
        gzFile g = gzopen(in.toLocal8Bit().constData(), "wb");
        QVERIFY(g);
        gzwrite(g, json.constData(), static_cast<unsigned>(json.size()));
        gzclose(g);
        const QString o = out("bare");
        const CliResult r = runCli({"import", in, "-o", o});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        fs::Session s = fs::Session::open(o.toStdString());
        QVERIFY(!s.summary().addressViewAvailable);
        // 100 B freed at 3 µs, 200 B alive: allocated at the end = 200.
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT free_ns FROM allocations WHERE size=100"),
                 int64_t{3000});
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT sum(size) FROM allocations WHERE free_ns IS NULL"),
                 int64_t{200});
    }

    void badJson_data()
    {
        QTest::addColumn<QByteArray>("json");
        QTest::addColumn<QString>("error");
        // Offsets count bytes from 0: in the first row the stray '}' (where a key must come) is
        // at 28.
        QTest::newRow("trailing comma") << QByteArray(R"({"traceEvents": [{"ph": "X",}]})")
                                        << "offset 28: expected a string, found '}'";
        QTest::newRow("cut") << QByteArray(R"({"traceEvents": [{"ph": "X")") << "truncated";
        QTest::newRow("no events")
            << QByteArray(R"({"schemaVersion": 1})") << "no 'traceEvents' array";
        QTest::newRow("garbage after")
            << QByteArray(R"({"traceEvents": []} x)") << "after the end of the JSON document";
        QTest::newRow("bad literal")
            << QByteArray(R"({"traceEvents": [tru]})") << "expected a value, found 'tru'";
        QTest::newRow("too deep") << QByteArray(R"({"traceEvents": [)") + QByteArray(200, '[')
                                  << "nested deeper than 128";
    }
    void badJson()
    {
        QFETCH(QByteArray, json);
        QFETCH(QString, error);
        const QString in = tmp_.filePath("bad.json");
        QVERIFY(writeFile(in, json));
        const QString o = out("bad");
        const CliResult r = runCli({"import", in, "-o", o});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(in.toUtf8() + ": "), r.err.constData());
        QVERIFY2(r.err.contains(error.toUtf8()), r.err.constData());
        QVERIFY(!QFile::exists(o));
    }

    void unknownContent()
    {
        const QString in = tmp_.filePath("text.txt");
        QVERIFY(writeFile(in, "hello\n"));
        const CliResult r = runCli({"import", in, "-o", out("text")});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("offset 0: unrecognised content"), r.err.constData());
        const CliResult u = runCli({"import", in, "-o", out("text"), "--format", "nope"});
        QCOMPARE(u.exitCode, 64);
    }
};

QTEST_GUILESS_MAIN(TestImportKineto)
#include "tst_import_kineto.moc"
