// Ingest: pairing, regions, reordering, anomalies, frames/metrics from markers, crash safety.
#include "core/store/debug_query.h"
#include "core/store/ingest.h"
#include "core/store/session.h"
#include "sessionbuilder.h"
#include "testutil.h"

#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QTest>

#include <QThread>
#include <algorithm>
#include <array>
#include <csignal>
#include <random>
#include <sys/wait.h>
#include <thread>
#include <type_traits>
#include <unistd.h>

using namespace fs;
using fstest::ev;

// Interned string and stack ids are distinct types: neither converts to the other, to or from a
// plain integer, or to bool without asking; a number becomes an id only explicitly.
static_assert(!std::is_convertible_v<StringId, StackId>);
static_assert(!std::is_convertible_v<StackId, StringId>);
static_assert(!std::is_convertible_v<uint32_t, StringId>);
static_assert(!std::is_convertible_v<uint32_t, StackId>);
static_assert(!std::is_convertible_v<uint64_t, StackId>);
static_assert(!std::is_convertible_v<int, StringId>);
static_assert(!std::is_convertible_v<StringId, uint32_t>);
static_assert(!std::is_convertible_v<StackId, uint64_t>);
static_assert(!std::is_convertible_v<StackId, bool>); // explicit operator bool only
static_assert(std::is_constructible_v<StackId, uint32_t>);
static_assert(StackId{7}.value == 7 && !kNoStack && !kNoString && StringId{1});
static_assert(StringId{1} < StringId{2} && StackId{3} == StackId{3});
static_assert(sizeof(StackId) == 4 && sizeof(StringId) == 4);

namespace {
constexpr uint64_t kBase = 0x7f0000000000;
}

class TstIngest : public QObject
{
    Q_OBJECT
private:
    QTemporaryDir dir_;
    std::string path(const char* name) const { return (dir_.path() + "/" + name).toStdString(); }

    static IngestOptions opts(const std::string& p)
    {
        IngestOptions o;
        o.path = p;
        o.sourceKind = "test";
        return o;
    }

