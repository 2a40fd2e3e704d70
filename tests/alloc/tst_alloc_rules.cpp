// Known answers for each rule of the allocator model (core/alloc, docs/whatif.md "Rules"), on
// hand-built request sequences. Addresses are offsets from the device's base: SimpleDevice places
// segments first-fit from there, so the first segment is at B, the next right after it.
#include "core/alloc/caching_allocator.h"

#include <QTest>

using namespace fs::alloc;

namespace {
constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * 1024;
constexpr uint64_t GiB = 1024 * MiB;
constexpr uint64_t B = 0x10000000;

// "addr:size:a|p|f|u" (allocated, pending free, free, unmapped) per block of each segment in
// address order, segments separated by " / ".
std::string layout(const CachingAllocator& a)
{
    std::string out;
    for (const Segment* s : a.segments()) {
        if (!out.empty()) out += " / ";
        for (const Block* b = a.firstBlock(*s); b; b = b->next) {
            if (b != a.firstBlock(*s)) out += " ";
            out += std::to_string((b->addr - B) / KiB) + "K:" + std::to_string(b->size / KiB) +
                   "K:" + (b->allocated ? "a" : (b->pending ? "p" : (b->mapped ? "f" : "u")));
        }
    }
    return out;
}

struct OomCount : Listener
{
    int ooms = 0;
    int created = 0;
    int released = 0;
    uint64_t lastFree = 0;
    void oom(uint64_t, uint32_t, uint64_t deviceFree) override
    {
        ++ooms;
        lastFree = deviceFree;
    }
    void segmentCreated(const Segment&) override { ++created; }
    void segmentReleased(const Segment&) override { ++released; }
};
} // namespace

class TstAllocRules : public QObject
{
    Q_OBJECT
private slots:
    // Rule 1: round_size and roundup_power2_divisions.
    void rounding_data()
    {
        QTest::addColumn<QString>("conf");
        QTest::addColumn<quint64>("request");
        QTest::addColumn<quint64>("rounded");
        QTest::newRow("1 B -> 512") << "" << quint64(1) << quint64(512);
        QTest::newRow("513 -> 1024") << "" << quint64(513) << quint64(1024);
        QTest::newRow("4097 -> 4608 (512 steps)") << "" << quint64(4097) << quint64(4608);
        // divisions 4: 4097 lies in [4096, 8192), steps of 1024: next step 5120.
        QTest::newRow("4097 div4 -> 5120")
            << "roundup_power2_divisions:4" << quint64(4097) << quint64(5120);
        // 1.3 MiB = 1363149 in [1 MiB, 2 MiB), steps of 256 KiB: 1.25 MiB < x -> 1.5 MiB.
        QTest::newRow("1.3 MiB div4 -> 1.5 MiB")
            << "roundup_power2_divisions:4" << quint64(1363149) << quint64(1536 * KiB);
        QTest::newRow("power of 2 stays")
            << "roundup_power2_divisions:4" << quint64(2 * MiB) << quint64(2 * MiB);
        // size must exceed 512 * divisions: 1500 <= 2048 keeps 512-rounding (1536).
        QTest::newRow("tiny div4 -> 512 steps")
            << "roundup_power2_divisions:4" << quint64(1500) << quint64(1536);
        // List form: [1:2, >:8]: interval 1 MiB has 2 divisions, 2 MiB and up 8.
        // 1.3 MiB with 2 divisions -> 1.5 MiB; 2.1 MiB (2202009) with 8 -> 2.25 MiB.
        QTest::newRow("list 1:2") << "roundup_power2_divisions:[1:2,>:8]" << quint64(1363149)
                                  << quint64(1536 * KiB);
        QTest::newRow("list >:8") << "roundup_power2_divisions:[1:2,>:8]" << quint64(2202009)
                                  << quint64(2304 * KiB);
    }
    void rounding()
    {
        QFETCH(QString, conf);
        QFETCH(quint64, request);
        QFETCH(quint64, rounded);
        QCOMPARE(CachingAllocator::roundSize(request, Config::parse(conf.toStdString())), rounded);
    }

