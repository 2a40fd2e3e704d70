// PyTorch snapshot import end to end through `fragscope import`: every real snapshot in the
// data folder must end in exactly the catalogue's final state (checked with the test's own
// reading of the session and with `fragscope state --at end --json`), plus hand-made snapshots
// for the reconstruction's corner cases and bad input.
#include "core/store/debug_query.h"
#include "endstate.h"
#include "importtest.h"

#include <QDirIterator>
#include <QJsonArray>
#include <QTemporaryDir>

using namespace fstest;

class TestImportSnapshot : public QObject
{
    Q_OBJECT
    QTemporaryDir tmp_;
    QJsonObject ref_;

    QString out(const QString& name) { return tmp_.filePath(name + ".fragscope"); }

    // Imports and checks that it worked; returns the output path.
    QString importOk(const QString& input, const QString& name)
    {
        const QString o = out(name);
        const CliResult r = runCli({"import", input, "-o", o});
        if (r.exitCode != 0) qWarning("import failed: %s", r.err.constData());
        return r.exitCode == 0 ? o : QString();
    }

    // One trace entry: {action, addr, size, time_us}.
    static void traceEntry(PickleWriter& w, const char* action, int64_t addr, int64_t size,
                           int64_t t)
    {
        w.beginDict()
            .key("action")
            .str(action)
            .key("addr")
            .integer(addr)
            .key("size")
            .integer(size)
            .key("time_us")
            .integer(t)
            .endDict();
    }

private slots:
    // Every pickle of the real snapshot folders (the features folder holds expandable segments,
    // private pools and pending frees), so a new file without a reference entry fails here.
    static QStringList realFiles()
    {
        QStringList files;
        for (const char* sub : {"/pytorch-snapshots", "/pytorch-snapshots-features"}) {
            QDirIterator it(dataDir() + sub, {"*.pickle"}, QDir::Files);
            while (it.hasNext())
                files << QDir(dataDir()).relativeFilePath(it.next());
        }
        files.sort();
        return files;
    }

    void initTestCase()
    {
        ref_ = reference();
        if (missingData("reference.json").isEmpty())
            QVERIFY2(ref_.contains("pytorch-snapshots"),
                     "reference.json without pytorch-snapshots");
    }

    void realSnapshots_data()
    {
        FSTEST_REQUIRE_DATA("pytorch-snapshots");
        QTest::addColumn<QString>("rel");
        const QStringList files = realFiles();
        if (files.isEmpty()) QTest::newRow("no data") << QString();
        for (const QString& f : files)
            QTest::newRow(qPrintable(f)) << f;
    }
    void realSnapshots()
    {
        QFETCH(QString, rel);
        QVERIFY(realFiles().size() >= 10);
        const QJsonObject want = ref_["pytorch-snapshots"].toObject()[rel].toObject();
        QVERIFY2(!want.isEmpty(), qPrintable("no reference for " + rel));
        const QString o = importOk(dataDir() + "/" + rel, QFileInfo(rel).baseName());
        QVERIFY(!o.isEmpty());
        fs::Session s = fs::Session::open(o.toStdString());

        // Trace actions as the importer counted them.
        const QJsonObject actions =
            QJsonDocument::fromJson(QByteArray::fromStdString(s.meta("pytorch.trace_actions")))
                .object();
        QCOMPARE(actions, want["trace_actions"].toObject());
        // Span and time axis: time_us x 1000 when present, else ordinal.
        if (want["trace_span_us"].isNull()) {
            QCOMPARE(QString::fromStdString(s.meta("time_axis")), QString("ordinal"));
        } else {
            QCOMPARE(QString::fromStdString(s.meta("time_axis")), QString("ns"));
            QCOMPARE(QString::fromStdString(s.meta("pytorch.trace_span_us")).toLongLong(),
                     want["trace_span_us"].toInteger());
        }
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT count(*) FROM anomalies WHERE kind='alive_at_end'"),
                 int64_t{0});

