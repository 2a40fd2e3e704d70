// The agent's PyTorch bridge, through the real CPython path: `fragscope record` runs python3 with
// the torch double (tests/capture/torch_double, a test double of torch.cuda.memory's history
// API, not PyTorch) whose CUDA initialisation loads the agent as the CUDA driver does; the agent's
// bridge thread takes the GIL with PyGILState_Ensure, enables the history and drains it. The
// session must hold the workload's known blocks, segments and record_function frames, end in the
// allocator's own final state, and count what the bridge was too late to drain.
#include "capture/pytorch/bridge_decode.h"
#include "core/store/sqlite.h"
#include "testutil.h"

#include <QElapsedTimer>
#include <QFile>
#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QProcess>
#include <QStandardPaths>
#include <QTemporaryDir>
#include <QTest>
#include <cstring>
#include <sqlite3.h>

// In the ASan build the agent is instrumented and cannot load into the uninstrumented python3
// (ASan's runtime must come first); those tests run in the release build.
#ifdef __SANITIZE_ADDRESS__
#define SKIP_IN_ASAN_BUILD()                                                                       \
    QSKIP("the ASan-built agent cannot load into an uninstrumented python3; covered by the "       \
          "release build")
#else
#define SKIP_IN_ASAN_BUILD() static_cast<void>(0)
#endif

namespace {

int64_t q(const fs::Db& db, const std::string& sql)
{
    return db.scalar(sql.c_str(), -1);
}

QJsonObject readJson(const QString& path)
{
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) return {};
    return QJsonDocument::fromJson(f.readAll()).object();
}

// "addr:size" lines, sorted, of what a session holds alive at its end (framework level).
QStringList sessionBlocks(const fs::Db& db)
{
    QStringList out;
    auto st = db.prepare(
        "SELECT address, size FROM allocations WHERE level=2 AND free_ns IS NULL ORDER BY address");
    while (st.step())
        out << QString("%1:%2").arg(st.i64(0)).arg(st.i64(1));
    return out;
}
QStringList sessionSegments(const fs::Db& db)
{
    QStringList out;
    auto st = db.prepare("SELECT address, size FROM regions WHERE level=2 AND kind=0 AND "
                         "destroy_ns IS NULL ORDER BY address");
    while (st.step())
        out << QString("%1:%2").arg(st.i64(0)).arg(st.i64(1));
    return out;
}
QStringList jsonPairs(const QJsonArray& a)
{
    QStringList out;
    for (const auto& v : a) {
        const auto p = v.toArray();
        out << QString("%1:%2").arg(static_cast<qint64>(p[0].toDouble())).arg(p[1].toInt());
    }
    return out;
}

void put(std::string& b, const void* p, size_t n)
{
    b.append(static_cast<const char*>(p), n);
}
template <class T> void put(std::string& b, T v)
{
    put(b, &v, sizeof v);
}

} // namespace

class TestCapturePytorch : public QObject
{
    Q_OBJECT
    QTemporaryDir tmp_;

    fstest::CliResult record(const QString& out, const QStringList& extra, const QString& state,
                             const QStringList& workloadArgs)
    {
        return fstest::runCli(QStringList{"record", "-o", out} + extra +
                              QStringList{"--", "python3", FRAGSCOPE_PYTORCH_WORKLOAD, state} +
                              workloadArgs);
    }

    // `fragscope launch -- python3 pytorch_workload.py ARGS` in launch; returns the pid it
    // prints for `attach` (0 when none came within 20 s).
    static qint64 launchWorkload(QProcess& launch, const QStringList& args)
    {
        auto env = QProcessEnvironment::systemEnvironment();
        env.insert("FRAGSCOPE_NO_PROGRESS", "1");
        launch.setProcessEnvironment(env);
        launch.start(FRAGSCOPE_CLI,
                     QStringList{"launch", "--", "python3", FRAGSCOPE_PYTORCH_WORKLOAD} + args);
        if (!launch.waitForStarted()) return 0;
        QByteArray err;
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < 20000) {
            launch.waitForReadyRead(200);
            err += launch.readAllStandardError();
            const int at = err.indexOf("fragscope attach ");
            if (at >= 0) return err.mid(at + 17).split(' ').first().toLongLong();
        }
        qWarning("%s", err.constData());
        return 0;
    }

