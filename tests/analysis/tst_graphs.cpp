// CUDA graphs and pools (core/analysis/graphs.cpp, core/alloc/graph_sharing.cpp): known answers
// on hand-built sessions, the bad-input counts, and the real snapshot with private pools.
#include "builder.h"
#include "testutil.h"

#include "core/alloc/graph_sharing.h"
#include "core/analysis/engine.h"
#include "core/analysis/graphs.h"
#include "core/import/byte_reader.h"
#include "core/import/pickle_reader.h"
#include "core/store/graphs.h"
#include "core/store/session.h"

#include <QJsonArray>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <map>

using namespace fs;
using namespace fs::analysis;
using namespace antest;

namespace {

constexpr uint64_t P1 = uint64_t{1} << 32; // PyTorch's (1, 0): a capture's own pool
constexpr uint64_t P2 = uint64_t{2} << 32;
constexpr uint64_t P3 = uint64_t{3} << 32;
constexpr uint32_t kMain = 7;
constexpr uint32_t kSide = 9;

Event region(int64_t t, uint64_t addr, uint64_t size, uint64_t pool, uint32_t stream = kMain)
{
    Event e = ev(EventType::RegionCreate, t, addr, size);
    e.aux = pool;
    e.stream = stream;
    return e;
}

Event block(int64_t t, uint64_t addr, uint64_t size, uint32_t stream = kMain)
{
    Event e = ev(EventType::Alloc, t, addr, size);
    e.requestedSize = size;
    e.stream = stream;
    return e;
}

Event capture(Ingest& in, int64_t begin, int64_t end, int64_t graph, uint64_t pool,
              const std::string& name, uint32_t stream = kMain)
{
    Event e = ev(EventType::GraphCapture, begin);
    e.endTime = end;
    e.aux = static_cast<uint64_t>(graph);
    e.aux2 = pool;
    e.stream = stream;
    e.name = in.intern(name);
    return e;
}

Event instantiate(int64_t t, int64_t graph, uint64_t exec)
{
    Event e = ev(EventType::GraphInstantiate, t);
    e.aux = static_cast<uint64_t>(graph);
    e.aux2 = exec;
    return e;
}

Event launch(int64_t start, int64_t end, int64_t graph, uint64_t exec, uint32_t stream = kMain)
{
    Event e = ev(EventType::GraphLaunch, start);
    e.endTime = end;
    e.aux = static_cast<uint64_t>(graph);
    e.aux2 = exec;
    e.stream = stream;
    return e;
}

// The replay [start, kernelEnd): its launch record ends early, its one kernel ends the replay.
void replay(Ingest& in, int64_t start, int64_t kernelEnd, int64_t graph, uint64_t exec,
            uint32_t stream = kMain)
{
    in.add(launch(start, start + 10, graph, exec, stream));
    graphKernel(in, start + 5, kernelEnd, "graph_kernel", static_cast<uint32_t>(graph), 0);
}

const GraphInfo* graphNamed(const GraphsReport& r, const std::string& name)
{
    for (const GraphInfo& g : r.graphs)
        if (g.name == name) return &g;
    return nullptr;
}

const PoolInfo* poolOf(const GraphsReport& r, uint64_t pool, Level level = Level::Framework)
{
    for (const PoolInfo& p : r.pools)
        if (p.pool == pool && p.level == level) return &p;
    return nullptr;
}

} // namespace

class TstGraphs : public QObject
{
    Q_OBJECT

    QTemporaryDir dir_;

