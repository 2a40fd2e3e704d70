// Pending frees are their own state (docs/analysis.md "Pending frees"): blocks freed by the program
// but still used by another stream are neither allocated nor free. On a hand-built session: the
// state, the full replay, the pools, the block list, the memory map and the heatmap.
#include "builder.h"

#include "core/analysis/engine.h"
#include "core/analysis/explore.h"

#include <QTemporaryDir>
#include <QTest>

using namespace fs;
using namespace fs::analysis;
using namespace antest;

namespace {

// One 8 MiB segment R at kBase, created at 0:
//   x [0, 2) MiB allocated at 10, never freed
//   y [2, 3) never allocated
//   z [3, 6) allocated at 10, freed at 20 while stream 7 still used it: pending from 20 on
//   u [6, 8) allocated at 30, freed at 40, pending from 40 until 60
// The session ends at the mark at 100.
void writePendingSession(const std::string& path)
{
    Ingest in(options(path));
    in.begin();
    in.add(ev(EventType::RegionCreate, 0, kBase, 8 * MiB));
    in.add(ev(EventType::Alloc, 10, kBase, 2 * MiB));
    in.add(ev(EventType::Alloc, 10, kBase + 3 * MiB, 3 * MiB));
    in.add(ev(EventType::Free, 20, kBase + 3 * MiB, 3 * MiB));
    Event z = ev(EventType::PendingFree, 20, kBase + 3 * MiB, 3 * MiB);
    z.endTime = kNoTime; // still pending at the end
    z.stream = 7;
    in.add(z);
    in.add(ev(EventType::Alloc, 30, kBase + 6 * MiB, 2 * MiB));
    in.add(ev(EventType::Free, 40, kBase + 6 * MiB, 2 * MiB));
    Event u = ev(EventType::PendingFree, 40, kBase + 6 * MiB, 2 * MiB);
    u.endTime = 60;
    in.add(u);
    mark(in, 100, "done");
    in.end();
}

// What stateAt and stateAtFullReplay must both say.
struct Want
{
    int64_t t;
    uint64_t allocated, free;
    int64_t fragments;
    uint64_t largest;
    double ratio;
    int64_t pendingBlocks;
    uint64_t pending, largestOnce;
    double ratioOnce;
};

void check(const State& s, const Want& w)
{
    QCOMPARE(s.reservedBytes, 8 * MiB);
    QCOMPARE(s.allocatedBytes, w.allocated);
    QCOMPARE(s.freeBytes, w.free);
    QCOMPARE(s.fragmentCount, w.fragments);
    QCOMPARE(s.largestFreeFragmentBytes, w.largest);
    QVERIFY(std::abs(s.fragmentationRatio - w.ratio) < 1e-12);
    QCOMPARE(s.pendingFreeBlocks, w.pendingBlocks);
    QCOMPARE(s.pendingFreeBytes, w.pending);
    QCOMPARE(s.freeIncludingPendingBytes(), w.free + w.pending);
    QCOMPARE(s.largestFreeOncePendingCompleteBytes, w.largestOnce);
    QVERIFY(std::abs(s.fragmentationRatioOncePendingComplete - w.ratioOnce) < 1e-12);
    // Reserved = allocated + pending + free: pending is neither of the other two.
    QCOMPARE(s.allocatedBytes + s.pendingFreeBytes + s.freeBytes, s.reservedBytes);
}

} // namespace

class TestPendingFrees : public QObject
{
    Q_OBJECT
    QTemporaryDir dir_;
    std::string path_;

private slots:
    void initTestCase()
    {
        path_ = dir_.filePath("pending.fragscope").toStdString();
        writePendingSession(path_);
    }