private slots:
    void initTestCase()
    {
        QVERIFY(tmp_.isValid());
        qputenv("FRAGSCOPE_SOCKET_DIR", (tmp_.path() + "/sockets").toLocal8Bit());
        qputenv("PYTHONPATH", FRAGSCOPE_TORCH_DOUBLE);
        qunsetenv("FRAGSCOPE_PYTORCH_MAX_ENTRIES");
        QProcess p;
        p.start("python3", {"-c", "import torch; assert torch.IS_TORCH_DOUBLE"});
        if (!p.waitForFinished(20000) || p.exitCode() != 0)
            QSKIP("python3 is not available or does not find the torch double");
    }

    void decoderKnownRecords()
    {
        // One string, a stack of two frames, one Alloc with it, a health row, a meta pair and a
        // log line; times move by the offset: 5000 ns realtime - 1000 offset = 4000.
        std::string b = "R";
        auto str = [&](uint32_t id, std::string_view s) {
            put(b, 'S');
            put(b, id);
            put(b, static_cast<uint32_t>(s.size()));
            put(b, s.data(), s.size());
        };
        str(1, "f (a.py:1)");
        str(2, "g (b.py:2)");
        str(3, "small");
        put(b, 'K');
        put(b, uint32_t{7});
        put(b, uint32_t{2});
        put(b, uint32_t{1});
        put(b, uint32_t{2});
        put(b, 'E');
        put(b, uint8_t{fs::proto::ev::Alloc});
        put(b, uint8_t{0});
        put(b, uint16_t{1});      // device
        put(b, uint32_t{2});      // stream
        put(b, uint64_t{0x1000}); // address
        put(b, uint64_t{512});    // size
        put(b, uint64_t{0});      // aux
        put(b, uint64_t{500});    // requested
        put(b, int64_t{5000});    // time
        put(b, int64_t{0});       // end
        put(b, uint32_t{3});      // name
        put(b, uint32_t{7});      // stack
        put(b, uint8_t{0});       // flags
        put(b, 'H');
        put(b, int64_t{42});
        put(b, uint32_t{3});
        put(b, uint32_t{1});
        put(b, int64_t{6000});
        put(b, 'M');
        put(b, uint32_t{3});
        put(b, uint32_t{2});
        put(b, 'L');
        put(b, uint32_t{2});
        put(b, "hi", 2);
        fs::agent::BridgeDecoder d(1000);
        fs::agent::BridgeBatch batch;
        std::string err;
        QVERIFY2(d.decode(b, batch, err), err.c_str());
        QCOMPARE(batch.status, 'R');
        QCOMPARE(batch.events.size(), size_t{1});
        const auto& e = batch.events[0];
        QCOMPARE(e.e.type, uint8_t{fs::proto::ev::Alloc});
        QCOMPARE(e.e.level, uint8_t{fs::proto::ev::LevelFramework});
        QCOMPARE(e.e.device, 1u);
        QCOMPARE(e.e.stream, 2u);
        QCOMPARE(e.e.address, uint64_t{0x1000});
        QCOMPARE(e.e.requestedSize, uint64_t{500});
        QCOMPARE(e.e.time, int64_t{4000});
        QCOMPARE(e.text, std::string("small"));
        QCOMPARE(e.frames.size(), size_t{2});
        QCOMPARE(e.frames[1], std::string("g (b.py:2)"));
        QCOMPARE(batch.health.size(), size_t{1});
        QCOMPARE(batch.health[0].value, int64_t{42});
        QCOMPARE(batch.health[0].time, int64_t{5000});
        QCOMPARE(batch.meta.size(), size_t{1});
        QCOMPARE(batch.meta[0].second, std::string("g (b.py:2)"));
        QCOMPARE(batch.logs, std::vector<std::string>{"hi"});

        // Truncated and unknown records are errors naming the byte, never a crash.
        fs::agent::BridgeBatch bad;
        QVERIFY(!d.decode(b.substr(0, b.size() - 1), bad, err));
        QVERIFY2(err.find("truncated log") != std::string::npos, err.c_str());
        QVERIFY(!d.decode("RZ", bad, err));
        QVERIFY2(err.find("unknown record tag") != std::string::npos, err.c_str());
        std::string undefinedStack = b.substr(0, 1);
        undefinedStack += b.substr(b.find('E'), 67);
        undefinedStack[undefinedStack.size() - 5] = 9; // stack id 9 was never defined
        QVERIFY(!d.decode(undefinedStack, bad, err));
    }

    void recordedSessionHasBlocksFramesAndFinalState()
    {
        SKIP_IN_ASAN_BUILD();
        const QString out = tmp_.path() + "/double.fragscope";
        const QString state = tmp_.path() + "/double.json";
        const auto r = record(out, {}, state, {"--wait-recording", "--frames", "6", "--oom"});
        QVERIFY2(r.exitCode == 0, (r.err + r.out).constData());
        QVERIFY2(r.out.contains("pytorch workload done"), r.out.constData());
        const QJsonObject js = readJson(state);
        fs::Db db(out.toStdString(), SQLITE_OPEN_READONLY);

        // Blocks (pytorch_workload.py): 64 KiB first (alive before the history was enabled:
        // pre-existing), then per frame 256 KiB (kept), 512 KiB (freed), 4 MiB (freed):
        // 1 + 6 x 3 = 19 framework allocations; 7 alive at the end (64 KiB + 6 x 256 KiB).
        QCOMPARE(q(db, "SELECT COUNT(*) FROM allocations WHERE level=2"), 19);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM allocations WHERE level=2 AND free_ns IS NULL"), 7);
        QCOMPARE(q(db, "SELECT SUM(size) FROM allocations WHERE level=2 AND free_ns IS NULL"),
                 65536 + 6 * 262144);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM allocations WHERE size=4194304"), 6);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM allocations WHERE region_id IS NULL"), 0);
        QCOMPARE(QString::fromStdString(db.scalarText(
                     "SELECT value FROM meta WHERE key='pytorch.preexisting_allocations'")),
                 QString("1"));
        // Segments, framework-level regions of kind segment named as PyTorch does: a 2 MiB
        // small one (alive); a 4 MiB large one; in frame 5 the 512 KiB block no longer fits
        // the first small segment (64 + 6 x 256 + 512 KiB > 2048 KiB): a second small one.
        // empty_cache releases the last two.
        QCOMPARE(q(db, "SELECT COUNT(*) FROM regions WHERE level=2 AND kind=0"), 3);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM regions WHERE level=2 AND destroy_ns IS NULL"), 1);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM regions r JOIN strings s ON s.id=r.segment_type "
                       "WHERE s.text='large' AND r.size=4194304 AND r.destroy_ns IS NOT NULL"),
                 1);
        // The final state equals the allocator's own _snapshot() at the workload's end.
        QCOMPARE(sessionBlocks(db), jsonPairs(js["blocks"].toArray()));
        QCOMPARE(sessionSegments(db), jsonPairs(js["segments"].toArray()));
        // record_function("frame i") ranges became frames 0-5, each holding its 4 MiB block.
        QCOMPARE(q(db, "SELECT COUNT(*) FROM frames"), 6);
        QCOMPARE(q(db, "SELECT SUM(idx) FROM frames"), 0 + 1 + 2 + 3 + 4 + 5);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM allocations a JOIN frames f ON a.alloc_ns BETWEEN "
                       "f.start_ns AND f.end_ns AND a.free_ns BETWEEN f.start_ns AND f.end_ns "
                       "WHERE a.size=4194304"),
                 6);
        // The 1 PiB request: one framework-level OOM with its size and the device's free bytes
        // (the double's 1 GiB capacity minus the 2 + 4 + 2 MiB then reserved).
        QCOMPARE(q(db, "SELECT COUNT(*) FROM ooms WHERE level=2"), 1);
        QCOMPARE(q(db, "SELECT requested_bytes FROM ooms"), int64_t{1} << 50);
        QCOMPARE(q(db, "SELECT device_free_bytes FROM ooms"), (int64_t{1} << 30) - (8 << 20));
        // Nothing was lost, nothing inconsistent.
        QCOMPARE(q(db, "SELECT COUNT(*) FROM capture_health WHERE kind='dropped_records'"), 0);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM anomalies WHERE kind<>'alive_at_end'"), 0);

        // `fragscope state --at end` (framework level): 1 region of 2 MiB, 7 blocks.
        const auto st = fstest::runCli({"state", out, "--at", "end", "--level", "framework"});
        QVERIFY2(st.exitCode == 0, st.err.constData());
        // 64 KiB + 6 x 256 KiB = 1638400 B allocated in the 2 MiB small segment.
        QVERIFY2(st.out.contains("live allocations   7"), st.out.constData());
        QVERIFY2(st.out.contains("reserved           2.00 MiB (2097152 B)"), st.out.constData());
        QVERIFY2(st.out.contains("(1638400 B)"), st.out.constData());
        // The whole analysis runs on it (frames, cached per-frame figures).
        const auto rep = fstest::runCli({"report", out});
        QVERIFY2(rep.exitCode == 0, rep.err.constData());
    }

    void ringFindsItsPlaceInTheBuffer()
    {
        // bridge.py's Ring on known buffers (bridge_ring_check.py has the cases and answers).
        QProcess p;
        p.start("python3", {FRAGSCOPE_BRIDGE_RING_CHECK, FRAGSCOPE_BRIDGE_PY});
        QVERIFY(p.waitForFinished(20000));
        QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
        QVERIFY(p.readAllStandardOutput().contains("ring ok: 6 cases"));
    }

    void attachToALaunchedProcess()
    {
        SKIP_IN_ASAN_BUILD();
        // `fragscope launch` keeps the agent idle (the bridge takes no GIL); the workload waits
        // until its history is enabled, which `attach` does: the 64 KiB block it allocated
        // before comes from the attach-time snapshot (pre-existing), everything after as it
        // happens, and the session ends in the allocator's final state.
        const QString out = tmp_.path() + "/attach.fragscope";
        const QString state = tmp_.path() + "/attach.json";
        QProcess launch;
        const qint64 pid = launchWorkload(launch, {state, "--wait-recording", "--frames", "3"});
        QVERIFY(pid > 0);
        const auto r = fstest::runCli({"attach", QString::number(pid), "-o", out});
        QVERIFY(launch.waitForFinished(30000));
        QCOMPARE(launch.exitCode(), 0);
        QVERIFY2(r.exitCode == 0, (r.err + r.out).constData());
        fs::Db db(out.toStdString(), SQLITE_OPEN_READONLY);
        // 1 pre-existing + 3 frames x 3 blocks = 10; alive: 64 KiB + 3 x 256 KiB.
        QCOMPARE(q(db, "SELECT COUNT(*) FROM allocations WHERE level=2"), 10);
        QCOMPARE(QString::fromStdString(db.scalarText(
                     "SELECT value FROM meta WHERE key='pytorch.preexisting_allocations'")),
                 QString("1"));
        QCOMPARE(q(db, "SELECT COUNT(*) FROM markers m JOIN strings s ON s.id=m.message WHERE "
                       "s.text LIKE 'pytorch: 1 blocks alive when recording began%'"),
                 1);
        const QJsonObject js = readJson(state);
        QCOMPARE(sessionBlocks(db), jsonPairs(js["blocks"].toArray()));
        QCOMPARE(sessionSegments(db), jsonPairs(js["segments"].toArray()));
        QCOMPARE(q(db, "SELECT COUNT(*) FROM frames"), 3);
    }

    void attachInjectsIntoARunningPythonProcess()
    {
        SKIP_IN_ASAN_BUILD();
        // A python3 started without the agent (its double never loads one): `attach` loads the
        // agent with gdb (dlopen + InitializeInjection); without a driver CUPTI fails, but in a
        // Python process the agent stays for the bridge. 1 pre-existing block + 3 frames x 3.
        if (QStandardPaths::findExecutable("gdb").isEmpty()) QSKIP("gdb is not installed");
        const QString out = tmp_.path() + "/inject.fragscope";
        const QString state = tmp_.path() + "/inject.json";
        QProcess target;
        auto env = QProcessEnvironment::systemEnvironment();
        env.remove("CUDA_INJECTION64_PATH");
        env.remove("NVTX_INJECTION64_PATH");
        target.setProcessEnvironment(env);
        target.start("python3",
                     {FRAGSCOPE_PYTORCH_WORKLOAD, state, "--wait-recording", "--frames", "3"});
        QVERIFY(target.waitForStarted());
        QTest::qWait(1500); // it allocates its first block and waits for the history
        const auto r = fstest::runCli({"attach", QString::number(target.processId()), "-o", out});
        if (r.err.contains("refused to let gdb attach"))
            QSKIP("ptrace is not allowed here (kernel.yama.ptrace_scope)");
        if (r.err.contains("gdb cannot call a function")) {
            // The target was left alone: it still waits for a recording, unharmed.
            QCOMPARE(target.state(), QProcess::Running);
            target.kill();
            target.waitForFinished();
            QSKIP("this gdb cannot call functions in a process on this CPU (gdb 13 and AMX "
                  "registers); the refusal and the untouched target are checked instead");
        }
        QVERIFY(target.waitForFinished(30000));
        QVERIFY2(r.exitCode == 0, (r.err + r.out).constData());
        QCOMPARE(target.exitCode(), 0);
        fs::Db db(out.toStdString(), SQLITE_OPEN_READONLY);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM allocations WHERE level=2"), 10);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM frames"), 3);
        const QJsonObject js = readJson(state);
        QCOMPARE(sessionBlocks(db), jsonPairs(js["blocks"].toArray()));
    }

    void stoppingAnAttachTakesTheLastDrain()
    {
        SKIP_IN_ASAN_BUILD();
        // `attach --duration 1s` on a launched workload of 100 frames x 20 ms: the bridge drains
        // when a third of its ring may have filled or after 1 s, so without a drain at the stop
        // the session would hold little more than the pre-existing block. The agent asks the
        // bridge for a last drain before the stream ends: the frames recorded up to the stop
        // are there (about 40; at least 5 asked for: 16 allocations).
        const QString out = tmp_.path() + "/stop.fragscope";
        QProcess launch;
        const qint64 pid = launchWorkload(
            launch, {tmp_.path() + "/stop.json", "--wait-recording", "--frames", "100"});
        QVERIFY(pid > 0);
        const auto r =
            fstest::runCli({"attach", QString::number(pid), "-o", out, "--duration", "1s"});
        QVERIFY(launch.waitForFinished(30000));
        QVERIFY2(r.exitCode == 0, (r.err + r.out).constData());
        fs::Db db(out.toStdString(), SQLITE_OPEN_READONLY);
        const int64_t allocs = q(db, "SELECT COUNT(*) FROM allocations WHERE level=2");
        QVERIFY2(allocs >= 16, qPrintable(QString::number(allocs)));
        QVERIFY(q(db, "SELECT COUNT(*) FROM frames") >= 5);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM anomalies WHERE kind<>'alive_at_end'"), 0);
    }

    void drainedTooLateIsCounted()
    {
        SKIP_IN_ASAN_BUILD();
        // A ring of 64 entries and a burst of 500 alloc/free pairs (1500 entries) while the
        // workload holds the GIL: the bridge cannot drain in time. The counted actions are
        // 513 allocs + 508 frees + 2 segment allocs + 1 segment free = 1024; the last drain
        // finds at most 64 entries, so at least 1024 - 64 = 960 are reported lost, and the
        // session is repaired to the allocator's final state.
        qputenv("FRAGSCOPE_PYTORCH_MAX_ENTRIES", "64");
        const QString out = tmp_.path() + "/late.fragscope";
        const QString state = tmp_.path() + "/late.json";
        const auto r = record(out, {}, state, {"--wait-recording", "--burst", "500"});
        qunsetenv("FRAGSCOPE_PYTORCH_MAX_ENTRIES");
        QVERIFY2(r.exitCode == 0, (r.err + r.out).constData());
        fs::Db db(out.toStdString(), SQLITE_OPEN_READONLY);
        const int64_t lost = q(db, "SELECT SUM(value) FROM capture_health WHERE "
                                   "kind='dropped_records' AND detail LIKE 'PyTorch%'");
        QVERIFY2(lost >= 960 && lost <= 1024, qPrintable(QString::number(lost)));
        QCOMPARE(QString::fromStdString(db.scalarText(
                     "SELECT value FROM meta WHERE key='pytorch.bridge_lost_entries'")),
                 QString::number(lost));
        const QJsonObject js = readJson(state);
        QCOMPARE(sessionBlocks(db), jsonPairs(js["blocks"].toArray()));
        QCOMPARE(sessionSegments(db), jsonPairs(js["segments"].toArray()));
        QVERIFY(q(db, "SELECT CAST(value AS INTEGER) FROM meta WHERE "
                      "key='pytorch.bridge_corrections'") > 0);
        // `state` says the figures rest on incomplete data.
        const auto st = fstest::runCli({"state", out, "--at", "end"});
        QVERIFY2(st.out.contains("records were dropped"), st.out.constData());
    }

    void expandableSegmentsBecomeMappings()
    {
        SKIP_IN_ASAN_BUILD();
        // TORCH_DOUBLE_EXPANDABLE=1: the 4 MiB block of each of 3 frames comes from one
        // expandable segment: the first maps 4 MiB at its start (segment_map), the others reuse
        // it, empty_cache unmaps it (segment_unmap). The session: one VMM region named
        // 'expandable' holding the three 4 MiB blocks, one 4 MiB mapping, unmapped at the end.
        qputenv("TORCH_DOUBLE_EXPANDABLE", "1");
        const QString out = tmp_.path() + "/expandable.fragscope";
        const QString state = tmp_.path() + "/expandable.json";
        const auto r = record(out, {}, state, {"--wait-recording", "--frames", "3"});
        qunsetenv("TORCH_DOUBLE_EXPANDABLE");
        QVERIFY2(r.exitCode == 0, (r.err + r.out).constData());
        fs::Db db(out.toStdString(), SQLITE_OPEN_READONLY);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM regions r JOIN strings s ON s.id=r.segment_type "
                       "WHERE r.level=2 AND r.kind=2 AND s.text='expandable'"),
                 1);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM allocations a JOIN regions r ON r.id=a.region_id "
                       "WHERE r.kind=2 AND a.size=4194304"),
                 3);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM region_mappings"), 1);
        QCOMPARE(q(db, "SELECT size FROM region_mappings WHERE unmap_ns IS NOT NULL"), 4194304);
        QCOMPARE(q(db, "SELECT COUNT(*) FROM anomalies WHERE kind<>'alive_at_end'"), 0);
        const QJsonObject js = readJson(state);
        QCOMPARE(sessionBlocks(db), jsonPairs(js["blocks"].toArray()));
    }

    void stacksAreRecordedWhenAsked()
    {
        SKIP_IN_ASAN_BUILD();
        const QString out = tmp_.path() + "/stacks.fragscope";
        const auto r = record(out, {"--stacks", "python"}, tmp_.path() + "/stacks.json",
                              {"--wait-recording", "--frames", "2"});
        QVERIFY2(r.exitCode == 0, (r.err + r.out).constData());
        fs::Db db(out.toStdString(), SQLITE_OPEN_READONLY);
        // Every block allocated after the history was on has a stack through main().
        QCOMPARE(q(db, "SELECT COUNT(*) FROM allocations WHERE level=2 AND stack IS NOT NULL "
                       "AND stack <> 0"),
                 2 * 3);
        QVERIFY(q(db, "SELECT COUNT(*) FROM stacks k JOIN strings s ON s.id=k.frame WHERE s.text "
                      "LIKE 'main (%pytorch_workload.py:%)'") > 0);
    }

    void noPytorchRecordsNoBlocks()
    {
        SKIP_IN_ASAN_BUILD();
        const QString out = tmp_.path() + "/off.fragscope";
        const auto r = record(out, {"--no-pytorch"}, tmp_.path() + "/off.json", {});
        QVERIFY2(r.exitCode == 0 || r.exitCode == 1, (r.err + r.out).constData());
        QVERIFY2(r.out.contains("pytorch workload done"), r.out.constData());
        if (QFile::exists(out)) {
            fs::Db db(out.toStdString(), SQLITE_OPEN_READONLY);
            QCOMPARE(q(db, "SELECT COUNT(*) FROM allocations"), 0);
            QCOMPARE(q(db, "SELECT COUNT(*) FROM meta WHERE key LIKE 'pytorch.%'"), 0);
        }
    }

    void unusableTorchGivesOneClearMessage_data()
    {
        QTest::addColumn<QString>("python");
        QTest::addColumn<QByteArray>("cpu");
        QTest::addColumn<QByteArray>("version");
        QTest::addColumn<QString>("message");
        QTest::newRow("double, CPU-only")
            << "python3" << QByteArray("1") << QByteArray() << "is a CPU-only build";
        QTest::newRow("double, torch 2.0")
            << "python3" << QByteArray() << QByteArray("2.0.1") << "is older than 2.1";
        // Debian's python3-torch (1.13, CPU-only) when installed.
        QTest::newRow("Debian python3-torch")
            << "/usr/bin/python3" << QByteArray() << QByteArray() << "is a CPU-only build";
    }

    void unusableTorchGivesOneClearMessage()
    {
        SKIP_IN_ASAN_BUILD();
        QFETCH(QString, python);
        QFETCH(QByteArray, cpu);
        QFETCH(QByteArray, version);
        QFETCH(QString, message);
        const bool real = python.startsWith('/');
        if (real) {
            qunsetenv("PYTHONPATH");
            QProcess p;
            p.start(python, {"-c", "import torch"});
            if (!p.waitForFinished(60000) || p.exitCode() != 0) {
                qputenv("PYTHONPATH", FRAGSCOPE_TORCH_DOUBLE);
                QSKIP("Debian's python3-torch is not installed (apt-get install python3-torch)");
            }
            // The API surface the bridge uses exists in this torch.
            p.start(python,
                    {"-c", "import torch, torch.cuda.memory as m, torch.profiler as pr\n"
                           "for o, n in ((m, '_record_memory_history'), (m, '_snapshot'),\n"
                           "             (torch.cuda, 'is_initialized'), (torch.cuda, "
                           "'memory_stats'),\n"
                           "             (pr, 'record_function'), (torch.version, 'cuda')):\n"
                           "    assert hasattr(o, n), n\n"});
            QVERIFY(p.waitForFinished(60000));
            QVERIFY2(p.exitCode() == 0, p.readAllStandardError().constData());
        }
        if (!cpu.isEmpty()) qputenv("TORCH_DOUBLE_CPU", cpu);
        if (!version.isEmpty()) qputenv("TORCH_DOUBLE_VERSION", version);
        const QString out =
            tmp_.path() + "/unusable-" + QString::number(QTest::currentDataTag()[0]) + ".fragscope";
        const auto r = fstest::runCli({"record", "-o", out, "--", python,
                                       FRAGSCOPE_PYTORCH_ATTACH_STUB, real ? "2.0" : "0.8"});
        qunsetenv("TORCH_DOUBLE_CPU");
        qunsetenv("TORCH_DOUBLE_VERSION");
        qputenv("PYTHONPATH", FRAGSCOPE_TORCH_DOUBLE);
        QVERIFY2(r.exitCode == 0 || r.exitCode == 1, (r.err + r.out).constData());
        QVERIFY2(r.out.contains("attach stub done"), (r.out + r.err).constData());
        // One message, on the target's stderr, and capture went on (no agent disabled).
        QCOMPARE(r.err.count(message.toUtf8()), 1);
        QVERIFY2(r.err.contains("capture goes on"), r.err.constData());
        QVERIFY(!r.err.contains("agent disabled"));
        fs::Db db(out.toStdString(), SQLITE_OPEN_READONLY);
        QVERIFY(QString::fromStdString(
                    db.scalarText("SELECT value FROM meta WHERE key='pytorch.bridge'"))
                    .startsWith("off: "));
    }
};

QTEST_GUILESS_MAIN(TestCapturePytorch)
#include "tst_capture_pytorch.moc"