    // Rule 3: segment sizes.
    void segmentSizes_data()
    {
        QTest::addColumn<quint64>("rounded");
        QTest::addColumn<quint64>("segment");
        QTest::newRow("small") << quint64(4 * KiB) << quint64(2 * MiB);
        QTest::newRow("1 MiB is small") << quint64(MiB) << quint64(2 * MiB);
        QTest::newRow("1 MiB + 512") << quint64(MiB + 512) << quint64(20 * MiB);
        QTest::newRow("10 MiB - 512") << quint64(10 * MiB - 512) << quint64(20 * MiB);
        QTest::newRow("10 MiB") << quint64(10 * MiB) << quint64(10 * MiB);
        QTest::newRow("13 MiB + 512") << quint64(13 * MiB + 512) << quint64(14 * MiB);
    }
    void segmentSizes()
    {
        QFETCH(quint64, rounded);
        QFETCH(quint64, segment);
        QCOMPARE(CachingAllocator::allocationSize(rounded, Config{}), segment);
    }

    // Rules 2, 4, 5: pools, best fit by (stream, size, address), split thresholds, merging.
    void bestFitSplitMerge()
    {
        SimpleDevice dev(GiB, B);
        CachingAllocator a(Config{}, dev);
        Block* s1 = a.malloc(100 * KiB, 1); // small pool: 2 MiB segment at B, split (rest >= 512)
        Block* s2 = a.malloc(300 * KiB, 1);
        Block* s3 = a.malloc(100 * KiB, 1);
        QCOMPARE(layout(a), std::string("0K:100K:a 100K:300K:a 400K:100K:a 500K:1548K:f"));
        a.free(s1);
        a.free(s3); // merges with the 1548 KiB tail -> 1648 KiB at 400K
        QCOMPARE(layout(a), std::string("0K:100K:f 100K:300K:a 400K:1648K:f"));
        // 80 KiB: best fit is the 100 KiB hole (smallest that fits), not the 1648 KiB tail.
        Block* s4 = a.malloc(80 * KiB, 1);
        QCOMPARE(s4->addr, B);
        // Another stream cannot use stream 1's free blocks: a new 2 MiB segment at B + 2 MiB.
        Block* o = a.malloc(80 * KiB, 2);
        QCOMPARE(o->addr, B + 2 * MiB);
        // Large pool: 3 MiB -> 20 MiB segment at B + 4 MiB; the 17 MiB rest (> 1 MiB) splits off.
        Block* l1 = a.malloc(3 * MiB, 1);
        QCOMPARE(l1->addr, B + 4 * MiB);
        QCOMPARE(l1->size, 3 * MiB);
        // 16.5 MiB fits the 17 MiB rest; the 0.5 MiB left (<= 1 MiB) is not split off: the block
        // keeps 17 MiB.
        Block* l2 = a.malloc(16 * MiB + 512 * KiB, 1);
        QCOMPARE(l2->addr, B + 7 * MiB);
        QCOMPARE(l2->size, 17 * MiB);
        QCOMPARE(a.counters().cudaMallocs, 3);
        QCOMPARE(a.counters().reserved, 24 * MiB);
        QCOMPARE(a.checkConsistency(), std::string());
        for (Block* b : {s2, s4, o, l1, l2})
            a.free(b);
        QCOMPARE(a.counters().allocated, 0ull);
        // Stream 1's small segment at B is whole and free again: a 1 MiB request starts there.
        Block* t = a.malloc(MiB, 1);
        QCOMPARE(t->addr, B);
        QCOMPARE(a.checkConsistency(), std::string());
    }

    void tiesByAddress()
    {
        SimpleDevice dev(GiB, B);
        CachingAllocator a(Config{}, dev);
        // Three 12 MiB segments (12 MiB each, >= 10 MiB: rounded to 2 MiB, unsplit).
        Block* x = a.malloc(12 * MiB, 0);
        Block* y = a.malloc(12 * MiB, 0);
        Block* z = a.malloc(12 * MiB, 0);
        a.free(z);
        a.free(x);
        a.free(y);
        // All three are free 12 MiB blocks; an 11 MiB request takes the lowest address (x at B),
        // and the 1 MiB rest is not split (rest must exceed 1 MiB).
        Block* r = a.malloc(11 * MiB, 0);
        QCOMPARE(r->addr, B);
        QCOMPARE(r->size, 12 * MiB);
    }

