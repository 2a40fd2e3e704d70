// The caching-allocator and VA models of the simulator, on known answers worked out by hand.
#include "capture/sim/caching_allocator.h"
#include "capture/sim/va_space.h"
#include "checking_sink.h"

#include <QTest>

using namespace fs::sim;

namespace {
constexpr uint64_t KiB = 1024;
constexpr uint64_t MiB = 1024 * 1024;
} // namespace

class TstAllocator : public QObject
{
    Q_OBJECT
private slots:
    void sizes_data()
    {
        QTest::addColumn<quint64>("request");
        QTest::addColumn<quint64>("rounded");
        QTest::addColumn<quint64>("segment");
        // Rounded up to 512 B; <= 1 MiB -> 2 MiB segment; < 10 MiB -> 20 MiB; else to 2 MiB.
        QTest::newRow("1 B") << quint64(1) << quint64(512) << quint64(2 * MiB);
        QTest::newRow("512 B") << quint64(512) << quint64(512) << quint64(2 * MiB);
        QTest::newRow("513 B") << quint64(513) << quint64(1024) << quint64(2 * MiB);
        QTest::newRow("1 MiB") << quint64(MiB) << quint64(MiB) << quint64(2 * MiB);
        QTest::newRow("1 MiB + 1") << quint64(MiB + 1) << quint64(MiB + 512) << quint64(20 * MiB);
        QTest::newRow("10 MiB - 1")
            << quint64(10 * MiB - 1) << quint64(10 * MiB) << quint64(10 * MiB);
        QTest::newRow("9.5 MiB") << quint64(9 * MiB + 512 * KiB) << quint64(9 * MiB + 512 * KiB)
                                 << quint64(20 * MiB);
        QTest::newRow("10 MiB + 1")
            << quint64(10 * MiB + 1) << quint64(10 * MiB + 512) << quint64(12 * MiB);
        QTest::newRow("13 MiB") << quint64(13 * MiB) << quint64(13 * MiB) << quint64(14 * MiB);
    }
    void sizes()
    {
        QFETCH(quint64, request);
        QFETCH(quint64, rounded);
        QFETCH(quint64, segment);
        QCOMPARE(CachingAllocator::roundSize(request), rounded);
        QCOMPARE(CachingAllocator::segmentSize(rounded), segment);
    }

    void smallBlocksSplitBestFitCoalesce()
    {
        fstest::CheckingSink sink(1ull << 30);
        EventWriter w(sink);
        CachingAllocator a(w, 1ull << 30, 0, 1);
        const Name tag = w.intern("t");
        Block* b1 = a.allocate(100 * KiB, 1, tag, 10); // 102400 B, a multiple of 512
        QVERIFY(b1);
        const uint64_t seg = b1->addr;
        QCOMPARE(b1->size, 100 * KiB);
        QCOMPARE(a.counters().segmentsCreated, 1);
        QCOMPARE(a.counters().reserved, 2 * MiB);
        // 200 KiB + 1 rounds to 205312 B and is cut from the rest of the same segment.
        Block* b2 = a.allocate(200 * KiB + 1, 1, tag, 20);
        QCOMPARE(b2->addr, seg + 100 * KiB);
        QCOMPARE(b2->size, 205312ull);
        a.free(b1, 30);
        // Free blocks now: [seg, +102400) and the tail 2097152 - 102400 - 205312 = 1789440 B.
        // Best fit for 50 KiB is the 100 KiB hole at the segment start, split into 51200 + 51200.
        Block* b3 = a.allocate(50 * KiB, 1, tag, 40);
        QCOMPARE(b3->addr, seg);
        FreeSpace fsp = a.freeSpace();
        QCOMPARE(fsp.fragments, 2);
        QCOMPARE(fsp.largestFree, 1789440ull);
        QCOMPARE(fsp.totalFree, 1789440ull + 51200ull);
        QCOMPARE(a.checkConsistency(), std::string());
        a.free(b2, 50);
        a.free(b3, 60);
        // Everything coalesces back into one free block covering the segment.
        fsp = a.freeSpace();
        QCOMPARE(fsp.fragments, 1);
        QCOMPARE(fsp.largestFree, 2 * MiB);
        QCOMPARE(fsp.fragmentation(), 0.0);
        QCOMPARE(a.counters().reserved, 2 * MiB); // still cached
        a.emptyCache(70);
        QCOMPARE(a.counters().reserved, 0ull);
        QCOMPARE(a.counters().segmentsReleased, 1);
        QCOMPARE(a.checkConsistency(), std::string());
        QVERIFY2(sink.violations.isEmpty(), qPrintable(sink.violations.join("; ")));
        QCOMPARE(sink.byType[fs::EventType::Alloc], 3);
        QCOMPARE(sink.byType[fs::EventType::Free], 3);
        QCOMPARE(sink.byType[fs::EventType::RegionCreate], 1);
        QCOMPARE(sink.byType[fs::EventType::RegionDestroy], 1);
    }