    // "" when both files hold the same rows in the tables ingest writes, else the first
    // difference.
    static std::string rowsDiffer(const std::string& plain, const std::string& other)
    {
        Session a = Session::open(plain), b = Session::open(other);
        for (const char* q :
             {"SELECT * FROM allocations ORDER BY id", "SELECT * FROM strings ORDER BY id",
              "SELECT * FROM stacks ORDER BY id, depth", "SELECT * FROM regions ORDER BY id",
              "SELECT * FROM region_mappings ORDER BY id", "SELECT * FROM graph_execs ORDER BY id",
              "SELECT * FROM markers ORDER BY id", "SELECT * FROM frames ORDER BY idx",
              "SELECT * FROM kernels ORDER BY id", "SELECT * FROM anomalies ORDER BY id",
              "SELECT time_ns, kind, value, detail FROM capture_health ORDER BY id"}) {
            Stmt x = fs::store::debugQuery(a).prepare(q), y = fs::store::debugQuery(b).prepare(q);
            int64_t rows = 0;
            while (true) {
                const bool hx = x.step(), hy = y.step();
                if (hx != hy)
                    return std::string(q) + ": row counts differ after " + std::to_string(rows);
                if (!hx) break;
                ++rows;
                for (int c = 0; c < sqlite3_column_count(x.raw()); ++c)
                    if (x.text(c) != y.text(c))
                        return std::string(q) + ": row " + std::to_string(rows) + " column " +
                               std::to_string(c) + ": " + x.text(c) + " != " + y.text(c);
            }
            if (rows == 0 && std::string(q).find("anomalies") == std::string::npos)
                return std::string(q) + ": no rows";
        }
        return {};
    }

private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void pairsAllocationsIntoRegions()
    {
        const auto f = path("pair.fragscope");
        Ingest in(opts(f));
        in.begin();
        in.add(ev(EventType::RegionCreate, 0, kBase, 2 << 20));
        in.add(ev(EventType::RegionCreate, 1, kBase + (4 << 20), 2 << 20));
        Event a = ev(EventType::Alloc, 10, kBase + 512, 1024);
        a.requestedSize = 1000;
        a.stream = 7;
        a.name = in.intern("attn.kv_cache");
        in.add(a);
        in.add(ev(EventType::Alloc, 11, kBase + (4 << 20), 4096));
        in.add(ev(EventType::Free, 20, kBase + 512));
        in.add(ev(EventType::RegionDestroy, 30, kBase));
        in.end();

        Session s = Session::open(f);
        Stmt st = fs::store::debugQuery(s).prepare(
            "SELECT a.region_id, a.address, a.size, a.requested_size, a.stream,"
            " a.alloc_ns, a.free_ns, t.text FROM allocations a"
            " LEFT JOIN strings t ON t.id = a.tag ORDER BY a.id");
        QVERIFY(st.step());
        QCOMPARE(st.i64(0), int64_t{1});
        QCOMPARE(st.u64(1), kBase + 512);
        QCOMPARE(st.u64(2), uint64_t{1024});
        QCOMPARE(st.u64(3), uint64_t{1000});
        QCOMPARE(st.i64(4), int64_t{7});
        QCOMPARE(st.i64(5), int64_t{10});
        QCOMPARE(st.i64(6), int64_t{20});
        QCOMPARE(st.text(7), std::string("attn.kv_cache"));
        QVERIFY(st.step());
        QCOMPARE(st.i64(0), int64_t{2}); // second region
        QVERIFY(st.isNull(6));           // alive at the end
        QVERIFY(!st.step());
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT destroy_ns FROM regions WHERE id=1"),
                 int64_t{30});
        QVERIFY(fs::store::debugQuery(s).scalar(
                    "SELECT destroy_ns IS NULL FROM regions WHERE id=2") == 1);
        const auto sum = s.summary();
        QCOMPARE(sum.health.anomalies.at(std::string(anomaly::AliveAtEnd)), int64_t{1});
        QCOMPARE(sum.health.anomalyTotal(), int64_t{1});
    }

    void endWaitsForAViewerToClose()
    {
        // A live viewer (the GUI following a recording) opens a connection on the file for each
        // refresh. SQLite refuses to leave WAL mode while another connection is open, at once
        // and without the busy handler, so a stop that landed inside a refresh failed the whole
        // recording with "database is locked". end() now waits for the viewer to let go.
        const auto f = path("viewer.fragscope");
        Ingest in(opts(f));
        in.begin();
        in.add(ev(EventType::RegionCreate, 0, kBase, 1 << 20));
        in.add(ev(EventType::Alloc, 10, kBase, 4096));
        in.tick();
        auto viewer = std::make_unique<Session>(Session::open(f, false));
        QCOMPARE(fs::store::debugQuery(*viewer).scalar("SELECT COUNT(*) FROM allocations"),
                 int64_t{0}); // live
        std::thread closer([&] {
            std::this_thread::sleep_for(std::chrono::milliseconds(300));
            viewer.reset();
        });
        std::string error;
        try {
            in.end();
        } catch (const std::exception& e) {
            error = e.what(); // before: "...: database is locked"
        }
        closer.join();
        QVERIFY2(error.empty(), error.c_str());
        Session s = Session::open(f);
        QCOMPARE(fs::store::debugQuery(s).scalarText("PRAGMA journal_mode"), std::string("delete"));
        QVERIFY(!QFile::exists(QString::fromStdString(f + "-wal")));
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT COUNT(*) FROM allocations"), int64_t{1});
        QCOMPARE(fs::store::debugQuery(s).scalarText("SELECT value FROM meta WHERE key = 'state'"),
                 std::string("complete"));
    }

    void endKeepsWalWhenAViewerStays()
    {
        // A viewer that never lets go: after leaveWalWaitMs the session is finished all the
        // same (everything is committed), in WAL mode, and opens like any other.
        const auto f = path("viewer-stays.fragscope");
        IngestOptions o = opts(f);
        o.leaveWalWaitMs = 50;
        Ingest in(o);
        in.begin();
        in.add(ev(EventType::RegionCreate, 0, kBase, 1 << 20));
        in.add(ev(EventType::Alloc, 10, kBase, 4096));
        in.add(ev(EventType::Free, 20, kBase));
        in.tick();
        {
            Session viewer = Session::open(f, false);
            std::string error;
            try {
                in.end();
            } catch (const std::exception& e) {
                error = e.what();
            }
            QVERIFY2(error.empty(), error.c_str());
            QCOMPARE(fs::store::debugQuery(viewer).scalarText("PRAGMA journal_mode"),
                     std::string("wal"));
        }
        Session s = Session::open(f);
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT COUNT(*) FROM allocations"), int64_t{1});
        QCOMPARE(fs::store::debugQuery(s).scalarText("SELECT value FROM meta WHERE key = 'state'"),
                 std::string("complete"));
    }

    void regionsNestAcrossLevels()
    {
        // An NVTX heap (framework level) registered over a cudaMalloc (a driver-level region at
        // the same address): neither overlaps the other, framework allocations land in the heap,
        // and the cudaFree destroys the driver region only. No anomaly at all.
        const auto f = path("nest.fragscope");
        Ingest in(opts(f));
        in.begin();
        in.add(ev(EventType::RegionCreate, 0, kBase, 16 << 20, Level::Driver));
        in.add(ev(EventType::RegionCreate, 1, kBase, 16 << 20, Level::Framework));
        in.add(ev(EventType::Alloc, 2, kBase + 4096, 4096, Level::Framework));
        in.add(ev(EventType::Free, 3, kBase + 4096, 0, Level::Framework));
        in.add(ev(EventType::RegionDestroy, 4, kBase, 0, Level::Framework));
        in.add(ev(EventType::RegionDestroy, 5, kBase, 0, Level::Driver));
        in.end();
        Session s = Session::open(f);
        QCOMPARE(s.summary().health.anomalyTotal(), int64_t{0});
        // Region 2 is the heap: the allocation is in it; each region ends at its own time.
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT region_id FROM allocations"), int64_t{2});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT destroy_ns FROM regions WHERE id=1"),
                 int64_t{5});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT destroy_ns FROM regions WHERE id=2"),
                 int64_t{4});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT level FROM regions WHERE id=2"),
                 int64_t{static_cast<int>(Level::Framework)});
    }

    void mappedPiecesStayMaximal()
    {
        // An expandable reservation of 64 MiB at B, reported page run by page run (MiB):
        //   t1 map [0, 2)    -> row 1 [0, 2)
        //   t2 map [2, 4)    -> touches row 1: row 1 ends at 2, row 2 [0, 4)
        //   t3 map [8, 10)   -> row 3 [8, 10) (a gap of 4 MiB: no join)
        //   t4 map [4, 8)    -> touches rows 2 and 3: both end at 4, row 4 [0, 10)
        //   t5 unmap [1, 3)  -> row 4 ends at 5; row 5 [0, 1) and row 6 [3, 10)
        //   t6 unmap [0, 10) -> rows 5 and 6 end at 6 (one unmap over two pieces)
        //   t7 unmap [20, 22) hits nothing: one anomaly, no row.
        // Alive at 5.5: [0, 1) and [3, 10), 8 MiB, which never touch.
        const auto f = path("pieces.fragscope");
        constexpr uint64_t M = 1 << 20;
        Ingest in(opts(f));
        in.begin();
        Event r = ev(EventType::RegionCreate, 0, kBase, 64 * M, Level::Framework);
        r.flags = 1;
        in.add(r);
        in.add(ev(EventType::RegionMap, 1, kBase, 2 * M, Level::Framework));
        in.add(ev(EventType::RegionMap, 2, kBase + 2 * M, 2 * M, Level::Framework));
        in.add(ev(EventType::RegionMap, 3, kBase + 8 * M, 2 * M, Level::Framework));
        in.add(ev(EventType::RegionMap, 4, kBase + 4 * M, 4 * M, Level::Framework));
        in.add(ev(EventType::RegionUnmap, 5, kBase + 1 * M, 2 * M, Level::Framework));
        in.add(ev(EventType::RegionUnmap, 6, kBase, 10 * M, Level::Framework));
        in.add(ev(EventType::RegionUnmap, 7, kBase + 20 * M, 2 * M, Level::Framework));
        in.end();
        Session s = Session::open(f);
        Stmt q = fs::store::debugQuery(s).prepare(
            "SELECT address - ?1, size, map_ns, unmap_ns FROM region_mappings"
            " ORDER BY id");
        q.bind(1, static_cast<int64_t>(kBase));
        const std::vector<std::array<int64_t, 4>> want = {
            {0, 2 * M, 1, 2},  {0, 4 * M, 2, 4}, {8 * M, 2 * M, 3, 4},
            {0, 10 * M, 4, 5}, {0, 1 * M, 5, 6}, {3 * M, 7 * M, 5, 6}};
        size_t n = 0;
        for (; q.step(); ++n) {
            QVERIFY(n < want.size());
            for (int c = 0; c < 4; ++c)
                QCOMPARE(q.i64(c), want[n][size_t(c)]);
        }
        QCOMPARE(n, want.size());
        QCOMPARE(s.summary().health.anomalyTotal(), int64_t{1});
    }

    void internsStringsOnce()
    {
        const auto f = path("strings.fragscope");
        Ingest in(opts(f));
        in.begin();
        const StringId a = in.intern("gemm_kernel");
        const StringId b = in.intern("other");
        QCOMPARE(in.intern("gemm_kernel"), a);
        QVERIFY(a != b);
        QCOMPARE(in.intern(""), kNoString);
        in.end();
        Session s = Session::open(f);
        QCOMPARE(s.string(a), std::string("gemm_kernel"));
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT COUNT(*) FROM strings WHERE text='gemm_kernel'"),
                 int64_t{1});
    }

    // Stacks are interned once per distinct frame list, ids counting from 1; an Alloc carries
    // its stack id in Event::aux and the allocation row keeps it.
    void internsStacksOnce()
    {
        const auto f = path("stacks.fragscope");
        Ingest in(opts(f));
        in.begin();
        const StringId inner = in.intern("block (kv.py:88)");
        const StringId outer = in.intern("forward (model.py:412)");
        const StackId s1 = in.internStack({inner, outer});
        const StackId s2 = in.internStack({outer});
        QCOMPARE(s1, StackId{1});
        QCOMPARE(s2, StackId{2});
        QCOMPARE(in.internStack({inner, outer}), s1);
        in.add(ev(EventType::RegionCreate, 0, kBase, 1 << 20));
        Event a = ev(EventType::Alloc, 1, kBase, 4096);
        a.aux = s2.value;
        in.add(a);
        in.add(ev(EventType::Alloc, 2, kBase + 4096, 4096)); // no stack: aux 0
        in.end();
        Session s = Session::open(f);
        // s1 has two frames, s2 one: three rows; the first allocation names s2, the second none.
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT COUNT(*) FROM stacks"), int64_t{3});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT frame FROM stacks WHERE id=1 AND depth=1"),
                 int64_t{outer.value});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT stack FROM allocations WHERE alloc_ns=1"),
                 int64_t{2});
        QCOMPARE(
            fs::store::debugQuery(s).scalar("SELECT COUNT(*) FROM allocations WHERE stack IS NULL"),
            int64_t{1});
    }

    // Events shuffled within the reorder window give exactly the same session as ordered ones.
    void reordersWithinWindow()
    {
        std::vector<Event> events;
        events.push_back(ev(EventType::RegionCreate, 0, kBase, 64 << 20));
        for (int i = 0; i < 5000; ++i) {
            events.push_back(
                ev(EventType::Alloc, 1000 + 10 * i, kBase + 4096ull * (i % 100), 4096));
            events.push_back(ev(EventType::Free, 1005 + 10 * i, kBase + 4096ull * (i % 100)));
        }
        auto dump = [&](const std::vector<Event>& in, const char* name, int64_t window,
                        size_t maxEvents = size_t{1} << 20) {
            const auto f = path(name);
            IngestOptions o = opts(f);
            o.reorderWindowNs = window;
            o.reorderMaxEvents = maxEvents;
            Ingest ing(o);
            ing.begin();
            for (const auto& e : in)
                ing.add(e);
            ing.end();
            Session s = Session::open(f);
            std::string out;
            Stmt st = fs::store::debugQuery(s).prepare(
                "SELECT address, size, alloc_ns, free_ns FROM allocations ORDER BY alloc_ns");
            while (st.step())
                out += std::to_string(st.u64(0)) + "," + std::to_string(st.i64(2)) + "," +
                       std::to_string(st.i64(3)) + ";";
            out += "anomalies=" + std::to_string(s.summary().health.anomalyTotal());
            return out;
        };
        const std::string ordered = dump(events, "ordered.fragscope", 0);
        // Shuffle inside blocks of 40 events (spanning < 200 ns of event time).
        std::vector<Event> shuffled = events;
        std::mt19937 rng(42);
        for (size_t i = 1; i + 40 < shuffled.size(); i += 40)
            std::shuffle(shuffled.begin() + static_cast<long>(i),
                         shuffled.begin() + static_cast<long>(i + 40), rng);
        const std::string reordered = dump(shuffled, "shuffled.fragscope", 1000);
        QCOMPARE(reordered, ordered);
        // A window longer than the run, bounded by memory instead: every 1,000 buffered events
        // the older half goes (a released head kept in the buffer, later arrivals merged in).
        QCOMPARE(dump(shuffled, "bounded.fragscope", int64_t{1} << 40, 1000), ordered);
        QVERIFY(ordered.ends_with("anomalies=0"));
        // Without a window the same shuffle produces anomalies (frees before allocs).
        const std::string unordered = dump(shuffled, "unordered.fragscope", 0);
        QVERIFY(unordered != ordered);
    }

    void recordsAnomalies()
    {
        const auto f = path("anomalies.fragscope");
        Ingest in(opts(f));
        in.begin();
        in.add(ev(EventType::RegionCreate, 0, kBase, 1 << 20));
        in.add(ev(EventType::Alloc, 1, kBase, 4096));
        in.add(ev(EventType::Free, 2, kBase));
        in.add(ev(EventType::Free, 3, kBase));            // double free
        in.add(ev(EventType::Free, 4, kBase + 0x100000)); // unknown address
        in.add(ev(EventType::Alloc, 5, kBase + 8192, 8192));
        in.add(ev(EventType::Alloc, 6, kBase + 12288, 4096));        // overlaps the previous one
        in.add(ev(EventType::Alloc, 7, kBase + (8 << 20), 4096));    // outside any region
        in.add(ev(EventType::RegionDestroy, 8, kBase + (16 << 20))); // unknown region
        in.end();
        Session s = Session::open(f);
        const auto a = s.summary().health.anomalies;
        QCOMPARE(a.at("double_free"), int64_t{1});
        QCOMPARE(a.at("unknown_free"), int64_t{1});
        QCOMPARE(a.at("overlap"), int64_t{1});
        QCOMPARE(a.at("outside_region"), int64_t{1});
        QCOMPARE(a.at("unknown_region"), int64_t{1});
        // Alive at the end: the overlapping one and the outside one (the overlapped one was ended).
        QCOMPARE(a.at("alive_at_end"), int64_t{2});
        // The anomaly row names the event that caused it.
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT time_ns FROM anomalies WHERE kind='double_free'"),
                 int64_t{3});
        QCOMPARE(fs::store::debugQuery(s).scalar(
                     "SELECT address FROM anomalies WHERE kind='unknown_free'"),
                 static_cast<int64_t>(kBase + 0x100000));
        // The overlapped allocation was ended at the overlapping allocation's time.
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT free_ns FROM allocations WHERE address=" +
                                                 std::to_string(kBase + 8192)),
                 int64_t{6});
    }

    void framesAndMetricsFromMarkers()
    {
        const auto f = path("frames.fragscope");
        Ingest in(opts(f));
        in.begin();
        auto mark = [&](EventType t, int64_t time, int64_t end, const char* msg) {
            Event e;
            e.type = t;
            e.time = time;
            e.endTime = end;
            e.name = in.intern(msg);
            in.add(e);
        };
        mark(EventType::Range, 100, 200, "frame 0");
        mark(EventType::Mark, 150, 0, "metric coherence_score=0.93");
        mark(EventType::Mark, 210, 0, "frame=1"); // opens frame 1
        mark(EventType::Mark, 250, 0, "metric flow_l2_px=3.5 id_match_rate=0.9");
        mark(EventType::Mark, 300, 0, "frame:2"); // ends 1, opens 2
        mark(EventType::Mark, 310, 0, "metric coherence_score=0.01 frame=1");
        mark(EventType::Mark, 320, 0, "not a frame 3");
        mark(EventType::Mark, 400, 0, "metric broken");
        in.end();
        Session s = Session::open(f);
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT COUNT(*) FROM frames"), int64_t{3});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT end_ns FROM frames WHERE idx=0"),
                 int64_t{200});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT start_ns FROM frames WHERE idx=1"),
                 int64_t{210});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT end_ns FROM frames WHERE idx=1"),
                 int64_t{300});
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT end_ns FROM frames WHERE idx=2"),
                 int64_t{400}); // session end
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT COUNT(*) FROM frame_metrics"), int64_t{4});
        Stmt st = fs::store::debugQuery(s).prepare(
            "SELECT frame, name, value FROM frame_metrics ORDER BY frame, name");
        QVERIFY(st.step());
        QCOMPARE(st.i64(0), int64_t{0});
        QCOMPARE(st.text(1), std::string("coherence_score"));
        QCOMPARE(st.f64(2), 0.93);
        QVERIFY(st.step());
        QCOMPARE(st.i64(0), int64_t{1});
        QCOMPARE(st.text(1), std::string("coherence_score"));
        QCOMPARE(st.f64(2), 0.01);
        QCOMPARE(fs::store::debugQuery(s).scalar("SELECT COUNT(*) FROM markers"), int64_t{8});
    }

    // The threads (IngestOptions::writerThread, sqlThread), durable commits and the batched
    // allocation rows change how the file is written, never what it holds: the same events, with
    // strings and stacks interned and notes written between them (each forces the threads to
    // catch up), give the same rows as a plain one-thread, one-transaction ingest. 30,000
    // alloc/free pairs span several 4,096-event batches, many 1,024-row inserts and, durable,
    // several commits (every 4,096 events: commitIntervalMs = 0) that write live blocks early
    // and free them with an UPDATE. Mapped pieces and graph execs take ids the statement pipe
    // cannot read back. Allocation k is 4096 * (1 + k % 7) bytes: 30000 = 7 * 4285 + 5, so the
    // sizes sum to 4096 * (4285 * (1+2+...+7) + (1+2+3+4+5)) = 4096 * (119980 + 15).
    void threadsWriteTheSameFile()
    {
        struct Mode
        {
            const char* name;
            bool durable, writerThread, sqlThread;
        };
        auto write = [&](const std::string& f, const Mode& mode) {
            IngestOptions o = opts(f);
            o.durable = mode.durable;
            o.writerThread = mode.writerThread;
            o.sqlThread = mode.sqlThread;
            o.commitIntervalMs = 0;
            o.aliveAtEndIsAnomaly = false;
            Ingest in(o);
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, kBase, 64 << 20));
            Event expandable = ev(EventType::RegionCreate, 1, kBase + (1ull << 30), 64 << 20);
            expandable.flags = 1;
            in.add(expandable);
            std::mt19937 rng(7);
            for (int k = 0; k < 30000; ++k) {
                const uint64_t addr = kBase + 65536ull * (k % 900);
                Event a = ev(EventType::Alloc, 10 + 3 * k, addr, 4096ull * (1 + k % 7));
                if (k % 1000 == 0) a.name = in.intern("tag " + std::to_string(k / 1000));
                if (k % 500 == 0)
                    a.aux = in.internStack({in.intern("f" + std::to_string(k)), in.intern("main")})
                                .value;
                in.add(a);
                if (k % 900 != 899) in.add(ev(EventType::Free, 11 + 3 * k, addr));
                if (k % 4999 == 0) in.warn("note " + std::to_string(k));
                if (k % 7001 == 0) {
                    Event m = ev(EventType::Mark, 12 + 3 * k, 0);
                    m.name = in.intern("frame " + std::to_string(k / 7001));
                    in.add(m);
                }
                if (k % 300 == 0) { // a piece mapped, the one before unmapped; an exec replaced
                    const uint64_t piece = kBase + (1ull << 30) + (2ull << 20) * (k / 300 % 16);
                    in.add(ev(EventType::RegionMap, 12 + 3 * k, piece, 1 << 20));
                    if (k)
                        in.add(ev(EventType::RegionUnmap, 12 + 3 * k, piece - (2 << 20), 1 << 20));
                    Event x = ev(EventType::GraphInstantiate, 12 + 3 * k, 0);
                    x.aux = 1;
                    x.aux2 = 100 + k / 300;
                    in.add(x);
                    if (k) {
                        x.type = EventType::GraphExecDestroy;
                        x.aux2 -= 1;
                        in.add(x);
                    }
                }
                if (k % 3 == 0) { // kernels: batched inserts of their own
                    Event kl = ev(EventType::Kernel, 12 + 3 * k, 0);
                    kl.endTime = kl.time + 1;
                    kl.aux = static_cast<uint64_t>(k); // correlation id
                    kl.grid[0] = static_cast<uint32_t>(k % 5 + 1);
                    kl.block[0] = 128;
                    kl.name = in.intern("kernel");
                    if (k % 9 == 0) kl.aux2 = (uint64_t{7} << 32) | static_cast<uint64_t>(k / 9);
                    in.add(kl);
                }
                if (rng() % 5000 == 0)
                    in.add(ev(EventType::Free, 12 + 3 * k, kBase + 1)); // unknown
            }
            in.end();
        };
        // Kernels (k = 0, 3, ..., 29997: 10,000, 39 full batches of 256 and a partial one): the
        // correlation ids sum to 3 * (0 + ... + 9999) = 149,985,000; grid_x = k % 5 + 1 runs
        // 1, 4, 2, 5, 3 over each five, 15 per five, 30,000 in all; graph launches at k = 9n,
        // n = 0..3333: 3,334 rows of graph 7, nodes summing to 3333 * 3334 / 2 = 5,556,111.
        auto checkKernels = [](const std::string& f) {
            Session s = Session::open(f);
            auto q = [&](const char* sql) { return fs::store::debugQuery(s).scalar(sql); };
            QCOMPARE(q("SELECT COUNT(*) FROM kernels"), int64_t{10000});
            QCOMPARE(q("SELECT SUM(correlation_id) FROM kernels"), int64_t{149985000});
            QCOMPARE(q("SELECT SUM(grid_x) FROM kernels"), int64_t{30000});
            QCOMPARE(q("SELECT SUM(end_ns - start_ns) FROM kernels"), int64_t{10000});
            QCOMPARE(q("SELECT COUNT(*) FROM kernels WHERE block_x = 128 AND grid_y = 0"),
                     int64_t{10000});
            QCOMPARE(q("SELECT COUNT(graph_id) FROM kernels WHERE graph_id = 7"), int64_t{3334});
            QCOMPARE(q("SELECT SUM(graph_node_id) FROM kernels"), int64_t{5556111});
            QCOMPARE(q("SELECT COUNT(*) FROM kernels k JOIN kernels j ON j.id = k.id + 1"
                       " WHERE j.start_ns < k.start_ns"),
                     int64_t{0}); // ids in arrival order
        };
        const auto plain = path("plain.fragscope");
        write(plain, {"plain", false, false, false});
        checkKernels(plain);
        for (const Mode& mode :
             {Mode{"writer thread", false, true, false}, Mode{"sql thread", false, false, true},
              Mode{"both threads", false, true, true}, Mode{"durable", true, false, false},
              Mode{"durable, sql thread", true, false, true}}) {
            const auto other = path("other.fragscope");
            write(other, mode);
            const std::string diff = rowsDiffer(plain, other);
            QVERIFY2(diff.empty(), (std::string(mode.name) + ": " + diff).c_str());
            Session b = Session::open(other);
            QCOMPARE(fs::store::debugQuery(b).scalar("SELECT COUNT(*) FROM allocations"),
                     int64_t{30000});
            QCOMPARE(fs::store::debugQuery(b).scalar("SELECT SUM(size) FROM allocations"),
                     int64_t{4096} * 119995);
            QCOMPARE(fs::store::debugQuery(b).scalar("SELECT COUNT(*) FROM frames"),
                     int64_t{5}); // k = 0, 7001 .. 28004
            QCOMPARE(fs::store::debugQuery(b).scalar("SELECT COUNT(*) FROM graph_execs"),
                     int64_t{100}); // k = 0, 300 .. 29700
            QVERIFY(fs::store::debugQuery(b).scalar("SELECT COUNT(*) FROM region_mappings") >= 100);
        }
    }

    void parsesMetricMessages_data()
    {
        QTest::addColumn<QString>("msg");
        QTest::addColumn<bool>("ok");
        QTest::addColumn<int>("count");
        QTest::addColumn<int>("frame");
        QTest::newRow("one") << "metric coherence_score=0.124" << true << 1 << -1;
        QTest::newRow("frame") << "metric a=1 b=-2.5e-3 frame=17" << true << 2 << 17;
        QTest::newRow("no value") << "metric a=" << false << 0 << -1;
        QTest::newRow("not number") << "metric a=x" << false << 0 << -1;
        QTest::newRow("only frame") << "metric frame=3" << false << 0 << 3;
        QTest::newRow("prefix") << "metrics a=1" << false << 0 << -1;
        QTest::newRow("other") << "frame 3" << false << 0 << -1;
    }
    void parsesMetricMessages()
    {
        QFETCH(QString, msg);
        QFETCH(bool, ok);
        QFETCH(int, count);
        QFETCH(int, frame);
        std::vector<std::pair<std::string, double>> out;
        int64_t f = -1;
        QCOMPARE(parseMetricMessage(msg.toStdString(), out, f), ok);
        if (ok) {
            QCOMPARE(static_cast<int>(out.size()), count);
            QCOMPARE(f, int64_t{frame});
        }
    }

    void abortRemovesOutput()
    {
        const auto f = path("aborted.fragscope");
        Ingest in(opts(f));
        in.begin();
        in.add(ev(EventType::RegionCreate, 0, kBase, 1 << 20));
        in.abort();
        QVERIFY(!QFile::exists(QString::fromStdString(f)));
        QVERIFY(!QFile::exists(QString::fromStdString(f + "-wal")));
    }

    // A writer killed by SIGKILL leaves a file that opens, holds every event up to its last
    // commit, and is reported as ended abruptly.
    void survivesSigkill()
    {
        const auto f = path("killed.fragscope");
        const pid_t child = fork();
        QVERIFY(child >= 0);
        if (child == 0) {
            IngestOptions o = opts(f);
            o.commitIntervalMs = 20;
            Ingest in(o);
            in.begin();
            in.addDevice({0, "Test GPU", 1ull << 34, ""});
            in.add(ev(EventType::RegionCreate, 0, kBase, 1ull << 30));
            // Allocation i at time 10+2i, 4 KiB at slot i%1000; freed one step later except
            // every 1000th, which stays live (crash-safety for live allocations).
            for (int64_t i = 0;; ++i) {
                const uint64_t addr = kBase + 4096ull * static_cast<uint64_t>(i % 1000);
                in.add(ev(EventType::Alloc, 10 + 2 * i, addr + ((i / 1000) << 22), 4096));
                if (i % 1000 != 0)
                    in.add(ev(EventType::Free, 11 + 2 * i, addr + ((i / 1000) << 22)));
                if (i % 5000 == 0) in.tick();
                if (i % 20000 == 0) usleep(2000);
            }
        }
        // Wait until a few commits are visible, then kill.
        int64_t seen = 0;
        for (int tries = 0; tries < 400 && seen < 50000; ++tries) {
            QThread::msleep(25);
            try {
                Db db(f, SQLITE_OPEN_READONLY);
                seen = db.scalar("SELECT COUNT(*) FROM allocations");
            } catch (const SessionError&) {
            }
        }
        ::kill(child, SIGKILL);
        int status = 0;
        ::waitpid(child, &status, 0);
        QVERIFY(WIFSIGNALED(status));
        QVERIFY2(seen >= 50000, "writer never committed");

        Session s = Session::open(f);
        const SessionSummary sum = s.summary();
        QVERIFY(sum.health.endedAbruptly);
        QVERIFY(!sum.health.recording);
        QVERIFY(sum.allocations >= seen);
        // Every committed row is exactly what the writer produced (a consistent prefix).
        Stmt st = fs::store::debugQuery(s).prepare(
            "SELECT id, address, size, alloc_ns, free_ns FROM allocations ORDER BY id");
        int64_t rows = 0, maxId = 0, liveKept = 0;
        while (st.step()) {
            ++rows;
            const int64_t i = st.i64(0) - 1;
            maxId = std::max(maxId, i + 1);
            const uint64_t addr = kBase + 4096ull * static_cast<uint64_t>(i % 1000) +
                                  ((static_cast<uint64_t>(i) / 1000) << 22);
            QCOMPARE(st.u64(1), addr);
            QCOMPARE(st.u64(2), uint64_t{4096});
            QCOMPARE(st.i64(3), 10 + 2 * i);
            if (i % 1000 == 0) {
                QVERIFY(st.isNull(4));
                ++liveKept;
            } else if (!st.isNull(4)) {
                QCOMPARE(st.i64(4), 11 + 2 * i);
            }
        }
        // No gaps below the highest committed id except allocations made in the last
        // uncommitted window, so at least 99% of ids up to the max are present.
        QVERIFY(rows >= maxId * 99 / 100);
        QVERIFY(liveKept >= seen / 1000 - 1);

        // The CLI says so too.
        const auto r = fstest::runCli({"info", "--json", QString::fromStdString(f)});
        QCOMPARE(r.exitCode, 0);
        const auto doc = QJsonDocument::fromJson(r.out).object();
        QCOMPARE(doc["health"].toObject()["ended_abruptly"].toBool(), true);
    }
};

QTEST_GUILESS_MAIN(TstIngest)
#include "tst_ingest.moc"