    // Rule 6: max_split_size_mb.
    void maxSplitSize()
    {
        SimpleDevice dev(GiB, B);
        CachingAllocator a(Config::parse("max_split_size_mb:64"), dev);
        Block* big = a.malloc(100 * MiB, 0); // 100 MiB segment, oversize (>= 64 MiB)
        a.free(big);
        // A request below the limit never takes an oversize block: new 20 MiB segment.
        Block* small = a.malloc(4 * MiB, 0);
        QCOMPARE(small->addr, B + 100 * MiB);
        // 90 MiB >= limit may take the 100 MiB block (100 < 90 + 20) and does not split it.
        Block* r = a.malloc(90 * MiB, 0);
        QCOMPARE(r->addr, B);
        QCOMPARE(r->size, 100 * MiB);
        a.free(r);
        // 70 MiB: 100 >= 70 + 20, the block is too much bigger: a new 70 MiB segment.
        Block* q = a.malloc(70 * MiB, 0);
        QCOMPARE(q->addr, B + 120 * MiB);
        QCOMPARE(a.counters().cudaMallocs, 3);
        QCOMPARE(a.checkConsistency(), std::string());
        // Without the limit, 70 MiB would split the cached 100 MiB block.
        SimpleDevice dev2(GiB, B);
        CachingAllocator d(Config{}, dev2);
        d.free(d.malloc(100 * MiB, 0));
        Block* q2 = d.malloc(70 * MiB, 0);
        QCOMPARE(q2->addr, B);
        QCOMPARE(q2->size, 70 * MiB);
        QCOMPARE(layout(d), std::string("0K:71680K:a 71680K:30720K:f"));
    }

    // Rule 9a: with max_split_size_mb, a failing cudaMalloc first frees oversize cached blocks.
    void releaseAvailableCachedBlocks()
    {
        SimpleDevice dev(200 * MiB, B);
        OomCount l;
        CachingAllocator a(Config::parse("max_split_size_mb:32"), dev, &l);
        Block* p = a.malloc(80 * MiB, 0);
        Block* q = a.malloc(100 * MiB, 0);
        Block* keep = a.malloc(4 * MiB, 0); // 20 MiB segment: reserved 200 MiB, device full
        a.free(p);
        a.free(q);
        // 60 MiB (>= limit): the cached 80 MiB block is not < 60 + 20, so not reusable.
        // cudaMalloc(60) fails (200 + 60 > 200); the smallest oversize block >= 60 MiB (80 MiB)
        // is freed and the retry succeeds at its address. The 100 MiB block stays cached.
        Block* r = a.malloc(60 * MiB, 0);
        QVERIFY(r);
        QCOMPARE(r->addr, B);
        QCOMPARE(a.counters().retries, 0); // not the free-everything retry
        QCOMPARE(l.released, 1);
        QCOMPARE(a.counters().reserved, 180 * MiB);
        QVERIFY(keep);
        QCOMPARE(a.checkConsistency(), std::string());
    }

    // Rule 9b: free every cached unsplit block and retry; then an OOM.
    void freeCachedAndRetry()
    {
        SimpleDevice dev(64 * MiB, B);
        OomCount l;
        CachingAllocator a(Config{}, dev, &l);
        Block* x = a.malloc(40 * MiB, 0);
        Block* s = a.malloc(4 * KiB, 0); // small segment 2 MiB (reserved 42 MiB)
        a.free(x);
        // 50 MiB: no cached block fits and 42 + 50 > 64 -> release every unsplit cached block
        // (the 40 MiB segment; the small segment holds s), retry: 2 + 50 <= 64.
        Block* y = a.malloc(50 * MiB, 0);
        QVERIFY(y);
        QCOMPARE(a.counters().retries, 1);
        QCOMPARE(l.released, 1);
        // First fit: the released 40 MiB hole at B is too small; 50 MiB goes after the small
        // segment at B + 40 MiB.
        QCOMPARE(y->addr, B + 42 * MiB);
        QCOMPARE(a.counters().reserved, 52 * MiB);
        // 20 MiB more: 52 + 20 > 64, nothing cached to free: OOM, device free = 64 - 52.
        QVERIFY(!a.malloc(20 * MiB, 0));
        QCOMPARE(l.ooms, 1);
        QCOMPARE(l.lastFree, 12 * MiB);
        QCOMPARE(a.counters().peakReserved, 52 * MiB);
        a.free(s);
        a.emptyCache();
        QCOMPARE(a.counters().reserved, 50 * MiB);
        QCOMPARE(a.checkConsistency(), std::string());
    }