    void largeBlocksPoolsAndStreams()
    {
        fstest::CheckingSink sink(1ull << 30);
        EventWriter w(sink);
        CachingAllocator a(w, 1ull << 30, 0, 2);
        const Name tag = w.intern("t");
        Block* x = a.allocate(3 * MiB, 1, tag, 1); // 20 MiB segment, 17 MiB left (> 1 MiB: split)
        QCOMPARE(x->size, 3 * MiB);
        QCOMPARE(a.counters().reserved, 20 * MiB);
        Block* y = a.allocate(12 * MiB, 1, tag, 2); // fits the 17 MiB rest: 5 MiB left
        QCOMPARE(y->addr, x->addr + 3 * MiB);
        QCOMPARE(a.counters().segmentsCreated, 1);
        Block* z = a.allocate(12 * MiB + 1, 1, tag, 3); // 5 MiB is too small: new 14 MiB segment
        QCOMPARE(a.counters().segmentsCreated, 2);
        QCOMPARE(a.counters().reserved, 34 * MiB);
        // A small request never takes a large-pool block: a 2 MiB segment of its own.
        Block* s = a.allocate(4 * KiB, 1, tag, 4);
        QCOMPARE(a.counters().segmentsCreated, 3);
        // Another stream never takes this stream's free blocks.
        Block* o = a.allocate(2 * MiB, 2, tag, 5);
        QCOMPARE(a.counters().segmentsCreated, 4);
        QCOMPARE(o->stream, 2u);
        // 19.5 MiB gets a 20 MiB segment; the 0.5 MiB rest is not worth a block (<= 1 MiB).
        Block* big = a.allocate(19 * MiB + 512 * KiB, 3, tag, 6);
        QCOMPARE(big->size, 20 * MiB);
        QCOMPARE(big->requested, 19 * MiB + 512 * KiB);
        QCOMPARE(a.checkConsistency(), std::string());
        for (Block* b : {x, y, z, s, o, big})
            a.free(b, 7);
        a.emptyCache(8);
        QCOMPARE(a.counters().liveSegments, 0);
        QCOMPARE(a.counters().allocated, 0ull);
        QVERIFY2(sink.violations.isEmpty(), qPrintable(sink.violations.join("; ")));
        QCOMPARE(sink.liveSegments(), size_t(0));
    }

    void capacityReleasesCacheThenOoms()
    {
        const uint64_t cap = 64 * MiB;
        fstest::CheckingSink sink(cap);
        EventWriter w(sink);
        CachingAllocator a(w, cap, 0, 3);
        const Name tag = w.intern("t");
        Block* b = a.allocate(40 * MiB, 1, tag, 1);
        a.free(b, 2); // 40 MiB segment stays cached
        // 40 + 30 > 64: the cached segment is released, then the 30 MiB segment fits.
        Block* c = a.allocate(30 * MiB, 2, tag, 3);
        QVERIFY(c);
        QCOMPARE(a.counters().segmentsReleased, 1);
        QCOMPARE(a.counters().cacheFlushes, 1);
        QCOMPARE(a.counters().reserved, 30 * MiB);
        // 30 + 40 > 64 and nothing is cached: an OOM event, no block.
        QVERIFY(!a.allocate(40 * MiB, 2, tag, 4));
        QCOMPARE(a.counters().ooms, 1);
        QCOMPARE(sink.byType[fs::EventType::Oom], 1);
        // The quiet variant fails without an event.
        QVERIFY(!a.tryAllocate(40 * MiB, 2, tag, 5));
        QCOMPARE(a.counters().quietFailures, 1);
        QCOMPARE(sink.byType[fs::EventType::Oom], 1);
        QCOMPARE(a.counters().peakReserved, 40 * MiB);
        a.free(c, 6);
        QCOMPARE(a.checkConsistency(), std::string());
        QVERIFY2(sink.violations.isEmpty(), qPrintable(sink.violations.join("; ")));
    }

    void vaSpaceIsSparseAlignedAndCoalesces()
    {
        const uint64_t base = 0x7f0000000000ULL;
        VaSpace va(base, 1ull << 40, 42);
        Rng rng(7);
        std::map<uint64_t, uint64_t> live;
        for (int i = 0; i < 2000; ++i) {
            if (!live.empty() && rng.chance(0.4)) {
                auto it = live.begin();
                std::advance(it, static_cast<long>(rng.below(live.size())));
                va.release(it->first, it->second);
                live.erase(it);
                continue;
            }
            const uint64_t size = (1 + rng.below(20)) * VaSpace::kGranule;
            const uint64_t at = va.place(size);
            QVERIFY(at >= base);
            QCOMPARE(at % VaSpace::kGranule, 0ull);
            auto next = live.lower_bound(at);
            QVERIFY(next == live.end() || next->first >= at + size);
            QVERIFY(next == live.begin() || std::prev(next)->first + std::prev(next)->second <= at);
            live[at] = size;
        }
        for (const auto& [a, s] : live)
            va.release(a, s);
        QCOMPARE(va.holes(), size_t(1)); // everything coalesced back into the initial range
        QCOMPARE(va.place(VaSpace::kGranule) % VaSpace::kGranule, 0ull);
    }

    void vaSpaceLeavesHoles()
    {
        // With 200 placements, some skip granules: the highest end is above the packed total.
        VaSpace va(0x7f0000000000ULL, 1ull << 40, 5);
        uint64_t end = 0;
        for (int i = 0; i < 200; ++i)
            end = std::max(end, va.place(VaSpace::kGranule) + VaSpace::kGranule);
        QVERIFY(end > 0x7f0000000000ULL + 200 * VaSpace::kGranule);
        QVERIFY(va.holes() > 1);
    }
};

QTEST_GUILESS_MAIN(TstAllocator)
#include "tst_allocator.moc"