    // Three graphs, one private pool each, that follow the allocator model's own rules (so the
    // what-if's replay of the pools as recorded reproduces the recording):
    //   A: capture [100, 200] into P1: a 20 MiB segment, a1 4 MiB (freed), a2 2 MiB (output)
    //   B: capture [300, 400] into P2: a 20 MiB segment, b1 8 MiB (freed), b2 2 MiB (output)
    //   C: capture [500, 600], pool not recorded; its allocation c1 (2 MiB) lands in P3
    //   default pool: S0a 20 MiB at 40 (x1 [0, 8), x2 [8, 16) MiB), S0b 64 MiB with x3 at 1900;
    //   x2 freed at 1950, x3 at 2900, x1 at 2950.
    // Replays: A [1000, 1100) [2000, 2200) [3000, 3300); B [1500, 1600) [2500, 2550); C on
    // another stream [1050, 1120) (overlaps A) and [2520, 2600) (overlaps B). So A and B never
    // replay concurrently: exactly one pair (P1, P2) may share.
    std::string handBuilt()
    {
        const std::string path = dir_.filePath("graphs.fragscope").toStdString();
        Ingest in(options(path));
        in.begin();
        const uint64_t s0a = kBase, p1 = kBase + 0x10000000, p2 = kBase + 0x20000000,
                       p3 = kBase + 0x30000000, s0b = kBase + 0x40000000;
        in.add(region(40, s0a, 20 * MiB, 0));
        in.add(block(50, s0a, 8 * MiB));
        in.add(block(60, s0a + 8 * MiB, 8 * MiB));
        in.add(capture(in, 100, 200, 11, P1, "A"));
        in.add(region(110, p1, 20 * MiB, P1));
        in.add(block(120, p1, 4 * MiB));
        in.add(block(130, p1 + 4 * MiB, 2 * MiB));
        in.add(ev(EventType::Free, 140, p1));
        in.add(instantiate(200, 11, 101));
        in.add(capture(in, 300, 400, 12, P2, "B"));
        in.add(region(310, p2, 20 * MiB, P2));
        in.add(block(320, p2, 8 * MiB));
        in.add(block(330, p2 + 8 * MiB, 2 * MiB));
        in.add(ev(EventType::Free, 340, p2));
        in.add(instantiate(400, 12, 102));
        in.add(capture(in, 500, 600, 13, 0, "C", kSide));
        in.add(region(510, p3, 20 * MiB, P3, kSide));
        in.add(block(520, p3, 2 * MiB, kSide));
        in.add(instantiate(600, 13, 103));
        replay(in, 1000, 1100, 11, 101);
        replay(in, 1050, 1120, 13, 103, kSide);
        replay(in, 1500, 1600, 12, 102);
        in.add(region(1900, s0b, 64 * MiB, 0));
        in.add(block(1900, s0b, 64 * MiB));
        in.add(ev(EventType::Free, 1950, s0a + 8 * MiB));
        replay(in, 2000, 2200, 11, 101);
        replay(in, 2500, 2550, 12, 102);
        replay(in, 2520, 2600, 13, 103, kSide);
        in.add(ev(EventType::Free, 2900, s0b));
        in.add(ev(EventType::Free, 2950, s0a));
        replay(in, 3000, 3300, 11, 101);
        in.end();
        return path;
    }

private slots:
    void initTestCase() { QVERIFY(dir_.isValid()); }

    void durationStatsKnownAnswers()
    {
        // Nearest rank: p50 of {100, 200, 300} is the 2nd (ceil(1.5)), p99 the 3rd (ceil(2.97));
        // jitter = (|200 - 100| + |300 - 200|) / 2 = 100.
        const DurationStats s = durationStats({100, 200, 300});
        QCOMPARE(s.count, int64_t{3});
        QCOMPARE(s.p50, int64_t{200});
        QCOMPARE(s.p99, int64_t{300});
        QCOMPARE(s.max, int64_t{300});
        QCOMPARE(s.mean, 200.0);
        QCOMPARE(s.jitter, 100.0);
        // 100 values 1..100: p50 is the 50th, p99 the 99th; jitter 1 (steps of one), in the
        // given order (reversed: still 1).
        std::vector<int64_t> v;
        for (int64_t i = 100; i >= 1; --i)
            v.push_back(i);
        const DurationStats h = durationStats(v);
        QCOMPARE(h.p50, int64_t{50});
        QCOMPARE(h.p99, int64_t{99});
        QCOMPARE(h.jitter, 1.0);
        QCOMPARE(durationStats({}).count, int64_t{0});
    }