    // Rule 12: a free that waits on stream events (record_stream; free_requested ...
    // free_completed in a snapshot's trace) keeps the block out of the pool until it completes.
    // a = 4 MiB: a 20 MiB segment at B, a at 0 and the 16 MiB rest free; b = 4 MiB takes the
    // rest's front (4M), 12 MiB left at 8M. a's free is requested but pending: c = 4 MiB cannot
    // use a's 4 MiB at 0 and takes the 12 MiB block's front (8M), leaving 8 MiB at 12M. (Freed at
    // once, a's 4 MiB at 0 would be the best fit and c would land at 0.) When a's free completes,
    // its 4 MiB at 0 is free (b holds 4M, no merge); d = 4 MiB takes it (best fit: 4 MiB beats
    // 8 MiB).
    void pendingFrees()
    {
        SimpleDevice dev(GiB, B);
        OomCount l;
        CachingAllocator al(Config{}, dev, &l);
        Block* a = al.malloc(4 * MiB, 0);
        Block* b = al.malloc(4 * MiB, 0);
        QCOMPARE(layout(al), std::string("0K:4096K:a 4096K:4096K:a 8192K:12288K:f"));
        al.freeRequested(a);
        QCOMPARE(al.counters().allocated, 4 * MiB); // counted free at the request
        QCOMPARE(al.counters().pendingBlocks, 1);
        QCOMPARE(al.checkConsistency(), std::string());
        Block* c = al.malloc(4 * MiB, 0);
        QCOMPARE(c->addr, B + 8 * MiB);
        QCOMPARE(layout(al), std::string("0K:4096K:p 4096K:4096K:a 8192K:4096K:a 12288K:8192K:f"));
        al.completeFree(a);
        QCOMPARE(al.counters().pendingBlocks, 0);
        QCOMPARE(layout(al), std::string("0K:4096K:f 4096K:4096K:a 8192K:4096K:a 12288K:8192K:f"));
        Block* d = al.malloc(4 * MiB, 0);
        QCOMPARE(d->addr, B);
        QCOMPARE(al.checkConsistency(), std::string());
        for (Block* x : {b, c, d})
            al.free(x);
        QCOMPARE(layout(al), std::string("0K:20480K:f")); // all merged again

        // A pending free and free-and-retry: release_cached_blocks first waits for every event
        // (synchronize_and_free_events). 20 MiB device: x = 12 MiB (a 12 MiB segment at B),
        // its free pending; y = 12 MiB: nothing cached, 12 + 12 > 20 -> the retry completes x's
        // free, releases x's segment, and cudaMalloc puts y at B. Without the synchronize: OOM.
        SimpleDevice small(20 * MiB, B);
        OomCount l2;
        CachingAllocator al2(Config{}, small, &l2);
        Block* x = al2.malloc(12 * MiB, 0);
        al2.freeRequested(x);
        Block* y = al2.malloc(12 * MiB, 0);
        QVERIFY(y);
        QCOMPARE(y->addr, B);
        QCOMPARE(al2.counters().syncedFrees, 1);
        QCOMPARE(al2.counters().pendingBlocks, 0);
        QCOMPARE(l2.ooms, 0);
        QCOMPARE(l2.released, 1);
        QCOMPARE(al2.counters().reserved, 12 * MiB);
        // empty_cache() also waits: a pending block's segment is released.
        al2.freeRequested(y);
        al2.emptyCache();
        QCOMPARE(al2.counters().reserved, 0ull);
        QCOMPARE(al2.checkConsistency(), std::string());
    }