    void stateAtEachInstant_data()
    {
        QTest::addColumn<int>("k");
        for (int k = 0; k < 4; ++k)
            QTest::newRow(QByteArray::number(k)) << k;
    }
    void stateAtEachInstant()
    {
        QFETCH(int, k);
        const Want wants[] = {
            // 15: x and z allocated (5); free y 1 + w 2 in 2 fragments, largest 2, F 1/3.
            {15, 5 * MiB, 3 * MiB, 2, 2 * MiB, 1.0 / 3, 0, 0, 2 * MiB, 1.0 / 3},
            // 45: z (since 20) and u (since 40) pending, 5 MiB in 2 blocks; free only y (1 MiB,
            // F 0). Once they complete y, z and u make one 6 MiB run: free 6, F 0.
            {45, 2 * MiB, 1 * MiB, 1, 1 * MiB, 0, 2, 5 * MiB, 6 * MiB, 0},
            // 70: u's wait ended at 60; z still pending. Free y 1 + w 2, largest 2, F 1/3;
            // once z completes: y + z + w = 6 MiB in one run, F 0 (what memory_viz shows).
            {70, 2 * MiB, 3 * MiB, 2, 2 * MiB, 1.0 / 3, 1, 3 * MiB, 6 * MiB, 0},
            // The end (100): the same.
            {100, 2 * MiB, 3 * MiB, 2, 2 * MiB, 1.0 / 3, 1, 3 * MiB, 6 * MiB, 0},
        };
        const Want& w = wants[k];
        const auto e = Engine::open(path_);
        check(e->stateAt(0, Level::Framework, w.t), w);
        // The slow replay, independent of FragState and the checkpoints, agrees.
        check(e->stateAtFullReplay(0, Level::Framework, w.t), w);
        // One pool (the default): its state is the track's.
        const auto pools = e->poolStatesAt(0, Level::Framework, w.t);
        QCOMPARE(pools.size(), size_t{1});
        check(pools[0].state, w);
        // The fragments leave the pending ranges out.
        uint64_t fragmentBytes = 0;
        for (const Fragment& f : e->fragmentsAt(0, Level::Framework, w.t))
            fragmentBytes += f.size;
        QCOMPARE(fragmentBytes, w.free);
        uint64_t pendingBytes = 0;
        for (const Fragment& f : e->pendingFreesAt(0, Level::Framework, w.t))
            pendingBytes += f.size;
        QCOMPARE(pendingBytes, w.pending);
    }

    void seekingBackAndForth()
    {
        // A replayer that went past a wait's end and comes back places the wait again.
        const auto e = Engine::open(path_);
        const State late = e->stateAt(0, Level::Framework, 70);
        const State mid = e->stateAt(0, Level::Framework, 45);
        QCOMPARE(late.pendingFreeBytes, 3 * MiB);
        QCOMPARE(mid.pendingFreeBytes, 5 * MiB);
        const Explorer x(e);
        QCOMPARE(x.nextEvent(0, Level::Framework, 45), int64_t{60}); // u's wait ends
        QCOMPARE(x.previousEvent(0, Level::Framework, 45), int64_t{40});
    }

    void blockListHasPendingRows()
    {
        const auto e = Engine::open(path_);
        const Explorer x(e);
        const BlocksAt b = x.blocksAt(0, Level::Framework, 45);
        const BlockCounts n = countRows(b.rows);
        QCOMPARE(n.blocks, int64_t{1});    // x
        QCOMPARE(n.fragments, int64_t{1}); // y
        QCOMPARE(n.pending, int64_t{2});   // z, u
        QCOMPARE(b.rows.size(), size_t{4});
        // By address: x, y, z, u.
        QVERIFY(!b.rows[0].free && !b.rows[0].pending);
        QVERIFY(b.rows[1].free);
        const BlockRow& z = b.rows[2];
        QVERIFY(z.pending && !z.free);
        QCOMPARE(z.address, kBase + 3 * MiB);
        QCOMPARE(z.size, 3 * MiB);
        QCOMPARE(z.since, int64_t{20});
        QCOMPARE(z.until, kAlive);
        QCOMPARE(z.stream, uint32_t{7});
        const BlockRow& u = b.rows[3];
        QVERIFY(u.pending);
        QCOMPARE(u.since, int64_t{40});
        QCOMPARE(u.until, int64_t{60});
        // The state beside the rows is the engine's.
        QCOMPARE(b.state.pendingFreeBytes, 5 * MiB);
        // After u's wait: one pending row.
        QCOMPARE(countRows(x.blocksAt(0, Level::Framework, 70).rows).pending, int64_t{1});
    }

    void memoryMapDrawsPendingApart()
    {
        // 4 x 4 cells of 512 KiB along the curve: [0, 4) x, [4, 6) y, [6, 12) z, [12, 16) u.
        const auto e = Engine::open(path_);
        MemmapRequest rq;
        rq.time = 45;
        rq.order = 2;
        const MemmapRaster m = e->memmap(rq);
        QCOMPARE(m.bytesPerCell, 512 * KiB);
        auto at = [&](uint64_t d) {
            int x = 0, y = 0;
            hilbertXY(m.side, d, x, y);
            return m.state[static_cast<size_t>(y * m.side + x)];
        };
        for (uint64_t d = 0; d < 16; ++d) {
            const CellState want = d < 4   ? CellState::Allocated
                                   : d < 6 ? CellState::Free
                                           : CellState::Pending;
            QCOMPARE(static_cast<int>(at(d)), static_cast<int>(want));
        }
        // At 70 u's range is free again.
        rq.time = 70;
        const MemmapRaster later = e->memmap(rq);
        int x = 0, y = 0;
        hilbertXY(later.side, 13, x, y);
        QCOMPARE(static_cast<int>(later.state[static_cast<size_t>(y * later.side + x)]),
                 static_cast<int>(CellState::Free));
    }