    void graphsPoolsAndReplays()
    {
        const auto e = Engine::open(handBuilt());
        const GraphsReport r = e->graphs();
        QCOMPARE(r.graphs.size(), size_t{3});
        const GraphInfo* a = graphNamed(r, "A");
        const GraphInfo* b = graphNamed(r, "B");
        const GraphInfo* c = graphNamed(r, "C");
        QVERIFY(a && b && c);
        QCOMPARE(a->captures.size(), size_t{1});
        QCOMPARE(a->capturedAt, int64_t{100});
        QCOMPARE(a->captureNs, int64_t{100});
        QCOMPARE(a->instantiatedAt, int64_t{200});
        QCOMPARE(a->execIds, std::vector<uint64_t>{101});
        QCOMPARE(a->poolSource, PoolSource::Recorded);
        QCOMPARE(a->pool, P1);
        // C's capture names no pool: its one allocation landed in P3.
        QCOMPARE(c->poolSource, PoolSource::Allocations);
        QCOMPARE(c->pool, P3);
        // A's replays last 100, 200 and 300 ns (launch to the end of its kernel).
        QCOMPARE(a->launches, int64_t{3});
        QCOMPARE(a->replay.p50, int64_t{200});
        QCOMPARE(a->replay.p99, int64_t{300});
        QCOMPARE(a->replay.max, int64_t{300});
        QCOMPARE(a->replay.jitter, 100.0);
        QCOMPARE(b->replay.count, int64_t{2});
        QCOMPARE(b->replay.max, int64_t{100});
        // F at A's replay starts (every framework region's free fragments, MiB):
        //   1000: S0a 4, P1 4 + 14, P2 8 + 10, P3 18 -> 58, largest 18: F = 1 - 18/58 = 0.68966
        //   2000: x2 freed: S0a 12 -> 66, largest 18: F = 1 - 18/66 = 0.72727
        //   3000: x3 and x1 freed: S0a 20 + S0b 64 + 54 = 138, largest 64: F = 1 - 64/138 = 0.53623
        // Ranks of F 2, 3, 1 against durations 1, 2, 3: rho = 1 - 6 * 6 / (3 * 8) = -0.5.
        std::vector<double> f;
        std::vector<uint64_t> largest;
        for (const GraphReplay& rp : r.replays)
            if (rp.graph == static_cast<uint32_t>(a - r.graphs.data())) {
                f.push_back(rp.fragmentation);
                largest.push_back(rp.largestFree);
            }
        QCOMPARE(f.size(), size_t{3});
        QVERIFY(std::abs(f[0] - (1 - 18.0 / 58)) < 1e-12);
        QVERIFY(std::abs(f[1] - (1 - 18.0 / 66)) < 1e-12);
        QVERIFY(std::abs(f[2] - (1 - 64.0 / 138)) < 1e-12);
        QCOMPARE(largest, (std::vector<uint64_t>{18 * MiB, 18 * MiB, 64 * MiB}));
        QCOMPARE(a->vsFragmentation.n, int64_t{3});
        QVERIFY(std::abs(a->vsFragmentation.spearman + 0.5) < 1e-12);

        // Pools at the end and at their peaks.
        QCOMPARE(r.pools.size(), size_t{4});
        const PoolInfo* d = poolOf(r, 0);
        QVERIFY(d);
        QCOMPARE(d->segments, int64_t{2});
        QCOMPARE(d->reservedBytes, 84 * MiB);
        QCOMPARE(d->allocatedBytes, uint64_t{0});
        QCOMPARE(d->peakReservedBytes, 84 * MiB);
        QCOMPARE(d->peakTime, int64_t{1900});
        QCOMPARE(d->allocatedAtPeak, 80 * MiB); // x1 + x2 + x3 at 1900
        QCOMPARE(d->peakAllocatedBytes, 80 * MiB);
        QVERIFY(d->graphs.empty());
        const PoolInfo* pa = poolOf(r, P1);
        QVERIFY(pa);
        QCOMPARE(pa->reservedBytes, 20 * MiB);
        QCOMPARE(pa->allocatedBytes, 2 * MiB);
        QCOMPARE(pa->peakReservedBytes, 20 * MiB);
        QCOMPARE(pa->peakTime, int64_t{110});
        QCOMPARE(pa->allocatedAtPeak, uint64_t{0});
        QCOMPARE(pa->peakAllocatedBytes, 6 * MiB);
        QCOMPARE(pa->graphs.size(), size_t{1});
        QCOMPARE(r.graphs[pa->graphs[0]].name, std::string("A"));
        // Its series: 110 (20, 0), 120 (20, 4), 130 (20, 6), 140 (20, 2).
        QCOMPARE(pa->series.size(), size_t{4});
        QCOMPARE(pa->series.back().time, int64_t{140});
        QCOMPARE(pa->series.back().allocated, 2 * MiB);
        QCOMPARE(poolOf(r, P2)->peakAllocatedBytes, 10 * MiB);
        QCOMPARE(poolOf(r, P3)->allocatedBytes, 2 * MiB);

        // Sharing candidates: only A and B never replay concurrently.
        QCOMPARE(r.sharing.size(), size_t{1});
        QCOMPARE(r.sharing[0].pools, (std::vector<uint64_t>{P1, P2}));
        QVERIFY(!r.sharing[0].computed); // the engine names them; the model computes
        QCOMPARE(r.health.total(), int64_t{0});
        QCOMPARE(r.health.launchesWithoutInstantiation, int64_t{0});
    }

