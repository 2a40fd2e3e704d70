// OOM diagnosis (docs/analysis.md "OOM diagnosis"): one hand-built session per cause, with the
// figures and the cause worked out in each test's comment, and the advice checked against the
// recorded allocator settings.
#include "builder.h"

#include "core/analysis/engine.h"

#include <QTemporaryDir>
#include <QTest>

using namespace antest;
using namespace fs;
using namespace fs::analysis;

namespace {

struct Oom
{
    uint32_t stream = 0;
    uint64_t request = 0;
    uint64_t deviceFree = 0;
};

// Device 0 (capacity 'capacity', 0: unknown): segments (address, size, stream, pool) and live
// blocks (address, size) at t = 10, optional pending frees (address, size) requested at 20 and
// still pending, the OOM at 30.
struct Case
{
    uint64_t capacity = 0;
    std::vector<std::tuple<uint64_t, uint64_t, uint32_t, uint64_t>> segments;
    std::vector<std::pair<uint64_t, uint64_t>> blocks;
    std::vector<std::pair<uint64_t, uint64_t>> pending; // allocated at 10, freed at 20
    Oom oom;
    std::string settings;
};

std::vector<OomDiagnosis> diagnose(const QString& path, const Case& c)
{
    {
        Ingest in(options(path.toStdString()));
        in.begin();
        DeviceInfo d;
        d.id = 0;
        d.name = "test";
        d.capacityBytes = c.capacity;
        in.addDevice(d);
        if (!c.settings.empty()) in.setMeta("allocator_settings", c.settings);
        for (const auto& [a, s, stream, pool] : c.segments) {
            Event e = ev(EventType::RegionCreate, 1, a, s);
            e.stream = stream;
            e.aux = pool;
            in.add(e);
        }
        for (const auto& [a, s] : c.blocks)
            in.add(ev(EventType::Alloc, 10, a, s));
        for (const auto& [a, s] : c.pending)
            in.add(ev(EventType::Alloc, 10, a, s));
        for (const auto& [a, s] : c.pending) {
            in.add(ev(EventType::Free, 20, a, s));
            Event p = ev(EventType::PendingFree, 20, a, s);
            p.endTime = kNoTime;
            in.add(p);
        }
        Event o = ev(EventType::Oom, 30, 0, c.oom.request);
        o.aux = c.oom.deviceFree;
        o.stream = c.oom.stream;
        in.add(o);
        in.end();
    }
    return Engine::open(path.toStdString())->ooms();
}

} // namespace

class TestOom : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    int n_ = 0;
    QString next() { return dir_.filePath(QString("oom%1.fragscope").arg(n_++)); }