    void heatmapDrawsPendingApart()
    {
        // One column per ns over [0, 100), one row per 512 KiB (row 0 the lowest address).
        const auto e = Engine::open(path_);
        const HeatmapRaster h = e->heatmap({.t0 = 0, .t1 = 100, .width = 100, .height = 16});
        auto cell = [&](int x, int y) {
            return static_cast<int>(h.state[static_cast<size_t>(y * h.width + x)]);
        };
        // z's rows (6..11): free before 10, allocated 10..20, pending after.
        QCOMPARE(cell(5, 8), static_cast<int>(CellState::Free));
        QCOMPARE(cell(15, 8), static_cast<int>(CellState::Allocated));
        QCOMPARE(cell(50, 8), static_cast<int>(CellState::Pending));
        QCOMPARE(cell(95, 8), static_cast<int>(CellState::Pending));
        // u's rows (12..15): allocated 30..40, pending 40..60, free after.
        QCOMPARE(cell(35, 13), static_cast<int>(CellState::Allocated));
        QCOMPARE(cell(50, 13), static_cast<int>(CellState::Pending));
        QCOMPARE(cell(70, 13), static_cast<int>(CellState::Free));
        // Pending is not occupancy.
        QCOMPARE(h.occupancy[static_cast<size_t>(13 * h.width + 50)], 0.0f);
    }

    void checkpointKeepsWaits()
    {
        // A wait alive across a checkpoint: R (4 MiB) with a 1 MiB block freed at 20 and pending
        // to the end; then 40000 blocks allocated at 25 and freed at 26 in a second segment
        // (released at 27), enough events for a checkpoint at 26 from which later states are
        // rebuilt.
        const std::string path = dir_.filePath("checkpoint.fragscope").toStdString();
        {
            Ingest in(options(path));
            in.begin();
            in.add(ev(EventType::RegionCreate, 0, kBase, 4 * MiB));
            in.add(ev(EventType::Alloc, 10, kBase + 1 * MiB, 1 * MiB));
            in.add(ev(EventType::Free, 20, kBase + 1 * MiB, 1 * MiB));
            Event p = ev(EventType::PendingFree, 20, kBase + 1 * MiB, 1 * MiB);
            p.endTime = kNoTime;
            in.add(p);
            const uint64_t big = kBase + 1024 * MiB;
            in.add(ev(EventType::RegionCreate, 21, big, 40000 * 4 * KiB));
            for (uint64_t i = 0; i < 40000; ++i)
                in.add(ev(EventType::Alloc, 25, big + i * 4 * KiB, 4 * KiB));
            for (uint64_t i = 0; i < 40000; ++i)
                in.add(ev(EventType::Free, 26, big + i * 4 * KiB, 4 * KiB));
            in.add(ev(EventType::RegionDestroy, 27, big, 40000 * 4 * KiB));
            mark(in, 100, "done");
            in.end();
        }
        const auto e = Engine::open(path);
        for (int64_t t : {24, 30, 100}) {
            const State s = e->stateAt(0, Level::Framework, t);
            const State full = e->stateAtFullReplay(0, Level::Framework, t);
            QCOMPARE(s.pendingFreeBytes, 1 * MiB);
            QCOMPARE(full.pendingFreeBytes, 1 * MiB);
            QCOMPARE(s.freeBytes, full.freeBytes);
            QCOMPARE(s.fragmentCount, full.fragmentCount);
            QCOMPARE(s.largestFreeOncePendingCompleteBytes,
                     full.largestFreeOncePendingCompleteBytes);
        }
        // At 30: R holds only the wait: free 1 + 2 MiB in two fragments, largest 2; once it
        // completes, the whole 4 MiB segment is one run.
        const State s = e->stateAt(0, Level::Framework, 30);
        QCOMPARE(s.freeBytes, 3 * MiB);
        QCOMPARE(s.fragmentCount, int64_t{2});
        QCOMPARE(s.largestFreeFragmentBytes, 2 * MiB);
        QCOMPARE(s.largestFreeOncePendingCompleteBytes, 4 * MiB);
    }
};

QTEST_MAIN(TestPendingFrees)
#include "tst_pending_frees.moc"