    void sharingWhatIf()
    {
        // The model's replay as recorded: segments 20 (S0a) + 3 x 20 (pools) + 64 (S0b) = 144
        // MiB at the peak, as recorded. With P1 and P2 merged, B's b1 (8 MiB) takes the 14 MiB
        // free block A's capture left in the pool and b2 (2 MiB) the 4 MiB one: no new segment,
        // peak 124 MiB, 20 MiB saved.
        const auto e = Engine::open(handBuilt());
        const GraphsReport r = alloc::graphsReport(*e);
        QCOMPARE(r.sharing.size(), size_t{1});
        const SharingGroup& g = r.sharing[0];
        QVERIFY(g.computed);
        QCOMPARE(g.peakReservedBefore, 144 * MiB);
        QCOMPARE(g.peakReservedAfter, 124 * MiB);
        QCOMPARE(g.peakReservedSavedBytes, static_cast<int64_t>(20 * MiB));
        QVERIFY(r.sharingAll.computed);
        QVERIFY(r.sharingAll.reproduced);
        QCOMPARE(r.sharingAll.recordedPeakReserved, 144 * MiB);
        QCOMPARE(r.sharingAll.peakReservedSavedBytes, static_cast<int64_t>(20 * MiB));
        QVERIFY(QString::fromStdString(r.sharingAll.note).contains("allocator model"));
    }

    void recaptureDrift()
    {
        // Graph D captured twice into P1: the first capture's d1 (4 MiB at +0, freed) and d2
        // (2 MiB output at +4); the second's d1' at +0 again (not moved) and d2' at +6 MiB
        // (moved), while d2 is still live: held 1 allocation, 2 MiB.
        const std::string path = dir_.filePath("recapture.fragscope").toStdString();
        {
            Ingest in(options(path));
            in.begin();
            const uint64_t p = kBase;
            in.add(capture(in, 100, 200, 21, P1, "D"));
            in.add(region(110, p, 20 * MiB, P1));
            in.add(block(120, p, 4 * MiB));
            in.add(block(130, p + 4 * MiB, 2 * MiB));
            in.add(ev(EventType::Free, 140, p));
            in.add(instantiate(200, 21, 201));
            replay(in, 250, 280, 21, 201);
            in.add(capture(in, 300, 400, 22, P1, "D"));
            in.add(block(320, p, 4 * MiB));
            in.add(block(330, p + 6 * MiB, 2 * MiB));
            in.add(ev(EventType::Free, 340, p));
            in.add(instantiate(400, 22, 202));
            Event d = ev(EventType::GraphExecDestroy, 410);
            d.aux2 = 201;
            in.add(d);
            in.add(ev(EventType::Free, 450, p + 4 * MiB));
            replay(in, 500, 540, 22, 202);
            in.end();
        }
        const auto e = Engine::open(path);
        const GraphsReport r = e->graphs();
        QCOMPARE(r.graphs.size(), size_t{1});
        const GraphInfo& g = r.graphs[0];
        QCOMPARE(g.captures.size(), size_t{2});
        QCOMPARE(g.graphIds, (std::vector<int64_t>{21, 22}));
        QCOMPARE(g.launches, int64_t{2});
        QCOMPARE(g.recaptures.size(), size_t{1});
        const Recapture& rc = g.recaptures[0];
        QCOMPARE(rc.time, int64_t{300});
        QCOMPARE(rc.allocations, int64_t{2});
        QCOMPARE(rc.previousAllocations, int64_t{2});
        QCOMPARE(rc.moved, int64_t{1});
        QCOMPARE(rc.movedBytes, 2 * MiB);
        QCOMPARE(rc.heldAllocations, int64_t{1});
        QCOMPARE(rc.heldBytes, 2 * MiB);
        QVERIFY(rc.samePool);
        QCOMPARE(r.health.total(), int64_t{0});
    }