    // Rule 7: garbage_collection_threshold.
    void garbageCollection()
    {
        SimpleDevice dev(GiB, B);
        OomCount l;
        // Limit 100 MiB, threshold 0.5: collect when reserved > 50 MiB.
        CachingAllocator a(Config::parse("garbage_collection_threshold:0.5"), dev, &l, 100 * MiB);
        Block* x = a.malloc(30 * MiB, 0); // 30 MiB segment
        Block* y = a.malloc(24 * MiB, 0); // 24 MiB segment: reserved 54 MiB
        a.free(x);                        // cached 30 MiB (age base = 2 searches so far)
        a.free(y);                        // cached 24 MiB (age base 2)
        // 40 MiB: search 3 finds no cached fit; reserved 54 > 50, both blocks have age 1 >=
        // the average 1: both released, then cudaMalloc(40 MiB).
        Block* z = a.malloc(40 * MiB, 0);
        QVERIFY(z);
        QCOMPARE(a.counters().gcReleases, 2);
        QCOMPARE(a.counters().reserved, 40 * MiB);
        // Without a limit (no per-process fraction) GC never runs.
        SimpleDevice dev2(GiB, B);
        CachingAllocator b(Config::parse("garbage_collection_threshold:0.5"), dev2);
        b.free(b.malloc(30 * MiB, 0));
        b.free(b.malloc(40 * MiB, 0));
        QCOMPARE(b.counters().gcReleases, 0);
        QCOMPARE(b.counters().reserved, 70 * MiB);
    }

    // Rule 10: expandable segments grow one segment per stream and pool.
    void expandableSegments()
    {
        SimpleDevice dev(GiB, B);
        CachingAllocator a(Config::parse("expandable_segments:True"), dev);
        Block* x = a.malloc(30 * MiB, 0); // maps 2 pages of 20 MiB = 40 MiB at the segment start
        QCOMPARE(x->addr, B);
        QCOMPARE(a.counters().reserved, 40 * MiB);
        Block* y = a.malloc(30 * MiB, 0); // 10 MiB free + maps 1 page (20 MiB): right after x
        QCOMPARE(y->addr, B + 30 * MiB);
        QCOMPARE(a.counters().reserved, 60 * MiB);
        QCOMPARE(a.counters().liveSegments, 1);
        // With expandable segments even large blocks split when >= 512 B remains.
        Block* z = a.malloc(MiB + 512, 0);
        QCOMPARE(z->size, MiB + 512);
        QCOMPARE(a.counters().reserved, 80 * MiB);
        a.free(y);
        a.free(z);
        // empty_cache unmaps the whole free pages: from 40 MiB (page boundary after x ends at
        // 30 MiB) to 80 MiB; [30, 40) MiB stays mapped and free.
        a.emptyCache();
        QCOMPARE(a.counters().reserved, 40 * MiB);
        QCOMPARE(a.checkConsistency(), std::string());
        // The next request reuses the lowest unmapped address.
        Block* w = a.malloc(25 * MiB, 0);
        QCOMPARE(w->addr, B + 30 * MiB);
        QCOMPARE(a.counters().reserved, 60 * MiB);
        QCOMPARE(a.checkConsistency(), std::string());
        // A small request gets its own small-pool segment (2 MiB pages).
        Block* s = a.malloc(4 * KiB, 0);
        QVERIFY(s->addr >= B + GiB);
        QCOMPARE(a.counters().reserved, 62 * MiB);
    }

    // Private pools: their blocks are never shared with the default pools.
    void privatePools()
    {
        SimpleDevice dev(GiB, B);
        CachingAllocator a(Config{}, dev);
        Block* g = a.malloc(4 * MiB, 0, 7); // private pool 7: its own 20 MiB segment at B
        a.free(g);
        Block* d = a.malloc(4 * MiB, 0); // default pool cannot use pool 7's cache
        QCOMPARE(d->addr, B + 20 * MiB);
        Block* g2 = a.malloc(4 * MiB, 0, 7); // pool 7 reuses its own block
        QCOMPARE(g2->addr, B);
        a.free(g2);
        a.free(d);
        a.emptyCache(); // pool 7 still in use: only the default pool's segment goes
        QCOMPARE(a.counters().reserved, 20 * MiB);
        a.releasePool(7);
        a.emptyCache();
        QCOMPARE(a.counters().reserved, 0ull);
        QCOMPARE(a.checkConsistency(), std::string());
    }