        const QJsonObject devices = want["devices"].toObject();
        QVERIFY(!devices.isEmpty());
        // `fragscope state` (the analysis engine) on the same file.
        const CliResult st = runCli({"state", o, "--at", "end", "--json"});
        QCOMPARE(st.exitCode, 0);
        const QJsonArray states = QJsonDocument::fromJson(st.out).object()["states"].toArray();
        for (auto dit = devices.begin(); dit != devices.end(); ++dit) {
            const QJsonObject w = dit.value().toObject();
            const EndState e = endState(fs::store::debugQuery(s), dit.key().toLongLong());
            QCOMPARE(static_cast<qint64>(e.reserved), w["reserved_bytes"].toInteger());
            QCOMPARE(static_cast<qint64>(e.allocated), w["allocated_bytes"].toInteger());
            QCOMPARE(static_cast<qint64>(e.free), w["free_bytes"].toInteger());
            QCOMPARE(static_cast<qint64>(e.fragments), w["fragment_count"].toInteger());
            // reference.json (outside this repository) keeps its own name for the largest.
            QCOMPARE(static_cast<qint64>(e.largest), w["largest_free_fragment_bytes"].toInteger());
            // The catalogue gives 6 decimals.
            QVERIFY(std::abs(e.ratio - w["fragmentation_ratio"].toDouble()) < 5e-7);
            QVERIFY(std::abs(e.entropy - w["fragment_entropy_bits"].toDouble()) < 5e-7);

            QJsonObject engine;
            for (const auto& x : states)
                if (x.toObject()["device"].toInteger() == dit.key().toLongLong() &&
                    x.toObject()["level"].toString() == "framework")
                    engine = x.toObject();
            QVERIFY2(!engine.isEmpty(), st.out.constData());
            for (const char* k : {"reserved_bytes", "allocated_bytes"})
                QCOMPARE(engine[k].toInteger(), w[k].toInteger());
            // The catalogue counts pending frees (active_pending_free) as free, as memory_viz
            // does: the engine's figures once they complete. Its own free, largest and F leave
            // them out (docs/analysis.md "Pending frees").
            const qint64 pending = w["pending_free_bytes"].toInteger(0);
            QCOMPARE(engine["pending_free_bytes"].toInteger(), pending);
            QCOMPARE(engine["free_bytes"].toInteger(), w["free_bytes"].toInteger() - pending);
            QCOMPARE(engine["free_including_pending_bytes"].toInteger(),
                     w["free_bytes"].toInteger());
            QCOMPARE(engine["largest_free_once_pending_complete_bytes"].toInteger(),
                     w["largest_free_fragment_bytes"].toInteger());
            QVERIFY(std::abs(engine["fragmentation_ratio_once_pending_complete"].toDouble() -
                             w["fragmentation_ratio"].toDouble()) < 5e-7);
            if (pending == 0) { // then the same figures (pendingFreesAreTheirOwnState: others)
                QCOMPARE(engine["fragment_count"].toInteger(), w["fragment_count"].toInteger());
                QCOMPARE(engine["largest_free_bytes"].toInteger(),
                         w["largest_free_fragment_bytes"].toInteger());
                QVERIFY(std::abs(engine["fragmentation_ratio"].toDouble() -
                                 w["fragmentation_ratio"].toDouble()) < 5e-7);
                QVERIFY(std::abs(engine["fragment_entropy_bits"].toDouble() -
                                 w["fragment_entropy_bits"].toDouble()) < 5e-7);
            }
            // The pending frees are kept on their own in the session.
            if (w.contains("pending_free_bytes")) {
                auto p = fs::store::debugQuery(s).prepare(
                    "SELECT COALESCE(SUM(size), 0) FROM pending_frees"
                    " WHERE device=?1 AND complete_ns IS NULL");
                p.bind(1, static_cast<int64_t>(dit.key().toLongLong()));
                QVERIFY(p.step());
                QCOMPARE(p.i64(0), w["pending_free_bytes"].toInteger());
            }
        }
        // The importer had nothing to correct: the replay ends in the snapshot's state by itself.
        for (const auto& wmsg : s.summary().health.warnings)
            QVERIFY2(wmsg.find("corrected at the end") == std::string::npos, wmsg.c_str());
    }

    void privatePoolsAreKept()
    {
        // verl's 127 segments are in three pools (catalogue): (0,0) 59, (0,1) 44, (0,2) 24.
        FSTEST_REQUIRE_DATA("pytorch-snapshots-features/verl-pools-pending-free.pickle");
        const QString o = importOk(
            dataDir() + "/pytorch-snapshots-features/verl-pools-pending-free.pickle", "pools");
        QVERIFY(!o.isEmpty());
        fs::Session s = fs::Session::open(o.toStdString());
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM regions WHERE pool_id=0"),
                 int64_t{59});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM regions WHERE pool_id=1"),
                 int64_t{44});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM regions WHERE pool_id=2"),
                 int64_t{24});
        // 9 active_pending_free blocks, pending when the snapshot was taken.
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT count(*) FROM pending_frees WHERE complete_ns IS NULL"),
                 int64_t{9});
        // Each pool's end state, as PyTorch's segsum and block walk give it for the segments of
        // that segment_pool_id (worked out with python3's pickle over the file's 'segments':
        // total_size summed, active_allocated blocks summed, runs of inactive blocks = free
        // gaps, active_pending_free blocks apart; all 9 of them are in pool (0,0)):
        //   pool    reserved      allocated     pending    gaps  largest gap  F = 1 - largest/free
        //   (0,0)   3810525184    2623884288    597377024  52    272629760    0.537338
        //   (0,1)    585105408     498546688            0  43     16613376    0.808068
        //   (0,2)  21793603584   21793603584            0   0            0    0
        // (0,0) counting the pending blocks as free (memory_viz): free 1186640896, 52 gaps,
        // largest 272629760, F 0.770251. They add up to reference.json's device 0 (26189234176
        // reserved, 95 gaps).
        const CliResult r = runCli({"state", o, "--at", "end", "--pools", "--json"});
        QCOMPARE(r.exitCode, 0);
        const QJsonArray pools = QJsonDocument::fromJson(r.out).object()["pools"].toArray();
        QCOMPARE(pools.size(), qsizetype{3});
        const qint64 want[3][5] = {{3810525184, 2623884288, 597377024, 52, 272629760},
                                   {585105408, 498546688, 0, 43, 16613376},
                                   {21793603584, 21793603584, 0, 0, 0}};
        const double wantF[3] = {0.537338, 0.808068, 0};
        const double wantOnceF[3] = {0.770251, 0.808068, 0};
        for (int i = 0; i < 3; ++i) {
            const QJsonObject p = pools[i].toObject();
            QCOMPARE(p["pool"].toInteger(), qint64{i});
            QCOMPARE(p["reserved_bytes"].toInteger(), want[i][0]);
            QCOMPARE(p["allocated_bytes"].toInteger(), want[i][1]);
            QCOMPARE(p["pending_free_bytes"].toInteger(), want[i][2]);
            QCOMPARE(p["free_bytes"].toInteger(), want[i][0] - want[i][1] - want[i][2]);
            QCOMPARE(p["free_including_pending_bytes"].toInteger(), want[i][0] - want[i][1]);
            QCOMPARE(p["fragment_count"].toInteger(), want[i][3]);
            QCOMPARE(p["largest_free_bytes"].toInteger(), want[i][4]);
            QVERIFY(std::abs(p["fragmentation_ratio"].toDouble() - wantF[i]) < 1e-6);
            QVERIFY(std::abs(p["fragmentation_ratio_once_pending_complete"].toDouble() -
                             wantOnceF[i]) < 1e-6);
        }
    }

    void pendingFreesAreTheirOwnState()
    {
        // verl's snapshot: 9 active_pending_free blocks (597377024 B) and no trace. The figures
        // with the pending blocks apart were worked out with a standalone python3 reading of the
        // pickle (pickle.Unpickler with every global refused) over 'segments': per segment, the
        // blocks in order; active_allocated sums to allocated; runs of adjacent inactive blocks
        // are the free fragments (an active_pending_free block ends a run, as an allocated one
        // does): free 675822592 B in 95 fragments, largest 272629760 B (a whole inactive 260 MiB
        // segment), F = 1 - 272629760 / 675822592 = 0.5965956699. Counting the pending blocks as
        // free (runs of inactive and active_pending_free blocks, memory_viz's reading) gives the
        // catalogue's 1273199616 B, 95 fragments, largest 272629760 B, F 0.78587037.
        FSTEST_REQUIRE_DATA("pytorch-snapshots-features/verl-pools-pending-free.pickle");
        const QString o = importOk(
            dataDir() + "/pytorch-snapshots-features/verl-pools-pending-free.pickle", "pending");
        QVERIFY(!o.isEmpty());
        const CliResult r = runCli({"state", o, "--at", "end", "--json"});
        QCOMPARE(r.exitCode, 0);
        const QJsonObject s =
            QJsonDocument::fromJson(r.out).object()["states"].toArray()[0].toObject();
        QCOMPARE(s["reserved_bytes"].toInteger(), qint64{26189234176});
        QCOMPARE(s["allocated_bytes"].toInteger(), qint64{24916034560}); // active_allocated
        QCOMPARE(s["pending_free_blocks"].toInteger(), qint64{9});
        QCOMPARE(s["pending_free_bytes"].toInteger(), qint64{597377024});
        QCOMPARE(s["free_bytes"].toInteger(), qint64{675822592});
        QCOMPARE(s["fragment_count"].toInteger(), qint64{95});
        QCOMPARE(s["largest_free_bytes"].toInteger(), qint64{272629760});
        QVERIFY(std::abs(s["fragmentation_ratio"].toDouble() - 0.5965956699) < 1e-9);
        // memory_viz's figures, under their names.
        QCOMPARE(s["free_including_pending_bytes"].toInteger(), qint64{1273199616});
        QCOMPARE(s["largest_free_once_pending_complete_bytes"].toInteger(), qint64{272629760});
        QVERIFY(std::abs(s["fragmentation_ratio_once_pending_complete"].toDouble() - 0.78587037) <
                1e-8);
        // The text says both, and names the pending blocks.
        const CliResult t = runCli({"state", o, "--at", "end"});
        QCOMPARE(t.exitCode, 0);
        QVERIFY2(t.out.contains("pending free       569.70 MiB (597377024 B) in 9 blocks"),
                 t.out.constData());
        QVERIFY2(t.out.contains("free in regions    644.51 MiB (675822592 B)"), t.out.constData());
        QVERIFY2(t.out.contains("fragmentation F    0.596596"), t.out.constData());
        QVERIFY2(t.out.contains("once pending frees complete: free 1.19 GiB (1273199616 B), "
                                "largest 260.00 MiB (272629760 B), F 0.785870"),
                 t.out.constData());
    }

    void pendingFreeFixture_data()
    {
        // A hand-made snapshot (no shared data): one 8 MiB segment at 0x10000000 on stream 0,
        //   x [0, 2) MiB active_allocated (before the trace) | y [2, 3) inactive |
        //   z [3, 6) active_pending_free | w [6, 8) inactive,
        // and a trace: 10 µs alloc z, 20 free_requested z (never completed), 30 alloc u at w,
        // 40 free_requested u, 50 an OOM (another event while u waits), 60 free_completed u.
        // Worked out by hand (MiB):
        //   15 µs: allocated x + z = 5; free y 1 + w 2 in 2 fragments, largest 2, F 1/3.
        //   45 µs: allocated 2; pending z 3 + u 2 = 5 in 2 blocks; free y 1 (F 0); once they
        //          complete y, z and u are one 6 MiB run.
        //   end:   allocated 2; pending z 3; free y 1 + w 2, largest 2, F 1/3; once z completes,
        //          one 6 MiB run: F 0 (what memory_viz shows for this snapshot).
        QTest::addColumn<QString>("at");
        // allocated, pending blocks, pending, free, fragments, largest, largest once complete
        QTest::addColumn<QList<qint64>>("want");
        QTest::addColumn<double>("ratio");
        QTest::addColumn<double>("ratioOnce");
        QTest::newRow("15 us") << "15000" << QList<qint64>{5, 0, 0, 3, 2, 2, 2} << 1.0 / 3
                               << 1.0 / 3;
        QTest::newRow("45 us") << "45000" << QList<qint64>{2, 2, 5, 1, 1, 1, 6} << 0.0 << 0.0;
        QTest::newRow("end") << "end" << QList<qint64>{2, 1, 3, 3, 2, 2, 6} << 1.0 / 3 << 0.0;
    }
    void pendingFreeFixture()
    {
        QFETCH(QString, at);
        QFETCH(QList<qint64>, want);
        QFETCH(double, ratio);
        QFETCH(double, ratioOnce);
        constexpr int64_t MiB = 1 << 20, S = 0x10000000;
        const QString in = tmp_.filePath("pending-fixture.pickle");
        if (!QFile::exists(in)) {
            PickleWriter w;
            w.beginDict().key("segments").beginList();
            w.beginSegment(S, 8 * MiB)
                .key("stream")
                .integer(0)
                .key("blocks")
                .beginList()
                .block(2 * MiB, "active_allocated", 2 * MiB, S)
                .block(1 * MiB, "inactive", 0, S + 2 * MiB)
                .block(3 * MiB, "active_pending_free", 3 * MiB, S + 3 * MiB)
                .block(2 * MiB, "inactive", 0, S + 6 * MiB)
                .endList()
                .endDict();
            w.endList().key("device_traces").beginList().beginList();
            traceEntry(w, "alloc", S + 3 * MiB, 3 * MiB, 10);
            traceEntry(w, "free_requested", S + 3 * MiB, 3 * MiB, 20);
            traceEntry(w, "alloc", S + 6 * MiB, 2 * MiB, 30);
            traceEntry(w, "free_requested", S + 6 * MiB, 2 * MiB, 40);
            traceEntry(w, "oom", 0, 16 * MiB, 50);
            traceEntry(w, "free_completed", S + 6 * MiB, 2 * MiB, 60);
            w.endList().endList().endDict();
            QVERIFY(writeFile(in, w.finish()));
        }
        const QString o = importOk(in, "pending-fixture-" + at);
        QVERIFY(!o.isEmpty());
        const CliResult r = runCli({"state", o, "--at", at, "--json"});
        QCOMPARE(r.exitCode, 0);
        const QJsonObject st =
            QJsonDocument::fromJson(r.out).object()["states"].toArray()[0].toObject();
        QCOMPARE(st["reserved_bytes"].toInteger(), 8 * MiB);
        QCOMPARE(st["allocated_bytes"].toInteger(), want[0] * MiB);
        QCOMPARE(st["pending_free_blocks"].toInteger(), want[1]);
        QCOMPARE(st["pending_free_bytes"].toInteger(), want[2] * MiB);
        QCOMPARE(st["free_bytes"].toInteger(), want[3] * MiB);
        QCOMPARE(st["free_including_pending_bytes"].toInteger(), (want[2] + want[3]) * MiB);
        QCOMPARE(st["fragment_count"].toInteger(), want[4]);
        QCOMPARE(st["largest_free_bytes"].toInteger(), want[5] * MiB);
        QCOMPARE(st["largest_free_once_pending_complete_bytes"].toInteger(), want[6] * MiB);
        QVERIFY(std::abs(st["fragmentation_ratio"].toDouble() - ratio) < 1e-12);
        QVERIFY(std::abs(st["fragmentation_ratio_once_pending_complete"].toDouble() - ratioOnce) <
                1e-12);
    }

    void stacksAreKept()
    {
        FSTEST_REQUIRE_DATA("pytorch-snapshots/decomfl.pickle");
        // decomfl's trace entries carry Python frames: allocations must point at interned stacks.
        const QString o = importOk(dataDir() + "/pytorch-snapshots/decomfl.pickle", "stacks");
        QVERIFY(!o.isEmpty());
        fs::Session s = fs::Session::open(o.toStdString());
        QVERIFY(fs::store::debugQuery(s).scalar(
                    "SELECT count(*) FROM allocations WHERE stack IS NOT NULL") > 7000);
        QVERIFY(fs::store::debugQuery(s).scalar(
                    "SELECT count(*) FROM strings WHERE text LIKE '%module.py:%'") > 0);
        // Regions carry the segment type string.
        QCOMPARE(QString::fromStdString(fs::store::debugQuery(s).scalarText(
                     "SELECT s.text FROM regions r JOIN strings s ON s.id=r.segment_type LIMIT 1")),
                 QString("large"));
    }

    void truncatedRealFiles_data()
    {
        FSTEST_REQUIRE_DATA("pytorch-snapshots");
        QTest::addColumn<QString>("rel");
        QTest::addColumn<double>("fraction");
        const QStringList files = realFiles();
        if (files.isEmpty()) QTest::newRow("no data") << QString() << 0.5;
        for (const QString& f : files) {
            QTest::newRow(qPrintable(f + " @50%")) << f << 0.5;
            QTest::newRow(qPrintable(f + " @99%")) << f << 0.99;
        }
    }
    void truncatedRealFiles()
    {
        QFETCH(QString, rel);
        QFETCH(double, fraction);
        QFile f(dataDir() + "/" + rel);
        QVERIFY(f.open(QIODevice::ReadOnly));
        const QByteArray all = f.readAll();
        const auto cut = static_cast<qsizetype>(static_cast<double>(all.size()) * fraction);
        const QString in = tmp_.filePath("cut.pickle");
        QVERIFY(writeFile(in, all.left(cut)));
        const QString o = out("cut");
        const CliResult r = runCli({"import", in, "-o", o});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains(in.toUtf8() + ": offset "), r.err.constData());
        QVERIFY2(r.err.contains("truncated"), r.err.constData());
        QCOMPARE(r.err.count('\n'), 1); // one clear error
        QVERIFY(!QFile::exists(o));
    }

    void hostilePickleIsRefused()
    {
        // A classic payload: os.system('id') through GLOBAL/REDUCE. Byte 2 is GLOBAL.
        const QString in = tmp_.filePath("evil.pickle");
        QVERIFY(writeFile(in, QByteArray("\x80\x02"
                                         "cos\nsystem\nX\x02\x00\x00\x00id\x85R.",
                                         24)));
        const QString o = out("evil");
        const CliResult r = runCli({"import", in, "-o", o});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("offset 2: refused opcode GLOBAL"), r.err.constData());
        QVERIFY(!QFile::exists(o));
    }

    void selfReferentialSettingsStayBounded()
    {
        // allocator_settings = {"x": L} with L = [L, L] through the memo: plain data, but
        // converting it to JSON naively would take 2^depth steps. The import finishes and keeps
        // a bounded text.
        QByteArray p("\x80\x02}q\x00(X\x08\x00\x00\x00"
                     "segments]X\x12\x00\x00\x00"
                     "allocator_settings}q\x01X\x01\x00\x00\x00"
                     "x]q\x02(h\x02h\x02"
                     "esu.",
                     64);
        const QString in = tmp_.filePath("cyclic.pickle");
        QVERIFY(writeFile(in, p));
        const QString o = importOk(in, "cyclic");
        QVERIFY(!o.isEmpty());
        fs::Session s = fs::Session::open(o.toStdString());
        const std::string settings = s.meta("allocator_settings");
        QVERIFY(settings.rfind("{\"x\": [[", 0) == 0);
        QVERIFY(settings.size() < 2'000'000);
    }

    void notASnapshot()
    {
        // A valid pickle of a list of ints is not a snapshot: structure error, exit 2.
        const QString in = tmp_.filePath("list.pickle");
        QVERIFY(writeFile(in, PickleWriter().beginDict().key("x").integer(1).endDict().finish()));
        const CliResult r = runCli({"import", in, "-o", out("list")});
        QCOMPARE(r.exitCode, 2);
        QVERIFY2(r.err.contains("no 'segments'"), r.err.constData());
        QVERIFY(!QFile::exists(out("list")));
    }

    void withMetricsTable()
    {
        FSTEST_REQUIRE_DATA("pytorch-snapshots/cs336-silmont2000-small.pickle");
        // A snapshot plus a per-frame metrics CSV in one session (the CSV goes through
        // `fragscope metrics import`); a bad table leaves no output behind.
        const QString csv = tmp_.filePath("metrics.csv");
        QVERIFY(writeFile(
            csv, "frame,metric,value\n16,coherence_score,0.124\n17,coherence_score,0.009\n"));
        const QString o = out("withmetrics");
        const CliResult r =
            runCli({"import", dataDir() + "/pytorch-snapshots/cs336-silmont2000-small.pickle", csv,
                    "-o", o});
        QVERIFY2(r.exitCode == 0, r.err.constData());
        fs::Session s = fs::Session::open(o.toStdString());
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM frame_metrics"), int64_t{2});
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT count(*) FROM frame_metrics WHERE frame=17 AND value=0.009"),
                 int64_t{1});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM regions"), int64_t{9});

        const QString bad = tmp_.filePath("bad.csv");
        QVERIFY(writeFile(bad, "frame,metric,value\n16,coherence_score,notanumber\n"));
        const QString o2 = out("badmetrics");
        const CliResult r2 =
            runCli({"import", dataDir() + "/pytorch-snapshots/cs336-silmont2000-small.pickle", bad,
                    "-o", o2});
        QCOMPARE(r2.exitCode, 2);
        QVERIFY(!QFile::exists(o2));
    }

    void traceReferencesAbsentAddresses()
    {
        // One 4096 B segment at 0x10000: a 1024 B block allocated at its start, 3072 B free.
        // Trace (µs): 10 free_completed 0x10800 (256 B, allocated before the trace: absent
        // from the final state), 20 alloc 0x90000 (512 B, outside every segment), 30 its free,
        // 40 alloc 0x10000 (the final block).
        PickleWriter w;
        w.beginDict().key("segments").beginList();
        w.beginSegment(0x10000, 4096)
            .key("device")
            .integer(0)
            .key("stream")
            .integer(0)
            .key("segment_type")
            .str("small")
            .key("is_expandable")
            .boolean(false)
            .key("blocks")
            .beginList()
            .block(1024, "active_allocated", 1000, 0x10000)
            .block(3072, "inactive", 0, 0x10400)
            .endList()
            .endDict();
        w.endList().key("device_traces").beginList().beginList();
        auto entry = [&](const char* action, int64_t addr, int64_t size, int64_t t) {
            w.beginDict()
                .key("action")
                .str(action)
                .key("addr")
                .integer(addr)
                .key("size")
                .integer(size)
                .key("stream")
                .integer(0)
                .key("time_us")
                .integer(t)
                .endDict();
        };
        entry("free_requested", 0x10800, 256, 9);
        entry("free_completed", 0x10800, 256, 10);
        entry("alloc", 0x90000, 512, 20);
        entry("free_completed", 0x90000, 512, 30);
        entry("alloc", 0x10000, 1000, 40);
        w.endList().endList().endDict();
        const QString in = tmp_.filePath("absent.pickle");
        QVERIFY(writeFile(in, w.finish()));
        const QString o = importOk(in, "absent");
        QVERIFY(!o.isEmpty());
        fs::Session s = fs::Session::open(o.toStdString());
        // 0x10800 existed before the trace: placed at the first entry (9 µs), freed when its free
        // was requested (9 µs: PyTorch counts a block waiting on streams as free). Its
        // free_completed is the very next entry (10 µs): no other event saw it wait, so no
        // pending_frees row is kept.
        QCOMPARE(
            fs::store::debugQuery(s).scalar("SELECT alloc_ns FROM allocations WHERE address=67584"),
            int64_t{9000});
        QCOMPARE(
            fs::store::debugQuery(s).scalar("SELECT free_ns FROM allocations WHERE address=67584"),
            int64_t{9000});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM pending_frees"), int64_t{0});
        QCOMPARE(QString::fromStdString(s.meta("pytorch.preexisting_allocations")), QString("1"));
        // 0x90000 lies outside every segment: kept, and flagged.
        QCOMPARE(
            fs::store::debugQuery(s).scalar("SELECT free_ns FROM allocations WHERE address=589824"),
            int64_t{30000});
        QCOMPARE(
            fs::store::debugQuery(s).scalar(
                "SELECT count(*) FROM anomalies WHERE kind='outside_region' AND address=589824"),
            int64_t{1});
        // The final block keeps its block size (1024) and requested size (1000), not the
        // trace's 1000, so the end state is the snapshot's: 1024 allocated, one 3072 B fragment.
        QCOMPARE(
            fs::store::debugQuery(s).scalar("SELECT size FROM allocations WHERE address=65536"),
            int64_t{1024});
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT requested_size FROM allocations WHERE address=65536"),
                 int64_t{1000});
        const EndState e = endState(fs::store::debugQuery(s), 0);
        QCOMPARE(e.reserved, uint64_t{4096});
        QCOMPARE(e.allocated, uint64_t{1024});
        QCOMPARE(e.fragments, int64_t{1});
        QCOMPARE(e.largest, uint64_t{3072});
        QCOMPARE(s.summary().health.warnings.size(), size_t{0});
    }

    void annotationsBecomeFramesRangesAndMetrics()
    {
        // One free 4096 B segment; a trace of one alloc (5 µs) and its free (40/41 µs), so the
        // time axis is ns. external_annotations (record_function ranges), in µs:
        //   frame 0 10..20, forward 12..18, frame 1 20..30, "metric coherence_score=0.5" 25..25
        //   (no frame=: the current frame, 1), "metric id_match_rate=0.9 frame=0" 26..27,
        //   frame 2 START 30 without END (a mark: it lasts until the session's last event, the free
        //   requested at 40 µs; the completion right after it leaves no event), and
        //   an END "stray" without START (skipped, with a warning).
        PickleWriter w;
        w.beginDict().key("segments").beginList();
        w.beginSegment(0x10000, 4096)
            .key("blocks")
            .beginList()
            .block(4096, "inactive")
            .endList()
            .endDict();
        w.endList().key("device_traces").beginList().beginList();
        auto entry = [&](const char* action, int64_t t) {
            w.beginDict()
                .key("action")
                .str(action)
                .key("addr")
                .integer(0x10000)
                .key("size")
                .integer(1024)
                .key("stream")
                .integer(0)
                .key("time_us")
                .integer(t)
                .endDict();
        };
        entry("alloc", 5);
        entry("free_requested", 40);
        entry("free_completed", 41);
        w.endList().endList().key("external_annotations").beginList();
        auto ann = [&](const char* stage, const char* name, int64_t t) {
            w.beginDict()
                .key("stage")
                .str(stage)
                .key("name")
                .str(name)
                .key("device")
                .integer(0)
                .key("time_us")
                .integer(t)
                .endDict();
        };
        ann("START", "frame 0", 10);
        ann("START", "forward", 12);
        ann("END", "forward", 18);
        ann("END", "frame 0", 20);
        ann("START", "frame 1", 20);
        ann("START", "metric coherence_score=0.5", 25);
        ann("END", "metric coherence_score=0.5", 25);
        ann("START", "metric id_match_rate=0.9 frame=0", 26);
        ann("END", "metric id_match_rate=0.9 frame=0", 27);
        ann("END", "frame 1", 30);
        ann("START", "frame 2", 30);
        ann("END", "stray", 35);
        w.endList().endDict();
        const QString in = tmp_.filePath("annotations.pickle");
        QVERIFY(writeFile(in, w.finish()));
        const QString o = importOk(in, "annotations");
        QVERIFY(!o.isEmpty());
        fs::Session s = fs::Session::open(o.toStdString());
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM frames"), int64_t{3});
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT start_ns*100000+end_ns FROM frames WHERE idx=0"),
                 int64_t{10000} * 100000 + 20000);
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT start_ns*100000+end_ns FROM frames WHERE idx=1"),
                 int64_t{20000} * 100000 + 30000);
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT start_ns*100000+end_ns FROM frames WHERE idx=2"),
                 int64_t{30000} * 100000 + 40000);
        // forward: a named range on the timeline.
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT m.time_ns*100000+m.end_ns FROM markers m JOIN strings t"
                     " ON t.id=m.message WHERE t.text='forward'"),
                 int64_t{12000} * 100000 + 18000);
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM frame_metrics"), int64_t{2});
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT frame FROM frame_metrics WHERE name='coherence_score'"),
                 int64_t{1});
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT frame FROM frame_metrics WHERE name='id_match_rate'"),
                 int64_t{0});
        bool warned = false;
        for (const auto& wmsg : s.summary().health.warnings)
            warned =
                warned || wmsg.find("1 external annotations had no START") != std::string::npos;
        QVERIFY(warned);
    }

    void inconsistentTraceIsCorrectedWithWarning()
    {
        // The final state says 0x10000 is allocated, but the trace's last word on it is a
        // free: the replay ends with it free, so the importer re-allocates it at the end and
        // warns, and the end state still equals the snapshot's (1024 allocated of 4096).
        PickleWriter w;
        w.beginDict().key("segments").beginList();
        w.beginSegment(0x10000, 4096)
            .key("blocks")
            .beginList()
            .block(1024, "active_allocated", 1024)
            .block(3072, "inactive", 0)
            .endList()
            .endDict();
        w.endList().key("device_traces").beginList().beginList();
        w.beginDict()
            .key("action")
            .str("free_completed")
            .key("addr")
            .integer(0x10000)
            .key("size")
            .integer(1024)
            .key("time_us")
            .integer(5)
            .endDict();
        w.endList().endList().endDict();
        const QString in = tmp_.filePath("inconsistent.pickle");
        QVERIFY(writeFile(in, w.finish()));
        const QString o = importOk(in, "inconsistent");
        QVERIFY(!o.isEmpty());
        fs::Session s = fs::Session::open(o.toStdString());
        const EndState e = endState(fs::store::debugQuery(s), 0);
        QCOMPARE(e.allocated, uint64_t{1024});
        QCOMPARE(e.free, uint64_t{3072});
        bool warned = false;
        for (const auto& wmsg : s.summary().health.warnings)
            warned = warned || wmsg.find("corrected at the end") != std::string::npos;
        QVERIFY(warned);
    }

    void segmentsCreatedAndFreed()
    {
        // Final: one 4096 B segment A at 0x10000, all free. Trace (µs): 1 segment_alloc B
        // (0x20000, 2 MiB), 2 segment_free B, 3 segment_free C (0x400000, 2 MiB, created before
        // the trace). Undoing: C existed at the start (type inferred 'small': <= 2 MiB), B did not.
        PickleWriter w;
        w.beginDict().key("segments").beginList();
        w.beginSegment(0x10000, 4096)
            .key("segment_type")
            .str("large")
            .key("blocks")
            .beginList()
            .block(4096, "inactive", 0)
            .endList()
            .endDict();
        w.endList().key("device_traces").beginList().beginList();
        auto entry = [&](const char* action, int64_t addr, int64_t size, int64_t t) {
            traceEntry(w, action, addr, size, t);
        };
        entry("segment_alloc", 0x20000, 0x200000, 1);
        entry("segment_free", 0x20000, 0x200000, 2);
        entry("segment_free", 0x400000, 0x200000, 3);
        w.endList().endList().endDict();
        const QString in = tmp_.filePath("segments.pickle");
        QVERIFY(writeFile(in, w.finish()));
        const QString o = importOk(in, "segments");
        QVERIFY(!o.isEmpty());
        fs::Session s = fs::Session::open(o.toStdString());
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM regions"), int64_t{3});
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT create_ns*10000+destroy_ns FROM regions WHERE address=131072"),
                 int64_t{1000 * 10000 + 2000});
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT create_ns*10000+destroy_ns FROM regions WHERE address=4194304"),
                 int64_t{1000 * 10000 + 3000});
        QCOMPARE(QString::fromStdString(fs::store::debugQuery(s).scalarText(
                     "SELECT s.text FROM regions r JOIN strings s ON "
                     "s.id=r.segment_type WHERE r.address=4194304")),
                 QString("small"));
        const EndState e = endState(fs::store::debugQuery(s), 0);
        QCOMPARE(e.reserved, uint64_t{4096});
        QCOMPARE(e.fragments, int64_t{1});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM anomalies"), int64_t{0});
    }

    void freedBlocksGetTheSizePyTorchCounts()
    {
        // The trace records a request's size (orig_size); PyTorch's allocated_bytes counts the
        // block it got: rounded to 512 B, plus the rest of the free block when too little would
        // remain to split off. Final state: nothing. Trace (µs), default settings:
        //  1 segment_alloc L 0x1000000, 20 MiB (20,971,520 B)
        //  2 alloc 0x1000000, 20,271,520 B: rounded 39,593 x 512 = 20,271,616; 699,904 B would
        //    remain, not more than 1 MiB, so the large pool does not split: block 20,971,520
        //  3/4 free_requested / free_completed 0x1000000
        //  5 alloc 0x1000000, 8,388,708 B: rounded 8,389,120; 12,582,400 B remain (> 1 MiB):
        //    split, block 8,389,120
        //  6 alloc 0x1800200 (right after it), 4,000,000 B: rounded 4,000,256, split: 4,000,256
        //  7/8 free 0x1000000 (requested, completed), 9/10 free 0x1800200
        //  11 segment_alloc S 0x3000000, 2 MiB; 12 alloc 0x3000000, 1000 B: small pool, 1024
        //  13/14 free; 15 segment_free S; 16 segment_free L
        PickleWriter w;
        w.beginDict().key("segments").beginList().endList();
        w.key("device_traces").beginList().beginList();
        auto entry = [&](const char* action, int64_t addr, int64_t size, int64_t t) {
            traceEntry(w, action, addr, size, t);
        };
        entry("segment_alloc", 0x1000000, 20971520, 1);
        entry("alloc", 0x1000000, 20271520, 2);
        entry("free_requested", 0x1000000, 20271520, 3);
        entry("free_completed", 0x1000000, 20271520, 4);
        entry("alloc", 0x1000000, 8388708, 5);
        entry("alloc", 0x1800200, 4000000, 6);
        entry("free_requested", 0x1000000, 8388708, 7);
        entry("free_completed", 0x1000000, 8388708, 8);
        entry("free_requested", 0x1800200, 4000000, 9);
        entry("free_completed", 0x1800200, 4000000, 10);
        entry("segment_alloc", 0x3000000, 2097152, 11);
        entry("alloc", 0x3000000, 1000, 12);
        entry("free_requested", 0x3000000, 1000, 13);
        entry("free_completed", 0x3000000, 1000, 14);
        entry("segment_free", 0x3000000, 2097152, 15);
        entry("segment_free", 0x1000000, 20971520, 16);
        w.endList().endList().endDict();
        const QString in = tmp_.filePath("blocks.pickle");
        QVERIFY(writeFile(in, w.finish()));
        const QString o = importOk(in, "blocks");
        QVERIFY(!o.isEmpty());
        fs::Session s = fs::Session::open(o.toStdString());
        const QString got = QString::fromStdString(fs::store::debugQuery(s).scalarText(
            "SELECT group_concat(size || '/' || requested_size, ' ') FROM (SELECT size, "
            "requested_size FROM allocations ORDER BY alloc_ns)"));
        QCOMPARE(got, QString("20971520/20271520 8389120/8388708 4000256/4000000 1024/1000"));
        // The frees name the block as allocated: no size mismatch reported.
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM anomalies"), int64_t{0});
    }

    void expandableSegments()
    {
        // Final: one expandable segment, mapped [0x200000, 0x400000), a 1 MiB block allocated
        // at its start. Trace: map [0x200000, 0x600000) at 1 µs, alloc at 2 µs, unmap
        // [0x400000, 0x600000) at 3 µs. Undoing it, nothing was mapped before the trace.
        PickleWriter w;
        w.beginDict().key("segments").beginList();
        w.beginSegment(0x200000, 0x200000)
            .key("is_expandable")
            .boolean(true)
            .key("segment_type")
            .str("large")
            .key("blocks")
            .beginList()
            .block(0x100000, "active_allocated", 0x100000, 0x200000)
            .block(0x100000, "inactive", 0, 0x300000)
            .endList()
            .endDict();
        w.endList().key("device_traces").beginList().beginList();
        auto entry = [&](const char* action, int64_t addr, int64_t size, int64_t t) {
            traceEntry(w, action, addr, size, t);
        };
        entry("segment_map", 0x200000, 0x400000, 1);
        entry("alloc", 0x200000, 0x100000, 2);
        entry("segment_unmap", 0x400000, 0x200000, 3);
        w.endList().endList().endDict();
        const QString in = tmp_.filePath("expandable.pickle");
        QVERIFY(writeFile(in, w.finish()));
        const QString o = importOk(in, "expandable");
        QVERIFY(!o.isEmpty());
        fs::Session s = fs::Session::open(o.toStdString());
        // One reservation spanning every mapping seen: [0x200000, 0x600000), flagged expandable.
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM regions WHERE expandable=1"),
                 int64_t{1});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT size FROM regions WHERE expandable=1"),
                 int64_t{0x400000});
        // Mapped parts: the 4 MiB mapping ends at 3 µs, its first half is mapped again then.
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT count(*) FROM region_mappings"),
                 int64_t{2});
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT unmap_ns FROM region_mappings WHERE size=4194304"),
                 int64_t{3000});
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT map_ns FROM region_mappings WHERE size=2097152 AND unmap_ns IS NULL"),
                 int64_t{3000});
        const EndState e = endState(fs::store::debugQuery(s), 0);
        QCOMPARE(e.reserved, uint64_t{0x200000});
        QCOMPARE(e.allocated, uint64_t{0x100000});
        QCOMPARE(e.fragments, int64_t{1});
        QCOMPARE(e.largest, uint64_t{0x100000});
    }
};

QTEST_GUILESS_MAIN(TestImportSnapshot)
#include "tst_import_snapshot.moc"