    void badInputCounted()
    {
        // Exec 5 instantiated, launched twice overlapping itself ([100, 300) and [200, 400)),
        // destroyed twice; exec 77 destroyed though never instantiated; exec 999 launched twice
        // without an instantiation; a free naming pool 0xabc that no region or capture named.
        const std::string path = dir_.filePath("bad.fragscope").toStdString();
        {
            Ingest in(options(path));
            in.begin();
            in.add(instantiate(10, 1, 5));
            in.add(launch(100, 300, 1, 5));
            in.add(launch(200, 400, 1, 5));
            in.add(launch(500, 510, 0, 999));
            in.add(launch(600, 610, 0, 999));
            for (int64_t t : {700, 710}) {
                Event d = ev(EventType::GraphExecDestroy, t);
                d.aux2 = 5;
                in.add(d);
            }
            Event u = ev(EventType::GraphExecDestroy, 720);
            u.aux2 = 77;
            in.add(u);
            Event f = ev(EventType::Free, 730, kBase, 4096);
            f.aux = 0xabc;
            in.add(f);
            in.end();
        }
        const auto e = Engine::open(path);
        const GraphsReport r = e->graphs();
        QCOMPARE(r.health.launches, int64_t{4});
        QVERIFY(r.health.instantiationsRecorded);
        QCOMPARE(r.health.launchesWithoutInstantiation, int64_t{2});
        QCOMPARE(r.health.selfOverlappingReplays, int64_t{1});
        QCOMPARE(r.health.execsDestroyedTwice, int64_t{1});
        QCOMPARE(r.health.unknownExecDestroys, int64_t{1});
        QCOMPARE(r.health.poolsOnlyInFrees, int64_t{1});
        QCOMPARE(r.health.total(), int64_t{6});
        // No capture: every graph's pool is unknown, shown as such, and nothing may share.
        for (const GraphInfo& g : r.graphs) {
            QVERIFY(!g.poolKnown());
            QCOMPARE(graphPoolLabel(g), std::string("unknown"));
        }
        QCOMPARE(r.health.graphsWithUnknownPool, static_cast<int64_t>(r.graphs.size()));
        QVERIFY(r.sharing.empty());
        // info shows the same counts in its capture health.
        const auto res = fstest::runCli({"info", QString::fromStdString(path), "--json"});
        QCOMPARE(res.exitCode, 0);
        const QJsonObject h =
            QJsonDocument::fromJson(res.out).object()["health"].toObject()["graphs"].toObject();
        QCOMPARE(h["launches_without_instantiation"].toInt(), 2);
        QCOMPARE(h["self_overlapping_replays"].toInt(), 1);
        QCOMPARE(h["execs_destroyed_twice"].toInt(), 1);
        QCOMPARE(h["unknown_exec_destroys"].toInt(), 1);
        QCOMPARE(h["pools_only_in_frees"].toInt(), 1);
        QCOMPARE(h["problems"].toInt(), 6);
    }

    void cliMatchesEngine()
    {
        const std::string path = handBuilt();
        const auto e = Engine::open(path);
        const GraphsReport r = alloc::graphsReport(*e);
        const auto res = fstest::runCli({"graphs", QString::fromStdString(path), "--json"});
        QCOMPARE(res.exitCode, 0);
        const QJsonObject o = QJsonDocument::fromJson(res.out).object();
        const QJsonArray graphs = o["graphs"].toArray();
        QCOMPARE(graphs.size(), static_cast<int>(r.graphs.size()));
        for (int i = 0; i < graphs.size(); ++i) {
            const QJsonObject g = graphs[i].toObject();
            QCOMPARE(g["graph"].toString().toStdString(), r.graphs[i].name);
            QCOMPARE(g["replays"].toInteger(), r.graphs[i].replay.count);
            QCOMPARE(g["replay_ns"].toObject()["p50"].toInteger(), r.graphs[i].replay.p50);
            QCOMPARE(g["replay_ns"].toObject()["p99"].toInteger(), r.graphs[i].replay.p99);
            QCOMPARE(g["replay_ns"].toObject()["max"].toInteger(), r.graphs[i].replay.max);
            QCOMPARE(g["captures"].toInteger(), static_cast<qint64>(r.graphs[i].captures.size()));
        }
        const QJsonArray pools = o["pools"].toArray();
        QCOMPARE(pools.size(), static_cast<int>(r.pools.size()));
        for (int i = 0; i < pools.size(); ++i) {
            const QJsonObject p = pools[i].toObject();
            const QJsonArray id = p["pool"].toArray();
            QCOMPARE(static_cast<uint64_t>(id[0].toInteger()) << 32 |
                         static_cast<uint64_t>(id[1].toInteger()),
                     r.pools[i].pool);
            QCOMPARE(static_cast<uint64_t>(p["reserved_bytes"].toInteger()),
                     r.pools[i].reservedBytes);
            QCOMPARE(static_cast<uint64_t>(p["allocated_bytes"].toInteger()),
                     r.pools[i].allocatedBytes);
            QCOMPARE(static_cast<uint64_t>(p["peak_reserved_bytes"].toInteger()),
                     r.pools[i].peakReservedBytes);
        }
        QCOMPARE(pools[0].toObject()["pool"].toArray(), (QJsonArray{0, 0})); // the default pool
        const QJsonArray sharing = o["sharing"].toArray();
        QCOMPARE(sharing.size(), 1);
        QCOMPARE(sharing[0].toObject()["peak_reserved_saved_bytes"].toInteger(),
                 static_cast<qint64>(20 * MiB));
        // report --json carries the short graphs section.
        const auto rep = fstest::runCli({"report", QString::fromStdString(path), "--json"});
        QCOMPARE(rep.exitCode, 0);
        const QJsonObject gs = QJsonDocument::fromJson(rep.out).object()["graphs"].toObject();
        QCOMPARE(gs["graphs"].toInt(), 3);
        QCOMPARE(gs["replays"].toInt(), 7);
        QCOMPARE(gs["private_pools"].toInt(), 3);
        QCOMPARE(gs["peak_reserved_saved_bytes"].toInteger(), static_cast<qint64>(20 * MiB));
        // --help exists and a missing file is bad input.
        QCOMPARE(fstest::runCli({"graphs", "--help"}).exitCode, 0);
        QCOMPARE(fstest::runCli({"graphs", dir_.filePath("missing.fragscope")}).exitCode, 2);
        QCOMPARE(fstest::runCli({"graphs"}).exitCode, 64);
    }