private slots:
    void capacity()
    {
        // One 4 MiB segment, fully allocated; 8 MiB requested, 1 MiB free on the device, capacity
        // unknown. Cached free 0 < 8 MiB, no pending frees, no capacity to blame others:
        // capacity. reserved 4 MiB, allocated 4 MiB.
        Case c;
        c.segments = {{kBase, 4 * MiB, 0, 0}};
        c.blocks = {{kBase, 4 * MiB}};
        c.oom = {0, 8 * MiB, 1 * MiB};
        const auto r = diagnose(next(), c);
        QCOMPARE(r.size(), size_t{1});
        QCOMPARE(r[0].cause, std::string("capacity"));
        QCOMPARE(r[0].time, int64_t{30});
        QCOMPARE(r[0].requestedBytes, 8 * MiB);
        QCOMPARE(r[0].deviceFreeBytes, 1 * MiB);
        QCOMPARE(r[0].reservedBytes, 4 * MiB);
        QCOMPARE(r[0].allocatedBytes, 4 * MiB);
        QCOMPARE(r[0].cachedFreeBytes, uint64_t{0});
    }

    void fragmentationWithoutSettings()
    {
        // Two 4 MiB segments on stream 0, default pool, each with a 2 MiB block in its middle
        // (1 MiB free on each side): cached free 4 MiB in four 1 MiB fragments; 2 MiB requested
        // -> free 4 MiB >= 2 MiB but largest 1 MiB < 2 MiB: fragmentation. No settings recorded:
        // the advice is expandable segments.
        Case c;
        c.segments = {{kBase, 4 * MiB, 0, 0}, {kBase + 16 * MiB, 4 * MiB, 0, 0}};
        c.blocks = {{kBase + 1 * MiB, 2 * MiB}, {kBase + 17 * MiB, 2 * MiB}};
        c.oom = {0, 2 * MiB, 0};
        const auto r = diagnose(next(), c);
        QCOMPARE(r.size(), size_t{1});
        QCOMPARE(r[0].cause, std::string("fragmentation"));
        QCOMPARE(r[0].poolStreamFreeBytes, 4 * MiB);
        QCOMPARE(r[0].poolStreamLargestFreeBytes, 1 * MiB);
        QCOMPARE(r[0].reservedBytes, 8 * MiB);
        QCOMPARE(r[0].allocatedBytes, 4 * MiB);
        QVERIFY(r[0].suggestion.find("expandable_segments:True") != std::string::npos);
    }

    void fragmentationWithExpandableOn()
    {
        // The same state, with expandable segments recorded as on: never advise turning them on.
        Case c;
        c.segments = {{kBase, 4 * MiB, 0, 0}, {kBase + 16 * MiB, 4 * MiB, 0, 0}};
        c.blocks = {{kBase + 1 * MiB, 2 * MiB}, {kBase + 17 * MiB, 2 * MiB}};
        c.oom = {0, 2 * MiB, 0};
        c.settings = R"({"expandable_segments": true, "max_split_size": 268435456})";
        const auto r = diagnose(next(), c);
        QCOMPARE(r[0].cause, std::string("fragmentation"));
        QVERIFY(r[0].suggestion.find("expandable_segments:True") == std::string::npos);
        QVERIFY(r[0].suggestion.find("already on") != std::string::npos);
        // max_split_size is set (256 MiB): no max_split_size_mb advice either.
        QVERIFY(r[0].suggestion.find("max_split_size_mb") == std::string::npos);
    }

    void fragmentationElsewhere()
    {
        // Stream 1's segment (4 MiB) holds 3 MiB free in one piece; the request comes on stream
        // 0, whose only segment (2 MiB) is full. Pool/stream free 0, but the cache holds 3 MiB
        // >= 2 MiB requested: fragmentation, and the advice names other streams or pools.
        Case c;
        c.segments = {{kBase, 2 * MiB, 0, 0}, {kBase + 16 * MiB, 4 * MiB, 1, 0}};
        c.blocks = {{kBase, 2 * MiB}, {kBase + 16 * MiB, 1 * MiB}};
        c.oom = {0, 2 * MiB, 0};
        const auto r = diagnose(next(), c);
        QCOMPARE(r[0].cause, std::string("fragmentation"));
        QCOMPARE(r[0].poolStreamFreeBytes, uint64_t{0});
        QCOMPARE(r[0].cachedFreeBytes, 3 * MiB);
        QVERIFY(r[0].suggestion.find("other streams or private pools") != std::string::npos);
        // The 3 MiB piece (stream 1's segment at +16 MiB, after its 1 MiB block: +17 MiB) fits
        // the 2 MiB request; PyTorch looks only in the request's stream (get_free_block), so
        // the diagnosis names where it was.
        QCOMPARE(r[0].elsewhereFitBytes, 3 * MiB);
        QCOMPARE(r[0].elsewhereFitAddress, kBase + 17 * MiB);
        QCOMPARE(r[0].elsewhereFitStream, 1u);
        QCOMPARE(r[0].elsewhereFitPool, uint64_t{0});
        QVERIFY(r[0].reason.find("on stream 1 (default pool) would have fitted") !=
                std::string::npos);
        QVERIFY(r[0].suggestion.find("cached for stream 1") != std::string::npos);
    }

    void noFitElsewhere()
    {
        // Stream 1 holds 3 MiB free but in two pieces (1 MiB and 2 MiB around a 1 MiB block);
        // 3 MiB requested on stream 0: cached free 3 MiB >= 3 MiB (fragmentation) but no single
        // block of another stream fits: nothing named.
        Case c;
        c.segments = {{kBase, 2 * MiB, 0, 0}, {kBase + 16 * MiB, 4 * MiB, 1, 0}};
        c.blocks = {{kBase, 2 * MiB}, {kBase + 17 * MiB, 1 * MiB}};
        c.oom = {0, 3 * MiB, 0};
        const auto r = diagnose(next(), c);
        QCOMPARE(r[0].cause, std::string("fragmentation"));
        QCOMPARE(r[0].elsewhereFitBytes, uint64_t{0});
        QVERIFY(r[0].reason.find("would have fitted") == std::string::npos);
    }

    void pendingFree()
    {
        // A 4 MiB segment: a 1 MiB live block, and a 3 MiB block freed at 20 but still pending
        // (waiting on another stream) at the OOM (30). 2 MiB requested: the pending block
        // (3 MiB >= 2 MiB) would have fitted -> pending_free, 1 block, 3 MiB. It counts as free:
        // allocated 1 MiB.
        Case c;
        c.segments = {{kBase, 4 * MiB, 0, 0}};
        c.blocks = {{kBase, 1 * MiB}};
        c.pending = {{kBase + 1 * MiB, 3 * MiB}};
        c.oom = {0, 2 * MiB, 0};
        const auto r = diagnose(next(), c);
        QCOMPARE(r[0].cause, std::string("pending_free"));
        QCOMPARE(r[0].pendingFreeFits, int64_t{1});
        QCOMPARE(r[0].pendingFreeFitBytes, 3 * MiB);
        QCOMPARE(r[0].allocatedBytes, 1 * MiB);
    }

    void pendingFreeAndElsewhere()
    {
        // As pendingFree (stream 0: 1 MiB live, 3 MiB pending), plus stream 1's 4 MiB segment
        // at +16 MiB with a 1 MiB block: its 3 MiB at +17 MiB would fit the 2 MiB request too.
        // The first rule still decides (pending_free); the reason names the other block.
        Case c;
        c.segments = {{kBase, 4 * MiB, 0, 0}, {kBase + 16 * MiB, 4 * MiB, 1, 0}};
        c.blocks = {{kBase, 1 * MiB}, {kBase + 16 * MiB, 1 * MiB}};
        c.pending = {{kBase + 1 * MiB, 3 * MiB}};
        c.oom = {0, 2 * MiB, 0};
        const auto r = diagnose(next(), c);
        QCOMPARE(r[0].cause, std::string("pending_free"));
        QCOMPARE(r[0].elsewhereFitBytes, 3 * MiB);
        QCOMPARE(r[0].elsewhereFitAddress, kBase + 17 * MiB);
        QVERIFY(r[0].reason.find("on stream 1 (default pool) would have fitted") !=
                std::string::npos);
    }

    void privatePoolIsNotTheRequestsPool()
    {
        // The only free memory (3 MiB, one piece) is in a private pool's segment (pool 7); the
        // request (2 MiB) is in the default pool, whose segment is full. Pool/stream free 0;
        // cache free 3 MiB >= 2 MiB: fragmentation, not served from the private pool.
        Case c;
        c.segments = {{kBase, 2 * MiB, 0, 0}, {kBase + 16 * MiB, 4 * MiB, 0, 7}};
        c.blocks = {{kBase, 2 * MiB}, {kBase + 16 * MiB, 1 * MiB}};
        c.oom = {0, 2 * MiB, 0};
        const auto r = diagnose(next(), c);
        QCOMPARE(r[0].poolStreamFreeBytes, uint64_t{0});
        QCOMPARE(r[0].poolStreamLargestFreeBytes, uint64_t{0});
        QCOMPARE(r[0].cause, std::string("fragmentation"));
        // The fitting block is pool 7's (at +17 MiB, stream 0): the advice is MemPool's
        // use_on_oom (CUDACachingAllocator malloc: use_on_oom_pools).
        QCOMPARE(r[0].elsewhereFitBytes, 3 * MiB);
        QCOMPARE(r[0].elsewhereFitPool, uint64_t{7});
        QCOMPARE(r[0].elsewhereFitStream, 0u);
        QVERIFY(r[0].reason.find("in private pool 7 (stream 0)") != std::string::npos);
        QVERIFY(r[0].suggestion.find("use_on_oom=True") != std::string::npos);
    }

    void external()
    {
        // Capacity 16 MiB; the allocator reserves 4 MiB, all allocated; the device reports 2 MiB
        // free, so 16 - 2 - 4 = 10 MiB are used outside the allocator. 4 MiB requested: no cached
        // free memory, no pending frees; 2 + 10 >= 4 -> external, external_bytes 10 MiB.
        Case c;
        c.capacity = 16 * MiB;
        c.segments = {{kBase, 4 * MiB, 0, 0}};
        c.blocks = {{kBase, 4 * MiB}};
        c.oom = {0, 4 * MiB, 2 * MiB};
        const auto r = diagnose(next(), c);
        QCOMPARE(r[0].cause, std::string("external"));
        QCOMPARE(r[0].externalBytes, 10 * MiB);
        QCOMPARE(r[0].capacityBytes, 16 * MiB);
    }

    void capacityWithKnownCapacity()
    {
        // Capacity 8 MiB, 4 MiB reserved and allocated, 0 free on the device: 4 MiB outside the
        // allocator, but 0 + 4 < 8 MiB requested: even without them it would fail -> capacity.
        Case c;
        c.capacity = 8 * MiB;
        c.segments = {{kBase, 4 * MiB, 0, 0}};
        c.blocks = {{kBase, 4 * MiB}};
        c.oom = {0, 8 * MiB, 0};
        const auto r = diagnose(next(), c);
        QCOMPARE(r[0].externalBytes, 4 * MiB);
        QCOMPARE(r[0].cause, std::string("capacity"));
    }

    void settingsParse()
    {
        const AllocatorSettings a = parseAllocatorSettings(
            R"({"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True,max_split_size_mb:128",)"
            R"( "max_split_size": -1})");
        QVERIFY(a.expandableKnown); // from the environment string when the bool key is absent
        QVERIFY(a.expandableSegments);
        QVERIFY(a.maxSplitKnown);
        QCOMPARE(a.maxSplitBytes, uint64_t{0}); // -1: unlimited
        const AllocatorSettings b = parseAllocatorSettings(R"({"expandable_segments": false})");
        QVERIFY(b.expandableKnown);
        QVERIFY(!b.expandableSegments);
        QVERIFY(!parseAllocatorSettings("").expandableKnown);
    }
};

QTEST_GUILESS_MAIN(TestOom)
#include "tst_analysis_oom.moc"