    // Every setting on random request streams (sizes 1 B..96 MiB, 3 streams, a private pool,
    // frees in random order, empty_cache now and then) on a 1 GiB device: the bookkeeping stays
    // consistent after every call and reserved memory never exceeds the device.
    void randomStreamsStayConsistent_data()
    {
        QTest::addColumn<QString>("conf");
        QTest::addColumn<quint64>("gcLimit");
        QTest::newRow("defaults") << "" << quint64(0);
        QTest::newRow("max_split") << "max_split_size_mb:48" << quint64(0);
        QTest::newRow("roundup") << "roundup_power2_divisions:[1:2,>:8]" << quint64(0);
        QTest::newRow("gc") << "garbage_collection_threshold:0.5" << quint64(GiB);
        QTest::newRow("expandable") << "expandable_segments:True" << quint64(0);
        QTest::newRow("all") << "expandable_segments:True,max_split_size_mb:48,"
                                "roundup_power2_divisions:4"
                             << quint64(0);
    }
    void randomStreamsStayConsistent()
    {
        QFETCH(QString, conf);
        QFETCH(quint64, gcLimit);
        SimpleDevice dev(GiB, B);
        OomCount l;
        CachingAllocator a(Config::parse(conf.toStdString()), dev, &l, gcLimit);
        uint64_t x = 88172645463325252ull; // xorshift: the same stream every run
        auto next = [&] {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            return x;
        };
        std::vector<Block*> live;
        int oks = 0;
        for (int i = 0; i < 4000; ++i) {
            const uint64_t r = next() % 100;
            if (r < 55 || live.empty()) {
                const uint64_t size = 1 + (next() % 4 == 0 ? next() % (96 * MiB) : next() % MiB);
                Block* b =
                    a.malloc(size, static_cast<uint32_t>(next() % 3), next() % 10 == 0 ? 5 : 0);
                if (b) {
                    QVERIFY(b->size >= size);
                    live.push_back(b);
                    ++oks;
                }
            } else if (r < 98) {
                const size_t k = next() % live.size();
                a.free(live[k]);
                live[k] = live.back();
                live.pop_back();
            } else {
                a.emptyCache();
            }
            const std::string bad = a.checkConsistency();
            QVERIFY2(bad.empty(), (std::to_string(i) + ": " + bad).c_str());
            QVERIFY(a.counters().reserved <= GiB);
        }
        QVERIFY(oks > 1000);
        for (Block* b : live)
            a.free(b);
        a.releasePool(5);
        a.emptyCache();
        QCOMPARE(a.counters().allocated, 0ull);
        QCOMPARE(a.checkConsistency(), std::string());
        // Only expandable segments may keep partial pages mapped; everything else goes back.
        if (!conf.contains("expandable")) QCOMPARE(a.counters().reserved, 0ull);
    }

    void configParsing()
    {
        const Config c = Config::parse("expandable_segments:True,max_split_size_mb:128,"
                                       "garbage_collection_threshold:0.6");
        QVERIFY(c.expandableSegments);
        QCOMPARE(c.maxSplitSize, 128 * MiB);
        QCOMPARE(c.gcThreshold, 0.6);
        QCOMPARE(c.describe(), std::string("expandable_segments:True,max_split_size_mb:128,"
                                           "garbage_collection_threshold:0.6"));
        // AcceleratorAllocatorConfig::parseMaxSplitSize (today's PyTorch): at least 20 MiB (2.4
        // wanted more than 20).
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, Config::parse("max_split_size_mb:19"));
        QCOMPARE(Config::parse("max_split_size_mb:20").maxSplitSize, 20 * MiB);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, Config::parse("bogus:1"));
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, Config::parse("max_split_size_mb"));
        // A snapshot's allocator_settings (as torch writes them): defaults here.
        const Config s = Config::fromSnapshotSettings(
            R"({"PYTORCH_CUDA_ALLOC_CONF": "", "max_split_size": -1, )"
            R"("garbage_collection_threshold": 0.0, "expandable_segments": false, )"
            R"("roundup_power2_divisions": {"1": 0, "2": 0, "4": 4}})");
        QCOMPARE(s.maxSplitSize, kNoLimit);
        QVERIFY(!s.expandableSegments);
        QCOMPARE(s.roundupDivisions[2], 4u);
        QCOMPARE(s.roundupDivisions[0], 0u);
        QVERIFY_THROWS_EXCEPTION(std::invalid_argument, Config::fromSnapshotSettings("{\"x\""));
    }
};

QTEST_GUILESS_MAIN(TstAllocRules)
#include "tst_alloc_rules.moc"