    void realSnapshotPools()
    {
        // verl's snapshot: private pools (0, 1) and (0, 2) beside the default pool, no graph.
        // Every pool's reserved and allocated bytes at the end equal the sums over its segments
        // in the file (total_size; sizes of the active_allocated blocks), read here straight
        // from the pickle.
        const QString rel = "pytorch-snapshots-features/verl-pools-pending-free.pickle";
        FSTEST_REQUIRE_DATA(rel);
        const std::string file = (fstest::dataDir() + "/" + rel).toStdString();
        std::map<uint64_t, std::pair<uint64_t, uint64_t>> want; // pool -> reserved, allocated
        std::map<uint64_t, int64_t> segments;
        {
            import::ByteReader br(file);
            const auto doc = import::PickleReader::read(br);
            const import::PValue segs = doc->get(doc->root(), "segments");
            doc->forEach(segs, [&](import::PValue seg) {
                const import::PValue id = doc->get(seg, "segment_pool_id");
                int64_t a = 0, b = 0;
                doc->toI64(doc->at(id, 0), a);
                doc->toI64(doc->at(id, 1), b);
                const uint64_t pool = static_cast<uint64_t>(a) << 32 | static_cast<uint64_t>(b);
                uint64_t total = 0;
                doc->toU64(doc->get(seg, "total_size"), total);
                want[pool].first += total;
                ++segments[pool];
                doc->forEach(doc->get(seg, "blocks"), [&](import::PValue blk) {
                    uint64_t size = 0;
                    doc->toU64(doc->get(blk, "size"), size);
                    if (doc->str(doc->get(blk, "state")) == "active_allocated")
                        want[pool].second += size;
                });
            });
        }
        QCOMPARE(want.size(), size_t{3});
        const QString out = dir_.filePath("verl.fragscope");
        QCOMPARE(fstest::runCli({"import", QString::fromStdString(file), "-o", out}).exitCode, 0);
        const auto e = Engine::open(out.toStdString());
        const GraphsReport r = alloc::graphsReport(*e);
        QVERIFY(r.graphs.empty());
        QVERIFY(r.sharing.empty()); // pools without graphs are no candidates
        QCOMPARE(r.pools.size(), size_t{3});
        uint64_t reserved = 0, allocated = 0;
        for (const PoolInfo& p : r.pools) {
            QVERIFY2(want.count(p.pool), qPrintable(QString::number(p.pool)));
            QCOMPARE(p.reservedBytes, want[p.pool].first);
            QCOMPARE(p.allocatedBytes, want[p.pool].second);
            QCOMPARE(p.segments, segments[p.pool]);
            reserved += p.reservedBytes;
            allocated += p.allocatedBytes;
        }
        // ... and add up to the catalogue's device figures (reference.json).
        QCOMPARE(reserved, uint64_t{26189234176});
        QCOMPARE(allocated, uint64_t{24916034560});
        QCOMPARE(segments[0] + segments[1] + segments[2], int64_t{127});
    }
};

QTEST_GUILESS_MAIN(TstGraphs)
#include "tst_graphs.moc"
